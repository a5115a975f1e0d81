import { inlineExecutor, parseSla, runSweep, type PointExecutor, type SweepRow } from "@kvsim/sweep";
import { describe, expect, it } from "vitest";
import { threadExecutor } from "./index.js";
import { memoryHost, specAt, taskAt } from "./test-host.js";

const worker = new URL("./test-worker.ts", import.meta.url);
const withoutWall = (rows: readonly SweepRow[]) => rows.map((r) => ({ ...r, wall_time_ms: 0 }));
const search = (executor: PointExecutor) =>
  runSweep({ find: "max-rate", sla: parseSla("mean_ttft_ms<=12"), spec: specAt, executor, task: (p, s, o) => Promise.resolve(taskAt(p, s, o)) });

describe("a max-rate search through runSweep on worker threads, without the CLI", () => {
  it("finds what the search in this thread finds, with the same rows", { timeout: 120_000 }, async () => {
    const here = await search(inlineExecutor(memoryHost));
    // Every point in one of two worker threads.
    const threads = threadExecutor({ jobs: 2, worker });
    try {
      const there = await search(threads);
      // The second request meets TTFT <= 12 ms only when it arrives after the first ends (14 ms):
      // 100 / s >= 14, s <= 7.142857...; the search (1% tolerance) ends at 7.125 and 7.188.
      expect([there.searches![0]!.answer, there.searches![0]!.failing]).toEqual([7.125, 7.188]);
      expect(withoutWall(there.rows)).toEqual(withoutWall(here.rows));
      expect(threads.counts).toEqual({ inline: 0, worker: 10, takenBack: 0, copied: 0 });
    } finally {
      await threads.close();
    }
  });

  it("never starts a thread when this thread runs points too and the search probes one at a time", async () => {
    const ex = threadExecutor({ jobs: 2, worker, inline: inlineExecutor(memoryHost) });
    try {
      const { searches } = await search(ex);
      expect(searches![0]!.answer).toBe(7.125);
      expect(ex.counts).toEqual({ inline: 10, worker: 0, takenBack: 0, copied: 0 });
    } finally {
      await ex.close();
    }
  });
});
