// The entry of a worker thread of the sweep pool (built to dist/point-worker.js): one task in,
// one row out. It runs exactly what an in-process point runs.
import { runPoint, type PointTask, type SweepRow } from "@kvsim/sweep";
import { fileHost } from "./host.js";

export default function runTask(task: PointTask): Promise<SweepRow> {
  return runPoint(task, fileHost);
}
