// The worker threads' side: a worker entry module calls `pointWorker` with the host its points
// read traces through and exports the result as its default export (see the README). It runs
// exactly what a point run in the main thread runs.
import { parentPort } from "node:worker_threads";
import { runPoint, type PointHost, type SweepRow } from "@kvsim/sweep";
import { CLAIM_FREE, CLAIM_WORKER, WORKER_LOADED, type WorkerTask } from "./protocol.js";

export type { WorkerTask } from "./protocol.js";

export interface PointWorkerOptions<H> {
  /** Takes the main thread's hint handed with a task (`threadExecutor`'s `hint`), before the task runs. */
  readonly onHint?: (hint: H) => void;
}

/**
 * The function a worker entry exports as its default (piscina calls it with each task): runs the
 * tasks one at a time in the order they arrive (the pool hands a thread its next task while it
 * runs one), reading traces through `host`. A task with a claim runs only if the main thread has
 * not taken it back first; then the answer is null. Tells the main thread this thread has loaded.
 */
export function pointWorker<H = never>(host: PointHost, options: PointWorkerOptions<H> = {}): (message: WorkerTask) => Promise<SweepRow | null> {
  const { onHint } = options;
  let previous: Promise<unknown> = Promise.resolve();
  const runTask = (message: WorkerTask): Promise<SweepRow | null> => {
    const { task, claim, hint } = message;
    if (hint !== undefined) onHint?.(hint as H);
    const run = previous.then(() =>
      claim === undefined || Atomics.compareExchange(claim, 0, CLAIM_FREE, CLAIM_WORKER) === CLAIM_FREE ? runPoint(task, host) : null,
    );
    previous = run.catch(() => undefined);
    return run;
  };
  // The entry module has loaded (its imports first): this thread can take points.
  parentPort?.postMessage(WORKER_LOADED);
  return runTask;
}
