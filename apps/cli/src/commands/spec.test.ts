import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

let dir = "";
const path = (name: string) => join(dir, name);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-spec-"));
  writeFileSync(
    path("profile.json"),
    JSON.stringify({ schema_version: 1, model: "test/model", vllm_version: "0.19.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 }),
  );
  writeFileSync(path("trace.jsonl"), '{"request_id":"a","arrival_ms":0,"input_tokens":100,"output_tokens":5}\n');
  writeFileSync(
    path("meta.json"),
    JSON.stringify({
      model: "test/model",
      vllm_version: "0.19.0",
      engine_kwargs: { tensor_parallel_size: 1, max_num_seqs: 32, max_num_batched_tokens: 1024 },
      kv_cache: { num_gpu_blocks: 500, block_size: 16 },
      hardware: { device_name: "Some Accelerator 9000" },
      resolved_config: { scheduler_config: { async_scheduling: true, scheduler_reserve_full_isl: false } },
    }),
  );
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("kvsim spec from-vllm", () => {
  it("writes the spec of a run's meta.json, with the profile and trace given, that replays as written", async () => {
    const io = captureIo();
    expect(
      await runCli(["spec", "from-vllm", path("meta.json"), "--profile", path("profile.json"), "--trace", path("trace.jsonl"), "--out", path("spec.yaml")], io),
    ).toBe(0);
    const spec = parseYaml(readFileSync(path("spec.yaml"), "utf8")) as Record<string, Record<string, unknown>>;
    // Paths relative to the spec's folder; the run's settings where the spec keeps them.
    expect([spec.profile, spec.workload]).toEqual(["./profile.json", { trace: "./trace.jsonl", format: "kvsim" }]);
    expect(spec.engine).toMatchObject({
      num_gpu_blocks: 500,
      max_num_seqs: 32,
      max_num_batched_tokens: 1024,
      async_scheduling: true,
      scheduler_reserve_full_isl: false,
    });
    // An unknown accelerator: no roofline; the notes say so.
    expect(spec.timing).toEqual({ type: "profile" });
    expect(io.stdout).toContain('note: hardware.device_name "Some Accelerator 9000" is no GPU kvsim knows');
    // The profile has no forward_pass tables, so replay refuses the profile timing; calibrate takes it as a start.
    expect(await runCli(["validate", path("spec.yaml")], captureIo())).toBe(2);
    expect(await runCli(["replay", "--spec", path("spec.yaml"), "--set", "timing={type: fixed, prefill_ms: 5, decode_ms: 1}"], captureIo())).toBe(0);
  });

  it("writes the spec of vllm serve arguments, with the roofline on --gpu, and notes what it assumed and left out", async () => {
    const io = captureIo();
    const args = [
      "spec",
      "from-vllm",
      "--out",
      path("serve.yaml"),
      "--gpu",
      "H100-SXM",
      "--",
      "vllm",
      "serve",
      "test/model",
      "--max-num-seqs",
      "128",
      "--tensor-parallel-size",
      "2",
      "--async-scheduling",
      "--swap-space",
      "4",
    ];
    expect(await runCli(args, io)).toBe(0);
    const spec = parseYaml(readFileSync(path("serve.yaml"), "utf8")) as Record<string, Record<string, unknown>>;
    expect(spec.engine).toMatchObject({ max_num_seqs: 128, async_scheduling: true, scheduler_reserve_full_isl: true, gpu: "H100-SXM" });
    expect(spec.timing).toEqual({ type: "roofline" });
    expect(io.stdout).toContain("(test/model, TP 2)");
    expect(io.stdout).toContain("note: not modelled, left out: --swap-space\n");
    expect(io.stdout).toContain("note: profile: ./profile.json is a placeholder: write it with kvsim profile from-hf <the model's config.json> --tp 2");
  });

  it("--timing linear writes a linear timing at 0 for calibrate to fit", async () => {
    const io = captureIo();
    expect(await runCli(["spec", "from-vllm", path("meta.json"), "--timing", "linear", "--out", path("lin.yaml")], io)).toBe(0);
    expect((parseYaml(readFileSync(path("lin.yaml"), "utf8")) as Record<string, unknown>).timing).toEqual({ type: "linear" });
    expect(io.stdout).toContain("note: timing: linear with every term 0, a start for kvsim calibrate");
  });

  it("refuses a bad flag value naming it, and an existing --out without --force", async () => {
    const bad = captureIo();
    expect(await runCli(["spec", "from-vllm", "--out", path("x.yaml"), "--", "--max-num-seqs", "0"], bad)).toBe(2);
    expect(bad.stderr).toContain(`<vllm serve arguments>: --max-num-seqs: must be a whole number of at least 1 (got "0")`);
    const exists = captureIo();
    expect(await runCli(["spec", "from-vllm", path("meta.json"), "--out", path("spec.yaml")], exists)).toBe(2);
  });
});
