import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { pingRedis, removeQueue } from "@kvsim/sweep-queue";
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
if (redisDown !== undefined) console.warn(`SKIPPED the kvsim plan --queue test: ${redisDown}`);

const PREFIX = `kvsim-plan-test-${process.pid}-${Date.now()}`;
const CLI = fileURLToPath(new URL("../cli.ts", import.meta.url));
const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const CONFIG = JSON.stringify({
  architectures: ["LlamaForCausalLM"],
  hidden_size: 4096,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  intermediate_size: 14336,
  vocab_size: 128256,
  max_position_embeddings: 131072,
  torch_dtype: "bfloat16",
});
const TRACE = Array.from({ length: 60 }, (_, i) => `{"request_id":"r${i}","arrival_ms":${i * 100},"input_tokens":2048,"output_tokens":48}\n`).join("");

let worker: ChildProcess | undefined;
let dir: string | undefined;
afterAll(async () => {
  if (worker?.exitCode === null) worker.kill("SIGTERM");
  if (redisDown === undefined) await removeQueue({ url: REDIS, prefix: PREFIX });
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(redisDown !== undefined)("kvsim plan --queue", () => {
  it("ranks the same candidates at the same rates as --jobs 1", { timeout: 300_000 }, async () => {
    dir = mkdtempSync(join(tmpdir(), "kvsim-plan-queue-"));
    writeFileSync(join(dir, "config.json"), CONFIG);
    writeFileSync(join(dir, "trace.jsonl"), TRACE);
    const plan = async (...extra: string[]) => {
      const io = captureIo();
      const args = ["plan", "--model", join(dir!, "config.json"), "--gpu", "H100-SXM", "--gpus", "2", "--tp", "1,2", "--trace", join(dir!, "trace.jsonl")];
      const code = await runCli([...args, "--sla", "p90_ttft_ms<=400,p90_tpot_ms<=20", "--max-num-batched-tokens", "2048", ...extra], io);
      expect(code, io.stderr).toBe(0);
    };
    await plan("--jobs", "1", "--out", join(dir, "local.jsonl"));
    worker = spawn(
      process.execPath,
      ["--import", TSX, "--conditions=@kvsim/source", CLI, "worker", "--queue", REDIS, "--queue-prefix", PREFIX, "--jobs", "1"],
      {
        stdio: ["ignore", "ignore", "ignore"],
      },
    );
    await plan("--queue", REDIS, "--queue-prefix", PREFIX, "--out", join(dir, "queued.jsonl"));
    expect(readFileSync(join(dir, "queued.jsonl"), "utf8")).toBe(readFileSync(join(dir, "local.jsonl"), "utf8"));
  });
});
