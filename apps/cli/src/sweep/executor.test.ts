import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseDocumentText, type Profile } from "@kvsim/profile-schema";
import { pointTask, runPoint, specWithOverrides, type PointTask, type SweepRow } from "@kvsim/sweep";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { threadExecutor } from "@kvsim/sweep-threads";
import { localExecutor } from "./executor.js";
import { fileHost, knownHash } from "./host.js";

// The golden seed S1 (fixed prefill 10 ms, decode 2 ms): a 4 + 2 token request alone has TTFT 12.
const PROFILE = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 } as Profile;
let dir: string;
let tasks: PointTask[];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-executor-"));
  const trace = join(dir, "trace.jsonl");
  const text = [
    '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}',
    '{"request_id":"b","arrival_ms":5,"input_tokens":4,"output_tokens":2}',
    "",
  ].join("\n");
  writeFileSync(trace, text);
  const sha256 = createHash("sha256").update(text).digest("hex");
  const spec = specWithOverrides(
    parseDocumentText(
      `version: 1
profile: /p/linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 1 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ${trace}, format: kvsim }
`,
      join(dir, "spec.yaml"),
    ),
  );
  const profiles = new Map([["/p/linear.json", PROFILE]]);
  // Eight points that differ in max_num_seqs (1 or 2) and prefill time (10 to 40 ms).
  tasks = Array.from({ length: 8 }, (_, i) => {
    const seqs = 1 + (i % 2);
    const prefill = 10 * (1 + Math.floor(i / 2));
    const s = { ...spec, engine: { ...spec.engine, max_num_seqs: seqs }, timing: { type: "fixed" as const, prefill_ms: prefill, decode_ms: 2 } };
    return pointTask(i, { "engine.max_num_seqs": seqs, "timing.prefill_ms": prefill }, s, profiles, { path: trace, sha256 });
  });
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const withoutWall = (rows: readonly SweepRow[]) => rows.map((r) => ({ ...r, wall_time_ms: 0 }));

describe("the local executor", () => {
  it("gives a worker thread's rows equal to this thread's", { timeout: 120_000 }, async () => {
    const here = await Promise.all(tasks.map((t) => runPoint(t, fileHost)));
    expect(here.map((r) => r.status)).toEqual(Array(8).fill("ok"));
    // Point 0 alone on the rank: TTFT 10 + 2 = 12 for a; b arrives at 5 and waits for a's last token at 14
    // (one sequence), then 10 + 2: TTFT 14 + 12 - 5 = 21. Mean (12 + 21) / 2 = 16.5.
    expect(here[0]!.report?.mean_ttft_ms).toBe(16.5);
    const pool = localExecutor(2, { inline: false });
    try {
      const there = await Promise.all(tasks.map((t) => pool.run(t)));
      expect(withoutWall(there)).toEqual(withoutWall(here));
      expect(pool.counts).toEqual({ inline: 0, worker: 8, takenBack: 0, copied: 0 });
    } finally {
      await pool.close();
    }
  });

  it("shares the points between this thread and a loaded worker thread, each point run once", { timeout: 120_000 }, async () => {
    const here = await Promise.all(tasks.map((t) => runPoint(t, fileHost)));
    const ex = localExecutor(2);
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

  it("runs points given before a worker thread has loaded, each once", async () => {
    // Not eager: the pool starts when a second point waits, and the points here take a few
    // milliseconds while a thread takes far longer to load (tsx compiles the sources first).
    const ex = localExecutor(2);
    try {
      const rows = await Promise.all(tasks.slice(0, 2).map((t) => ex.run(t)));
      expect(rows.map((r) => r.status)).toEqual(["ok", "ok"]);
      expect(ex.counts.inline + ex.counts.worker).toBe(2);
    } finally {
      await ex.close();
    }
  });
});

describe("the built worker entry (dist/point-worker.js, every dependency bundled in)", () => {
  it("loads, says so, and runs a point as this thread does", { timeout: 120_000 }, async () => {
    const entry = fileURLToPath(new URL("../../dist/point-worker.js", import.meta.url));
    expect(existsSync(entry), "the CLI is built first (npm test builds it)").toBe(true);
    const pool = threadExecutor({ jobs: 1, worker: entry, hint: (t) => (t.trace === null ? undefined : knownHash(t.trace.path)) });
    try {
      await pool.workerLoaded();
      const [row, here] = await Promise.all([pool.run(tasks[3]!), runPoint(tasks[3]!, fileHost)]);
      expect(withoutWall([row])).toEqual(withoutWall([here]));
      expect(pool.counts).toEqual({ inline: 0, worker: 1, takenBack: 0, copied: 0 });
    } finally {
      await pool.close();
    }
  });
});
