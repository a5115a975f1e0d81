import { inlineExecutor, runPoint, type PointTask, type SweepRow } from "@kvsim/sweep";
import { describe, expect, it } from "vitest";
import { threadExecutor, threadPoolExecutor } from "./index.js";
import { CLAIM_MAIN } from "./protocol.js";
import { memoryHost, taskAt } from "./test-host.js";
import { pointWorker } from "./worker.js";

const worker = new URL("./test-worker.ts", import.meta.url);
const withoutWall = (rows: readonly SweepRow[]) => rows.map((r) => ({ ...r, wall_time_ms: 0 }));
// Eight points at speedups 1 to 8.
const tasks: PointTask[] = Array.from({ length: 8 }, (_, i) =>
  taskAt(i, { "workload.speedup": i + 1 }, [{ path: ["workload", "speedup"], value: i + 1, source: "test" }]),
);

describe("a worker thread's side", () => {
  it("runs a task, but not one the main thread took back first", async () => {
    const run = pointWorker(memoryHost);
    const here = await runPoint(tasks[3]!, memoryHost);
    expect(withoutWall([(await run({ task: tasks[3]! }))!])).toEqual(withoutWall([here]));
    const claim = new Int32Array(new SharedArrayBuffer(4));
    Atomics.store(claim, 0, CLAIM_MAIN);
    expect(await run({ task: tasks[3]!, claim })).toBeNull();
  });
});

describe("the thread executor", () => {
  it("shares the points between this thread and a loaded worker thread, each point run once", { timeout: 120_000 }, async () => {
    const here = await Promise.all(tasks.map((t) => runPoint(t, memoryHost)));
    expect(here.map((r) => r.status)).toEqual(Array(8).fill("ok"));
    const ex = threadExecutor({ jobs: 2, worker, inline: inlineExecutor(memoryHost) });
    try {
      await ex.workerLoaded();
      const rows = await Promise.all(tasks.map((t) => ex.run(t)));
      expect(withoutWall(rows)).toEqual(withoutWall(here));
      // Every point was answered exactly once: here (taken back or copied ones included) or in the worker.
      expect(ex.counts.inline + ex.counts.worker).toBe(8);
      expect(ex.counts.takenBack + ex.counts.copied).toBeLessThanOrEqual(8);
    } finally {
      await ex.close();
    }
  });

  it("runs every point in a worker thread without this thread, one per thread at a time for a queue worker", { timeout: 120_000 }, async () => {
    const here = await Promise.all(tasks.slice(0, 3).map((t) => runPoint(t, memoryHost)));
    const ex = threadPoolExecutor({ jobs: 2, worker });
    try {
      expect(ex.parallelism).toBe(2);
      expect(withoutWall(await Promise.all(tasks.slice(0, 3).map((t) => ex.run(t))))).toEqual(withoutWall(here));
    } finally {
      await ex.close();
    }
  });
});
