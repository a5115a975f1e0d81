import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "./main.js";
import type { StdinIo } from "./spec-input.js";
import { captureIo } from "./test-io.js";

let dir: string;
const path = (name: string) => join(dir, name);

// The golden seed S1: fixed 10 / 2 ms, one request of 4 + 2 tokens: TTFT 10 + 2 = 12, E2E 12 + 2 = 14.
const LINEAR = JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 });
const SPEC = `version: 1
profile: ./linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ./trace.jsonl, format: kvsim }
`;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-set-"));
  writeFileSync(path("linear.json"), LINEAR);
  writeFileSync(path("spec.yaml"), SPEC);
  writeFileSync(path("trace.jsonl"), '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}\n');
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function run(args: string[], stdin?: string) {
  const io: StdinIo & { stdout: string; stderr: string } = Object.assign(captureIo(), stdin === undefined ? {} : { stdin: Readable.from([stdin]) });
  const code = await runCli(args, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}
const report = (stdout: string) => JSON.parse(stdout) as Record<string, number>;

describe("--set on replay", () => {
  it("overrides spec fields in order: prefill 20 ms gives TTFT 20 + 2 = 22 and E2E 22 + 2 = 24", async () => {
    const r = await run(["replay", "--spec", path("spec.yaml"), "--format", "json", "--set", "timing.prefill_ms=30", "--set", "timing.prefill_ms=20"]);
    expect(r.code).toBe(0);
    expect([report(r.stdout).mean_ttft_ms, report(r.stdout).mean_e2e_ms]).toEqual([22, 24]);
  });

  it("refuses a bad value with exit 2, naming the flag and the field", async () => {
    const r = await run(["replay", "--spec", path("spec.yaml"), "--set", "engine.max_num_seqs=0"]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe("error: invalid input\n--set engine.max_num_seqs=0: engine.max_num_seqs: must be at least 1 (got 0)\n");
  });

  it("refuses a malformed flag before reading anything", async () => {
    const r = await run(["replay", "--spec", path("nope.yaml"), "--set", "engine.max_num_seqs"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("error: invalid input\n--set engine.max_num_seqs: expected <path>=<value>, e.g. engine.max_num_seqs=128\n");
  });
});

describe("--spec - reads the spec from standard input", () => {
  it("replays it; relative paths resolve against the working folder", async () => {
    const absolute = SPEC.replace("./linear.json", path("linear.json")).replace("./trace.jsonl", path("trace.jsonl"));
    const r = await run(["replay", "--spec", "-", "--format", "json"], absolute);
    expect(r.code).toBe(0);
    expect(report(r.stdout).mean_ttft_ms).toBe(12);
    // The same spec from a file gives the same digest.
    const fromFile = await run(["replay", "--spec", path("spec.yaml"), "--format", "json"]);
    expect(report(r.stdout).digest).toBe(report(fromFile.stdout).digest);
  });

  it("names <stdin> in errors, with the line", async () => {
    const r = await run(["replay", "--spec", "-"], SPEC.replace("max_num_seqs: 4", "max_num_seqs: 0"));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("<stdin>:4:");
    expect(r.stderr).toContain("engine.max_num_seqs: must be at least 1 (got 0)");
  });
});

describe("--set on validate", () => {
  it("checks the spec with the overrides applied", async () => {
    const ok = await run(["validate", path("spec.yaml"), "--set", "topology.workers=3"]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^ok: spec v1, aggregated 3 workers, /);
    const bad = await run(["validate", path("spec.yaml"), "--set", "topology.workers=0"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("error: invalid input\n--set topology.workers=0: topology.workers: must be at least 1 (got 0)\n");
  });

  it("lists the spec file's problems with their lines and the flags' problems with their flags", async () => {
    writeFileSync(path("bad.yaml"), SPEC.replace("prefill_ms: 10", "prefill_ms: -1"));
    const r = await run(["validate", path("bad.yaml"), "--set", "workload.speedup=0"]);
    expect(r.code).toBe(2);
    // Line 5 "timing: { type: fixed, " is 23 characters, so prefill_ms starts at column 24.
    expect(r.stderr).toBe(
      `error: invalid input\n${path("bad.yaml")}:5:24: timing.prefill_ms: must be from 0 to 1000000 ms, about 17 minutes (got -1)\n--set workload.speedup=0: workload.speedup: must be from 0.000001 to 1000000 (got 0)\n`,
    );
  });

  it("reads - from standard input", async () => {
    const r = await run(["validate", "-"], readFileSync(path("linear.json"), "utf8"));
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("ok: profile test/linear, vLLM 0.32.0, linear, 1,000 B per token\n");
  });
});
