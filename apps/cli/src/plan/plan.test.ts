import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PlanRow } from "@kvsim/plan";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

let dir: string;
const path = (name: string) => join(dir, name);

// Llama 3.1 8B's shape: 16 GB of BF16 weights fit one H100 with a large KV cache.
const CONFIG = JSON.stringify({
  _name_or_path: "test/llama-8b",
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
// 80 requests of 1,024 + 64 tokens, 100 ms apart (10 req/s at speedup 1).
const TRACE = Array.from({ length: 80 }, (_, i) => `{"request_id":"r${i}","arrival_ms":${i * 100},"input_tokens":1024,"output_tokens":64}\n`).join("");
const SLA = "p90_ttft_ms<=300,p90_tpot_ms<=20";

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-plan-"));
  writeFileSync(path("config.json"), CONFIG);
  writeFileSync(path("trace.jsonl"), TRACE);
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function run(...args: string[]) {
  const io = captureIo();
  const code = await runCli(args, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}
const base = () => ["plan", "--model", path("config.json"), "--gpu", "H100-SXM", "--gpus", "2", "--tp", "1,2", "--trace", path("trace.jsonl"), "--sla", SLA];
const rowsOf = (file: string): PlanRow[] =>
  readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as PlanRow);

describe("kvsim plan", () => {
  it("ranks every deployment of a 2-GPU budget and writes specs that replay at the plan's rate", { timeout: 120_000 }, async () => {
    const r = await run(
      ...base(),
      "--max-num-batched-tokens",
      "2048",
      "--jobs",
      "1",
      "--out",
      path("plan.jsonl"),
      "--write-specs",
      path("specs"),
      "--top",
      "1",
    );
    expect(r.code, r.stderr).toBe(0);
    const rows = rowsOf(path("plan.jsonl"));
    // Budget 2 at TP 1 and 2: aggregated 2 x TP1 and 1 x TP2, and P/D 1 x TP1 + 1 x TP1
    // (a TP2 side leaves no GPU for the other).
    expect(rows.map((x) => x.label.replace(", seqs 256, batch 2048", "")).sort()).toEqual([
      "P/D 1 x TP1 + 1 x TP1",
      "aggregated 1 x TP2",
      "aggregated 2 x TP1",
    ]);
    expect(rows[0]!.rank).toBe(1);
    expect(rows.every((x) => x.gpus === 2)).toBe(true);
    // Ranked by req/s per GPU, best first.
    const ranked = rows.filter((x) => x.rank !== null);
    for (let i = 1; i < ranked.length; i++) expect(ranked[i]!.rate_rps_per_gpu!).toBeLessThanOrEqual(ranked[i - 1]!.rate_rps_per_gpu!);
    expect(r.stdout).toContain("3 deployments of test/llama-8b on up to 2 H100-SXM");
    expect(r.stdout).toContain("note: timing: the roofline");

    // The winner's spec, replayed on its own, meets the SLA at the plan's rate with the plan's numbers.
    expect(existsSync(path("specs/1.yaml"))).toBe(true);
    const replay = await run("replay", "--spec", path("specs/1.yaml"), "--format", "json");
    expect([replay.code, replay.stderr]).toEqual([0, ""]); // no warning: the spec is written as a user would write it
    const report = JSON.parse(replay.stdout) as { p90_ttft_ms: number; p90_tpot_ms: number; completed_requests: number; num_requests: number };
    expect(report.completed_requests).toBe(report.num_requests);
    expect(report.p90_ttft_ms).toBeLessThanOrEqual(300);
    expect(report.p90_tpot_ms).toBeLessThanOrEqual(20);
    expect(report.p90_ttft_ms).toBe(rows[0]!.p90_ttft_ms);
  });

  it("gives the same rows with one job and with two", { timeout: 120_000 }, async () => {
    const one = await run(...base(), "--max-num-batched-tokens", "2048,8192", "--jobs", "1", "--out", path("one.jsonl"));
    const two = await run(...base(), "--max-num-batched-tokens", "2048,8192", "--jobs", "2", "--out", path("two.jsonl"));
    expect([one.code, two.code]).toEqual([0, 0]);
    expect(readFileSync(path("two.jsonl"), "utf8")).toBe(readFileSync(path("one.jsonl"), "utf8"));
  });

  it("finds the fewest GPUs serving a given rate and skips the larger deployments", { timeout: 120_000 }, async () => {
    const r = await run(...base(), "--rate", "5", "--max-num-batched-tokens", "2048", "--jobs", "1", "--out", path("rate.jsonl"));
    expect(r.code, r.stderr).toBe(0);
    const rows = rowsOf(path("rate.jsonl"));
    // 5 req/s of 1,024-token prompts is light for one H100: one GPU serves it, two-GPU layouts are skipped.
    expect(rows[0]).toMatchObject({ rank: 1, gpus: 1, rate_rps: 5, meets_sla: true });
    expect(rows.filter((x) => x.gpus === 2).every((x) => x.status === "skipped")).toBe(true);
  });

  it("tries each router of --router, and keeps a measured timing to the TP it was measured at", { timeout: 120_000 }, async () => {
    // A spec with a linear-free fixed timing on a TP1 profile: TP2 candidates are left out with the reason.
    writeFileSync(
      path("profile.json"),
      JSON.stringify({
        schema_version: 1,
        model: "test/linear",
        vllm_version: "0.32.0",
        tensor_parallel_size: 1,
        kv_bytes_per_token: 131072,
        memory: { weights_bytes: 16e9, activation_bytes_per_token: 100000, sampler_bytes_per_sequence: 3e6, provenance: "test" },
      }),
    );
    writeFileSync(
      path("spec.yaml"),
      `version: 1\nprofile: ./profile.json\ntopology: { kind: aggregated, workers: 1 }\nengine: { gpu: H100-SXM }\ntiming: { type: fixed, prefill_ms: 30, decode_ms: 8 }\nworkload: { trace: ./trace.jsonl, format: kvsim }\n`,
    );
    const r = await run(
      "plan",
      "--model",
      path("profile.json"),
      "--gpus",
      "2",
      "--tp",
      "1,2",
      "--spec",
      path("spec.yaml"),
      "--sla",
      SLA,
      "--topology",
      "aggregated",
      "--router",
      "round_robin,kv_aware",
      "--max-num-batched-tokens",
      "2048",
      "--jobs",
      "1",
      "--out",
      path("r.jsonl"),
    );
    expect(r.code, r.stderr).toBe(0);
    const rows = rowsOf(path("r.jsonl"));
    // 2 x TP1 with each router, and 1 x TP2 with each router left out: the profile is TP1 only.
    expect(rows.map((x) => [x.label, x.status === "does-not-fit"]).sort()).toEqual([
      ["aggregated 1 x TP2, seqs 256, batch 2048, kv_aware", true],
      ["aggregated 1 x TP2, seqs 256, batch 2048, round_robin", true],
      ["aggregated 2 x TP1, seqs 256, batch 2048, kv_aware", false],
      ["aggregated 2 x TP1, seqs 256, batch 2048, round_robin", false],
    ]);
    expect(r.stdout).toContain("timing: the spec's fixed timing, measured at TP 1 on its GPU: only that TP is planned");
  });

  it.each([
    [["plan", "--gpus", "2"], "needs --model"],
    [["--tp", "1,x"], '--tp must be a finite number, got "x"'],
    [["--tp", "0"], "--tp must be at least 1"],
    [["--topology", "mesh"], '--topology lists aggregated and/or disaggregated, got "mesh"'],
    [["--router", "kv_aware,nearest"], "--router lists router policies"],
    [["--sla", "p90_ttft<=1"], "--sla:"],
    [["--rate", "5", "--find", "max-rate"], "not both"],
    [["--gpu", "H900"], "--gpu must be one of"],
  ])("refuses %j with a clear line and exit 2", async (args, message) => {
    const argv = args[0] === "plan" ? args : [...base(), ...args];
    const r = await run(...argv);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });

  it("refuses --write-specs over an existing spec before anything runs, and a --write-specs that is a file", async () => {
    mkdirSync(path("specs"));
    writeFileSync(path("specs/2.yaml"), "mine\n");
    const r = await run(...base(), "--write-specs", path("specs"), "--out", path("never.jsonl"));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path("specs/2.yaml")} already exists; pass --force to overwrite it`);
    expect(existsSync(path("never.jsonl"))).toBe(false);
    expect(readFileSync(path("specs/2.yaml"), "utf8")).toBe("mine\n");
    const f = await run(...base(), "--write-specs", path("trace.jsonl"));
    expect(f.code).toBe(2);
    expect(f.stderr).toContain("is not a folder");
  });

  it("names the model file and line of a broken config", async () => {
    writeFileSync(path("config.json"), '{\n  "architectures": ["LlamaForCausalLM"],\n  "hidden_size": oops\n}\n');
    const r = await run(...base());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path("config.json")}:3`);
  });
});
