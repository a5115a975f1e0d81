import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { pingRedis, removeQueue } from "@kvsim/sweep-queue";
import type { SweepRow } from "@kvsim/sweep";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

// The project's machines run Redis on 127.0.0.1:6379 (KVSIM_TEST_REDIS overrides it). Without
// it this file says so in one line and skips.
const REDIS = process.env.KVSIM_TEST_REDIS ?? "redis://127.0.0.1:6379/0";
let redisDown: string | undefined;
try {
  await pingRedis(REDIS, 1000);
} catch (e) {
  redisDown = e instanceof Error ? e.message : String(e);
}
if (redisDown !== undefined) console.warn(`SKIPPED the BullMQ sweep test: ${redisDown}`);

// A unique key prefix per run, removed afterwards, so runs never see each other's jobs.
const PREFIX = `kvsim-test-${process.pid}-${Date.now()}`;
const target = { url: REDIS, prefix: PREFIX };
const CLI = fileURLToPath(new URL("../cli.ts", import.meta.url));
const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

const LINEAR = JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 });
// Points of about a second each, so a worker killed after it starts one is killed mid-point.
const SPEC = `version: 1
profile: ./linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 4096, block_size: 16, max_num_seqs: 32, max_num_batched_tokens: 2048 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ./trace.jsonl, format: kvsim }
`;

interface Worker {
  readonly name: string;
  readonly child: ChildProcess;
  log: string;
}

const workers: Worker[] = [];

function startWorker(name: string): Worker {
  const child = spawn(
    process.execPath,
    [
      "--import",
      TSX,
      "--conditions=@kvsim/source",
      CLI,
      "worker",
      "--queue",
      REDIS,
      "--queue-prefix",
      PREFIX,
      "--jobs",
      "1",
      "--lock-ms",
      "1000",
      "--stalled-ms",
      "500",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const w: Worker = { name, child, log: "" };
  child.stderr.on("data", (d: Buffer) => {
    w.log += d.toString("utf8");
  });
  workers.push(w);
  return w;
}

async function until(what: string, cond: () => boolean, timeoutMs = 120_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}; worker logs:\n${workers.map((w) => `${w.name}:\n${w.log}`).join("\n")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Job ids a worker's log says it started (with the attempt) or finished. */
const events = (log: string, kind: "started" | "done"): string[] => [...log.matchAll(new RegExp(`point (\\S+) ${kind}`, "g"))].map((m) => m[1]!);

let tempDir: string | undefined;
afterAll(async () => {
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGTERM");
  if (redisDown === undefined) await removeQueue(target);
  if (tempDir !== undefined) rmSync(tempDir, { recursive: true, force: true });
});

describe.skipIf(redisDown !== undefined)("kvsim sweep --queue with kvsim worker processes (BullMQ on Redis)", () => {
  it("survives a worker killed mid-point: every point once, the local digests, and a restart re-runs nothing", { timeout: 300_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvsim-queue-"));
    tempDir = dir;
    writeFileSync(join(dir, "linear.json"), LINEAR);
    writeFileSync(join(dir, "spec.yaml"), SPEC);
    // 600 requests of 256 + 64 tokens, one every 10 ms.
    writeFileSync(
      join(dir, "trace.jsonl"),
      Array.from({ length: 600 }, (_, i) => `{"request_id":"r${i}","arrival_ms":${i * 10},"input_tokens":256,"output_tokens":64}\n`).join(""),
    );
    writeFileSync(join(dir, "grid.yaml"), "engine.max_num_seqs: [16, 32, 64]\ntopology.workers: [1, 2]\n");
    const sweep = async (...extra: string[]) => {
      const io = captureIo();
      const code = await runCli(["sweep", "--spec", join(dir, "spec.yaml"), "--grid", join(dir, "grid.yaml"), "--format", "json", ...extra], io);
      expect(code, io.stderr).toBe(0);
      return { rows: (JSON.parse(io.stdout) as { rows: SweepRow[] }).rows, stderr: io.stderr };
    };
    const strip = (rows: readonly SweepRow[]) => rows.map((r) => ({ ...r, wall_time_ms: 0 }));

    const local = await sweep("--jobs", "1");
    expect(local.rows.map((r) => r.status)).toEqual(["ok", "ok", "ok", "ok", "ok", "ok"]);

    const [a, b, c] = [startWorker("A"), startWorker("B"), startWorker("C")];
    await until("three workers ready", () => [a, b, c].every((w) => w.log.includes("taking points from")));
    let killed: string | undefined;
    const watcher = setInterval(() => {
      const started = events(a.log, "started");
      if (killed === undefined && started.length > 0) {
        killed = started[0];
        a.child.kill("SIGKILL");
      }
    }, 10);
    const queued = await sweep("--queue", REDIS, "--queue-prefix", PREFIX, "--sweep-id", "killtest");
    clearInterval(watcher);

    expect(killed, "worker A never started a point").toBeDefined();
    expect(a.child.signalCode).toBe("SIGKILL");
    // A never finished the point it held; another worker ran it again and finished it.
    expect(events(a.log, "done")).not.toContain(killed);
    const done = [...events(b.log, "done"), ...events(c.log, "done"), ...events(a.log, "done")];
    expect(done).toContain(killed);
    expect([...done].sort()).toEqual([...new Set(done)].sort());
    expect(done).toHaveLength(6);
    // Every point exactly once, with the local run's digests.
    expect(strip(queued.rows)).toEqual(strip(local.rows));
    expect(queued.stderr).toContain("sweep killtest: 6 points added to the queue, 0 found there from before");

    // A restart with the same sweep id finds every point done and runs none again.
    const before = [b.log, c.log].map((l) => events(l, "started").length);
    const again = await sweep("--queue", REDIS, "--queue-prefix", PREFIX, "--sweep-id", "killtest");
    expect(strip(again.rows)).toEqual(strip(local.rows));
    expect(again.stderr).toContain("sweep killtest: 0 points added to the queue, 6 found there from before");
    await new Promise((r) => setTimeout(r, 500));
    expect([b.log, c.log].map((l) => events(l, "started").length)).toEqual(before);
  });

  it("kvsim sweep --cancel removes the sweep's points and says what it did", { timeout: 60_000 }, async () => {
    const io = captureIo();
    // The kill test's sweep finished: its 6 points are removed as finished ones.
    expect(await runCli(["sweep", "--cancel", "--sweep-id", "killtest", "--queue", REDIS, "--queue-prefix", PREFIX], io)).toBe(0);
    expect(io.stdout).toBe(
      `sweep killtest cancelled on ${REDIS}: 0 points no worker had taken and 6 points finished removed; 0 points running (their workers finish them); workers skip any other point of it (running --sweep-id killtest again takes the cancel back)\n`,
    );
  });
});
