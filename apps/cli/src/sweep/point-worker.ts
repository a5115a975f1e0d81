// The entry of a worker thread of the sweep pool (built on its own to dist/point-worker.js, with
// every dependency bundled in, so a thread loads one file and only what a point needs): one task
// in, one row out. It runs exactly what an in-process point runs, reading traces as the CLI does.
import { pointWorker } from "@kvsim/sweep-threads/worker";
import { fileHost, rememberHash } from "./host.js";

export default pointWorker(fileHost, { onHint: rememberHash });
