import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "./main.js";
import { captureIo } from "./test-io.js";

/**
 * What `kvsim replay` tells a new user besides the numbers, end to end through the CLI: a
 * suspicious trace, a cutoff, rejection reasons, saturation, the percentiles asked for.
 */

let dir = "";
const path = (name: string) => join(dir, name);
const write = (name: string, text: string | Buffer) => {
  writeFileSync(path(name), text);
  return path(name);
};

async function kvsim(...argv: string[]) {
  const io = captureIo();
  const code = await runCli(argv, io);
  expect(io.stderr).not.toMatch(/internal error|\n\s+at /);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

const LINEAR = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 };
const specYaml = (lines: readonly string[] = []) =>
  [
    "version: 1",
    "profile: ./linear.json",
    "topology: { kind: aggregated, workers: 1 }",
    "engine: { num_gpu_blocks: 64, block_size: 4 }",
    "timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }",
    "workload: { synthetic: { requests: 2, input_tokens: 8, output_tokens: 2, rate_per_s: 10, seed: 1 } }",
    ...lines,
  ].join("\n");

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-replay-table-"));
  write("linear.json", JSON.stringify(LINEAR));
  write("glm.json", JSON.stringify(glmFlashProfile("0.32.0"), null, 2));
  write("spec.yaml", specYaml());
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("what the table tells a new user: a cutoff, rejection reasons, saturation, chosen percentiles", () => {
  const traceSpec = (trace: string, extra: readonly string[]) =>
    [
      "version: 1",
      "profile: ./linear.json",
      "topology: { kind: aggregated, workers: 1 }",
      "timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }",
      `workload: { trace: ./${trace}, format: kvsim }`,
      ...extra,
    ].join("\n");
  it("warns, in validate and replay, when a Mooncake trace's 20 requests arrive within 1.9 ms (seconds read as ms)", async () => {
    // Timestamps 0, 0.1, ..., 1.9: 19 gaps over 1.9 ms, 10,000 req/s.
    const lines = Array.from({ length: 20 }, (_, i) => JSON.stringify({ timestamp: i / 10, input_length: 8, output_length: 2, hash_ids: [i] }));
    write("secs.jsonl", `${lines.join("\n")}\n`);
    const spec = write("secs.yaml", traceSpec("secs.jsonl", ["engine: { num_gpu_blocks: 64, block_size: 4 }"]).replace("format: kvsim", "format: mooncake"));
    const warning = `warning: ${path("secs.jsonl")}: the trace's 20 requests arrive within 1.9 ms (10,000 req/s); Mooncake's timestamp is in milliseconds: if its times are seconds, multiply them by 1,000 (or set workload.speedup to 0.001)\n`;
    const checked = await kvsim("validate", spec);
    expect([checked.code, checked.stderr]).toEqual([0, warning]);
    const r = await kvsim("replay", "--spec", spec);
    expect([r.code, r.stderr]).toEqual([0, warning]);
  });
  it("says how many requests a max_virtual_time_ms cutoff left out", async () => {
    // Arrivals at 0 and 5,000 ms; the first completes at 10 + 2 + 2 = 14 ms, the second never arrives before 1,000 ms.
    write(
      "two.jsonl",
      '{"request_id":"a","arrival_ms":0,"input_tokens":8,"output_tokens":2}\n{"request_id":"b","arrival_ms":5000,"input_tokens":8,"output_tokens":2}\n',
    );
    const r = await kvsim(
      "replay",
      "--spec",
      write("cut.yaml", traceSpec("two.jsonl", ["engine: { num_gpu_blocks: 64, block_size: 4 }", "max_virtual_time_ms: 1000"])),
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("\ncut off at 1,000 ms (max_virtual_time_ms): 1 request not arrived, 0 in flight; throughputs are over the 1,000 ms that ran\n");
  });
  it("prints rejection reasons, grouped and counted", async () => {
    write(
      "long.jsonl",
      '{"request_id":"a","arrival_ms":0,"input_tokens":20,"output_tokens":2}\n{"request_id":"b","arrival_ms":1,"input_tokens":30,"output_tokens":2}\n',
    );
    const r = await kvsim("replay", "--spec", write("mml.yaml", traceSpec("long.jsonl", ["engine: { num_gpu_blocks: 64, block_size: 4, max_model_len: 10 }"])));
    expect(r.code).toBe(0);
    // Both prompts (20 and 30 tokens) reach max_model_len 10, as vLLM rejects them: one group of 2.
    expect(r.stdout).toContain("\nrejected: 2 x prompt of # tokens reaches max_model_len # (e.g. prompt of 20 tokens reaches max_model_len 10)\n");
    // No request completed: one line says so, the latency cells are "-", the JSON has null.
    expect(r.stdout).toContain("\nno request completed: the latencies below have no sample (- here, null in the JSON report)\n");
    expect(r.stdout).toMatch(/\nTTFT +- +- +- +-\n/);
    const json = JSON.parse((await kvsim("replay", "--spec", path("mml.yaml"), "--format", "json")).stdout) as Record<string, unknown>;
    expect([json.p90_ttft_ms, json.mean_e2e_ms, json.median_itl_ms, json.p99_e2el_ms, json.completed_requests]).toEqual([null, null, null, null, 0]);
  });
  it("warns when the run is saturated, with the offered and served rates", async () => {
    // 2 sequences at a time, 20 tokens of 20 ms each: about 2 / (10 + 19 x 20 ms) = 5 req/s served against 50 offered.
    const spec = write(
      "sat.yaml",
      specYaml()
        .replace("engine: { num_gpu_blocks: 64, block_size: 4 }", "engine: { num_gpu_blocks: 512, block_size: 4, max_num_seqs: 2 }")
        .replace(/timing: .*/, "timing: { type: fixed, prefill_ms: 10, decode_ms: 20 }")
        .replace(/workload: .*/, "workload: { synthetic: { requests: 100, input_tokens: 8, output_tokens: 20, rate_per_s: 50, seed: 1 } }"),
    );
    const r = await kvsim("replay", "--spec", spec);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /\nwarning: saturated: requests arrive at [\d.]+ req\/s but complete at [\d.]+ req\/s while they arrive \(request throughput over the whole run: [\d.]+ req\/s\), and the mean TTFT grew from [\d,.]+ ms \(first quarter of arrivals\) to [\d,.]+ ms \(last quarter\): the queue does not drain\n/,
    );
  });
  it("--percentiles picks the columns and adds vLLM's p<N> keys to the JSON; bad lists are usage errors", async () => {
    const table = await kvsim("replay", "--spec", path("spec.yaml"), "--percentiles", "95,50");
    expect(table.stdout).toMatch(/\nlatency \(ms\) +mean +p50 +p95\n/);
    const json = JSON.parse((await kvsim("replay", "--spec", path("spec.yaml"), "--percentiles", "50,95,99.9", "--format", "json")).stdout) as Record<
      string,
      unknown
    >;
    expect(Object.keys(json).filter((k) => k.endsWith("_ttft_ms") && k.startsWith("p"))).toEqual(expect.arrayContaining(["p95_ttft_ms", "p99.9_ttft_ms"]));
    for (const bad of ["0", "101", "50,50", "x", ""]) {
      const r = await kvsim("replay", "--spec", path("spec.yaml"), "--percentiles", bad);
      expect([r.code, r.stdout]).toEqual([2, ""]);
      expect(r.stderr).toMatch(/^error: --percentiles /);
    }
    // Fractions are refused with the percentiles they likely mean: 0.9 x 100 = 90, 0.99 x 100 = 99.
    const fractions = await kvsim("replay", "--spec", path("spec.yaml"), "--percentiles", "0.9,0.99");
    expect([fractions.code, fractions.stdout]).toEqual([2, ""]);
    expect(fractions.stderr).toContain("not fractions");
    expect(fractions.stderr).toContain("--percentiles 90,99\n");
    // p1 alone is a percentile (all values <= 1 but none a fraction below 1).
    expect((await kvsim("replay", "--spec", path("spec.yaml"), "--percentiles", "1")).code).toBe(0);
  });
  it("transfer refuses a destination holding more tokens than the prompt", async () => {
    expect(await kvsim("transfer", "--profile", path("glm.json"), "--prompt-tokens", "100", "--destination-cached-tokens", "101")).toEqual({
      code: 2,
      stdout: "",
      stderr: "error: --destination-cached-tokens (101) must be at most --prompt-tokens (100): the destination cannot hold more of the prompt than it has\n",
    });
  });
});
