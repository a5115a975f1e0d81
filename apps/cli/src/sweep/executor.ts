import { availableParallelism } from "node:os";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Piscina } from "piscina";
import { runPoint, type PointTask, type SweepRow } from "@kvsim/sweep";
import { fileHost } from "./host.js";

/** Runs points: in this thread, in a pool of worker threads, or on a queue. */
export interface PointExecutor {
  /** How many points it runs at once. */
  readonly parallelism: number;
  run(task: PointTask): Promise<SweepRow>;
  close(): Promise<void>;
}

/** The default of --jobs: every core. */
export const defaultJobs = (): number => availableParallelism();

/** One point at a time, in this thread. */
export function inlineExecutor(): PointExecutor {
  return { parallelism: 1, run: (task) => runPoint(task, fileHost), close: () => Promise.resolve() };
}

/**
 * The worker thread's entry: dist/point-worker.js beside the built CLI. Run from source (tests),
 * this file is a .ts module, and the thread gets tsx's loader and the source export condition so
 * it runs the same TypeScript sources as the tests.
 */
function workerEntry(): { filename: string; execArgv: string[] } {
  const here = import.meta.url;
  if (!here.endsWith(".ts")) return { filename: new URL("./point-worker.js", here).href, execArgv: [] };
  const tsx = createRequire(here).resolve("tsx");
  return { filename: new URL("./point-worker.ts", here).href, execArgv: ["--import", pathToFileURL(tsx).href, "--conditions=@kvsim/source"] };
}

/** Up to `jobs` points at once, each in a worker thread (piscina). */
export function poolExecutor(jobs: number): PointExecutor {
  const { filename, execArgv } = workerEntry();
  // Threads start at once, so they load while the sweep reads its inputs.
  const pool = new Piscina<PointTask, SweepRow>({ filename, execArgv, minThreads: jobs, maxThreads: jobs, idleTimeout: 1000 });
  return {
    parallelism: jobs,
    run: (task) => pool.run(task),
    close: () => pool.destroy(),
  };
}

/**
 * Up to `jobs` points at once: one in this thread, the others in `jobs - 1` worker threads. This
 * thread is otherwise idle during a local sweep, and each thread pays its own module loading and
 * JIT warm-up, so one thread fewer is that much less work. The same `runPoint` runs everywhere,
 * so the rows do not depend on where a point ran.
 */
export function localExecutor(jobs: number): PointExecutor {
  if (jobs === 1) return inlineExecutor();
  const pool = poolExecutor(jobs - 1);
  let inlineBusy = false;
  return {
    parallelism: jobs,
    async run(task) {
      if (inlineBusy) return pool.run(task);
      inlineBusy = true;
      try {
        return await runPoint(task, fileHost);
      } finally {
        inlineBusy = false;
      }
    },
    close: () => pool.close(),
  };
}
