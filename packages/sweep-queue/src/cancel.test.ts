import { Queue } from "bullmq";
import type { PointTask, SweepRow } from "@kvsim/sweep";
import { afterAll, describe, expect, it } from "vitest";
import { cancelSweep, DEFAULT_LOCK_MS, DEFAULT_STALLED_MS, jobIdFor, pingRedis, removeQueue, startWorker, SweepQueue } from "./index.js";

// The project's machines run Redis on 127.0.0.1:6379 (KVSIM_TEST_REDIS overrides it). Without it
// this file says so in one line and skips.
const REDIS = process.env.KVSIM_TEST_REDIS ?? "redis://127.0.0.1:6379/0";
let redisDown: string | undefined;
try {
  await pingRedis(REDIS, 1000);
} catch (e) {
  redisDown = e instanceof Error ? e.message : String(e);
}
if (redisDown !== undefined) console.warn(`SKIPPED the sweep cancel test: ${redisDown}`);

const PREFIX = `kvsim-cancel-test-${process.pid}-${Date.now()}`;
const target = { url: REDIS, prefix: PREFIX };
const task = (point: number): PointTask => ({
  point,
  settings: { "engine.max_num_seqs": point },
  spec: { version: 1 },
  trace: { path: "/t.jsonl", sha256: "ab" },
});
const okRow = (t: PointTask): SweepRow => ({ point: t.point, settings: t.settings, status: "ok", reason: null, report: null, digest: "d", wall_time_ms: 1 });

afterAll(async () => {
  if (redisDown === undefined) await removeQueue(target);
});

async function until(what: string, cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("worker lock defaults", () => {
  it("bring a dead worker's point back within seconds: a 10 s lock renewed at 5 s, a stalled check every 5 s", () => {
    // Worst case back on the queue: the lock runs out (10 s) and the next check sees it (5 s later) = 15 s, against 60 s with BullMQ's 30 s and 30 s.
    expect([DEFAULT_LOCK_MS, DEFAULT_STALLED_MS, DEFAULT_LOCK_MS + DEFAULT_STALLED_MS]).toEqual([10_000, 5_000, 15_000]);
  });
});

describe.skipIf(redisDown !== undefined)("kvsim sweep --cancel (BullMQ on Redis)", () => {
  it(
    "removes a sweep's waiting points, leaves other sweeps', workers skip its points, and running the id again takes the cancel back",
    { timeout: 60_000 },
    async () => {
      const queue = new Queue("kvsim-sweep", { connection: { url: REDIS, maxRetriesPerRequest: null }, prefix: PREFIX });
      try {
        // Three points of sweep s1 and one of s2 wait on the queue, no worker running.
        for (const [sweepId, t] of [
          ["s1", task(0)],
          ["s1", task(1)],
          ["s1", task(2)],
          ["s2", task(0)],
        ] as const) {
          await queue.add("point", { sweepId, task: t }, { jobId: jobIdFor(sweepId, t) });
        }
        expect(await cancelSweep(target, "s1")).toEqual({ waiting: 3, finished: 0, running: 0 });
        expect((await queue.getJobs(["waiting", "wait"])).map((j) => j.id)).toEqual([jobIdFor("s2", task(0))]);

        // A point of s1 that reaches the queue afterwards (a sweep process still adding) is skipped.
        await queue.add("point", { sweepId: "s1", task: task(3) }, { jobId: jobIdFor("s1", task(3)) });
        const ran: number[] = [];
        const events: string[] = [];
        const worker = await startWorker(
          target,
          (t) => {
            ran.push(t.point);
            return Promise.resolve(okRow(t));
          },
          { concurrency: 1, onPoint: (e) => events.push(`${e.kind} ${e.jobId}${e.reason === undefined ? "" : `: ${e.reason}`}`) },
        );
        try {
          await until("both points handled", () => events.filter((e) => !e.startsWith("started")).length >= 2);
          expect(ran).toEqual([0]);
          expect(events).toContain(`skipped ${jobIdFor("s1", task(3))}: sweep s1 was cancelled (kvsim sweep --cancel)`);

          // Running sweep s1 again takes the cancel back: its point runs.
          const sweep = await SweepQueue.open(target);
          try {
            const row = await sweep.run("s1", task(4));
            expect([row.status, ran]).toEqual(["ok", [0, 4]]);
          } finally {
            await sweep.close();
          }
        } finally {
          await worker.close();
        }
      } finally {
        await queue.close();
      }
    },
  );
});
