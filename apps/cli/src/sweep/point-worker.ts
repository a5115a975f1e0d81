// The entry of a worker thread of the sweep pool (built on its own to dist/point-worker.js, with
// every dependency bundled in, so a thread loads one file and only what a point needs): one task
// in, one row out. It runs exactly what an in-process point runs.
import { parentPort } from "node:worker_threads";
import { runPoint, type SweepRow } from "@kvsim/sweep";
import { fileHost, rememberHash } from "./host.js";
import { CLAIM_FREE, CLAIM_WORKER, WORKER_LOADED, type WorkerTask } from "./worker-protocol.js";

let previous: Promise<unknown> = Promise.resolve();

/**
 * Runs a task, one at a time in the order they arrive (the pool hands a thread its next task
 * while it runs one). A task with a claim runs only if the main thread has not taken it back
 * first; then the answer is null.
 */
export default function runTask(message: WorkerTask): Promise<SweepRow | null> {
  const { task, claim, known } = message;
  if (known !== undefined) rememberHash(known);
  const run = previous.then(() =>
    claim === undefined || Atomics.compareExchange(claim, 0, CLAIM_FREE, CLAIM_WORKER) === CLAIM_FREE ? runPoint(task, fileHost) : null,
  );
  previous = run.catch(() => undefined);
  return run;
}

// Tell the main thread this thread has loaded and can take points.
parentPort?.postMessage(WORKER_LOADED);
