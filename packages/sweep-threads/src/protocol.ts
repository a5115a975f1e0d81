import type { PointTask } from "@kvsim/sweep";

/**
 * What the main thread hands a worker thread: the task, and (in a local sweep) a shared flag
 * saying who runs it. The worker sets it from free to worker when it starts the task; the main
 * thread, when it is idle, may set it from free to main and run the task itself. Whoever changes
 * it first runs the point; the other side does nothing.
 */
export interface WorkerTask {
  readonly task: PointTask;
  readonly claim?: Int32Array;
  /** What the main thread knows that saves the worker work (the caller's `hint`, e.g. a trace's hash already taken). */
  readonly hint?: unknown;
}

export const CLAIM_FREE = 0;
export const CLAIM_WORKER = 1;
export const CLAIM_MAIN = 2;

/** The message a worker thread posts once its module has loaded. */
export const WORKER_LOADED = "kvsim-point-worker-loaded";

/** Points a worker thread of a local sweep is handed before it finishes the one it runs, so it never waits for the main thread. */
export const TASKS_PER_THREAD = 2;
