import { availableParallelism } from "node:os";
import { inlineExecutor, type PointExecutor } from "@kvsim/sweep";
import { threadExecutor, threadPoolExecutor, type ThreadExecutor } from "@kvsim/sweep-threads";
import { fileHost, knownHash } from "./host.js";
import { pointWorkerEntry } from "./worker-entry.js";

/** The default of --jobs: every core. */
export const defaultJobs = (): number => availableParallelism();

/** Up to `jobs` points at once, each in a worker thread; `kvsim worker` runs its points so. */
export const poolExecutor = (jobs: number): PointExecutor => threadPoolExecutor({ jobs, worker: pointWorkerEntry() });

/**
 * Up to `jobs` points at once: one in this thread, the others in `jobs - 1` worker threads that
 * share one queue with it (@kvsim/sweep-threads), all reading traces from disk (host.ts). A
 * worker thread is told the hashes this thread has already taken. The pool starts when `eager`
 * (a grid: the threads load while the spec, profiles and trace are read), or else when a point
 * first waits for a thread. With `inline: false` (tests) every point runs in one of `jobs` worker
 * threads.
 */
export function localExecutor(jobs: number, options: { eager?: boolean; inline?: boolean } = {}): ThreadExecutor {
  return threadExecutor({
    jobs,
    worker: pointWorkerEntry(),
    ...(options.inline === false ? {} : { inline: inlineExecutor(fileHost) }),
    ...(options.eager === undefined ? {} : { eager: options.eager }),
    hint: (task) => (task.trace === null ? undefined : knownHash(task.trace.path)),
  });
}
