import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

let dir = "";
const path = (...names: string[]) => join(dir, ...names);

// A real run made by kvsim itself: 40 requests in bursts replayed with known linear coefficients;
// its records are the "measured" file, and calibrate starts from a spec with other timing.
const TRUE = { type: "linear", step_ms: 12, per_sequence_ms: 0.2, per_kv_token_us: 0.5, per_prompt_token_us: 60, per_cached_token_us: 0, prompt_step_ms: 3 };
const specFor = (timing: unknown) => ({
  version: 1,
  profile: "./profile.json",
  topology: { kind: "aggregated", workers: 1 },
  engine: { num_gpu_blocks: 4000, block_size: 16, max_num_batched_tokens: 1024, max_num_seqs: 32 },
  timing,
  workload: { trace: "./trace.jsonl", format: "kvsim" },
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-calibrate-"));
  mkdirSync(path("out"));
  writeFileSync(path("profile.json"), JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 }));
  let trace = "";
  for (let i = 0; i < 40; i++) {
    // Bursts of 10 requests 20 ms apart, 1.5 s between bursts; lengths vary with i.
    const t = Math.floor(i / 10) * 1500 + (i % 10) * 20;
    trace += `${JSON.stringify({ request_id: `q${i}`, arrival_ms: t, input_tokens: 200 + ((i * 397) % 1600), output_tokens: 20 + ((i * 53) % 180) })}\n`;
  }
  writeFileSync(path("trace.jsonl"), trace);
  writeFileSync(path("truth.yaml"), JSON.stringify(specFor(TRUE)));
  writeFileSync(path("spec.yaml"), JSON.stringify(specFor({ type: "fixed", prefill_ms: 10, decode_ms: 10 })));
  const io = captureIo();
  expect(await runCli(["replay", "--spec", path("truth.yaml"), "--requests", path("measured.jsonl")], io)).toBe(0);
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("kvsim calibrate", () => {
  it("fits the linear timing, writes the spec with it and paths rebased, and prints both parts' errors", async () => {
    const io = captureIo();
    const out = path("out", "fitted.yaml");
    expect(await runCli(["calibrate", "--spec", path("spec.yaml"), "--measured", path("measured.jsonl"), "--out", out, "--max-evaluations", "12"], io)).toBe(0);
    expect(io.stdout).toContain("fit part: the first 20 requests by arrival (--fit-fraction 0.5); held out: 20");
    expect(io.stdout).toMatch(/TPOT\s+mean/);
    const written = parseYaml(readFileSync(out, "utf8")) as { profile: string; workload: { trace: string }; timing: Record<string, unknown> };
    expect(written.profile).toBe("../profile.json");
    expect(written.workload.trace).toBe("../trace.jsonl");
    expect(written.timing.type).toBe("linear");
    // The written spec replays as it is.
    expect(await runCli(["replay", "--spec", out], captureIo())).toBe(0);
  });

  it("gives the same coefficients twice (--format json)", async () => {
    const run = async (name: string) => {
      const io = captureIo();
      expect(await runCli(["calibrate", "--spec", path("spec.yaml"), "--measured", path("measured.jsonl"), "--out", path("out", name), "--max-evaluations", "6", "--format", "json"], io)).toBe(0);
      return (JSON.parse(io.stdout) as { coefficients: unknown }).coefficients;
    };
    expect(await run("a.yaml")).toEqual(await run("b.yaml"));
  });

  it("a bad measured file or ids that are not the workload's exit 2 naming file, line and field, and write nothing", async () => {
    const lines = readFileSync(path("measured.jsonl"), "utf8").trim().split("\n");
    const broken = [...lines];
    broken[2] = broken[2]!.replace(/"ttft_ms":[^,]+,/, "");
    writeFileSync(path("broken.jsonl"), `${broken.join("\n")}\n`);
    const io = captureIo();
    expect(await runCli(["calibrate", "--spec", path("spec.yaml"), "--measured", path("broken.jsonl"), "--out", path("out", "never.yaml")], io)).toBe(2);
    expect(io.stderr).toContain(`${path("broken.jsonl")}:3: ttft_ms: is required`);
    const renamed = [...lines];
    renamed[4] = renamed[4]!.replace('"request_id":"q4"', '"request_id":"elsewhere"');
    writeFileSync(path("renamed.jsonl"), `${renamed.join("\n")}\n`);
    const io2 = captureIo();
    expect(await runCli(["calibrate", "--spec", path("spec.yaml"), "--measured", path("renamed.jsonl"), "--out", path("out", "never.yaml")], io2)).toBe(2);
    expect(io2.stderr).toContain(`${path("renamed.jsonl")}:5: request_id: elsewhere is not a request of the workload`);
    const io3 = captureIo();
    expect(await runCli(["calibrate", "--spec", path("spec.yaml"), "--measured", path("measured.jsonl"), "--out", path("out", "never.yaml"), "--fit-fraction", "0.2"], io3)).toBe(2);
    expect(io3.stderr).toContain("8 requests in its fit part, fewer than the 10");
    expect(existsSync(path("out", "never.yaml"))).toBe(false);
  });
});

describe("kvsim trace from-measured", () => {
  it("writes the measured requests as a kvsim trace, with token ids from --prompts", async () => {
    const m = (id: string, q: number, input: number) =>
      JSON.stringify({ request_id: id, input_toks: input, output_toks: 4, queued_ts: q, scheduled_ts: q, first_token_ts: q + 0.1, last_token_ts: q + 0.4 });
    writeFileSync(path("vllm.jsonl"), `${m("bench-1", 10.5, 2)}\n${m("bench-0", 10, 3)}\n`);
    // Line N of the prompts is request bench-N.
    writeFileSync(path("prompts.jsonl"), `${JSON.stringify({ input_tok_ids: [5, 6, 7] })}\n${JSON.stringify({ input_tok_ids: [5, 9] })}\n`);
    const io = captureIo();
    expect(await runCli(["trace", "from-measured", "--measured", path("vllm.jsonl"), "--prompts", path("prompts.jsonl"), "--out", path("t.jsonl")], io)).toBe(0);
    expect(readFileSync(path("t.jsonl"), "utf8")).toBe(
      `${JSON.stringify({ request_id: "bench-0", arrival_ms: 0, input_token_ids: [5, 6, 7], output_tokens: 4 })}\n${JSON.stringify({ request_id: "bench-1", arrival_ms: 500, input_token_ids: [5, 9], output_tokens: 4 })}\n`,
    );
    writeFileSync(path("short.jsonl"), `${JSON.stringify({ input_tok_ids: [5, 6] })}\n`);
    const bad = captureIo();
    expect(await runCli(["trace", "from-measured", "--measured", path("vllm.jsonl"), "--prompts", path("short.jsonl"), "--out", path("t2.jsonl")], bad)).toBe(2);
    expect(bad.stderr).toContain("bench-0: has 2 prompt token ids");
  });
});
