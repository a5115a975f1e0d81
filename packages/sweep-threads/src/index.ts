export { threadExecutor, threadPoolExecutor, prestartThreads, discardPrestartedThreads, type ThreadExecutor, type ThreadExecutorOptions } from "./executor.js";
export type { WorkerEntry } from "./pool.js";
