import { runPoint, type PointHost, type PointTask } from "./point.js";
import type { SweepRow } from "./rows.js";

/** Runs points: in this thread, in a pool of worker threads, or on a queue. */
export interface PointExecutor {
  /** How many points it runs at once (`Infinity` for a queue: every point is handed at once). */
  readonly parallelism: number;
  /** How many points to hand it at once to keep every thread busy (at least `parallelism`). */
  readonly queueDepth?: number;
  run(task: PointTask): Promise<SweepRow>;
  close(): Promise<void>;
}

/** One point at a time, in this thread, reading traces through `host`. */
export function inlineExecutor(host: PointHost): PointExecutor {
  return { parallelism: 1, run: (task) => runPoint(task, host), close: () => Promise.resolve() };
}
