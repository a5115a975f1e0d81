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
  writeFileSync(
    path("profile.json"),
    JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 }),
  );
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
      expect(
        await runCli(
          [
            "calibrate",
            "--spec",
            path("spec.yaml"),
            "--measured",
            path("measured.jsonl"),
            "--out",
            path("out", name),
            "--max-evaluations",
            "6",
            "--format",
            "json",
          ],
          io,
        ),
      ).toBe(0);
      return (JSON.parse(io.stdout) as { coefficients: unknown }).coefficients;
    };
    expect(await run("a.yaml")).toEqual(await run("b.yaml"));
  });

  it("takes any timing as the starting point: timing { type: profile } on a profile without tables, or none, fits as the fixed one does", async () => {
    const fitted = async (spec: string, name: string) => {
      const io = captureIo();
      expect(
        await runCli(
          ["calibrate", "--spec", spec, "--measured", path("measured.jsonl"), "--out", path("out", name), "--max-evaluations", "6", "--format", "json"],
          io,
        ),
      ).toBe(0);
      return (JSON.parse(io.stdout) as { coefficients: unknown }).coefficients;
    };
    writeFileSync(path("tables.yaml"), JSON.stringify(specFor({ type: "profile" })));
    const noTiming: Record<string, unknown> = { ...specFor(null) };
    delete noTiming.timing;
    writeFileSync(path("none.yaml"), JSON.stringify(noTiming));
    // replay still refuses the profile timing (the profile has no forward_pass tables) ...
    expect(await runCli(["replay", "--spec", path("tables.yaml")], captureIo())).toBe(2);
    // ... but the fit starts from a regression on the measured run, never from the spec's timing:
    // the same coefficients as from the fixed timing.
    const fixed = await fitted(path("spec.yaml"), "f.yaml");
    expect(await fitted(path("tables.yaml"), "t.yaml")).toEqual(fixed);
    expect(await fitted(path("none.yaml"), "n.yaml")).toEqual(fixed);
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
    expect(
      await runCli(
        ["calibrate", "--spec", path("spec.yaml"), "--measured", path("measured.jsonl"), "--out", path("out", "never.yaml"), "--fit-fraction", "0.2"],
        io3,
      ),
    ).toBe(2);
    expect(io3.stderr).toContain("8 requests in its fit part, fewer than the 10");
    expect(existsSync(path("out", "never.yaml"))).toBe(false);
  });
});

// The roofline on a 7B dense shape (Llama-2-7B's config) on the H100 datasheet.
const LLAMA_SHAPE = {
  hidden_size: 4096,
  num_layers: 32,
  vocab_size: 32000,
  weight_bytes: 2,
  attention: { layers: 32, num_heads: 32, num_kv_heads: 32, head_dim: 128 },
  mlp: { layers: 32, intermediate_size: 11008 },
};
const rooflineSpec = (timing: unknown, workload: unknown = { trace: "./trace.jsonl", format: "kvsim" }) => ({
  version: 1,
  profile: "./shaped.json",
  topology: { kind: "aggregated", workers: 1 },
  engine: { gpu: "H100-80GB", num_gpu_blocks: 4000, block_size: 16, max_num_batched_tokens: 1024, max_num_seqs: 32 },
  timing,
  workload,
});

describe("kvsim calibrate with the roofline", () => {
  beforeAll(async () => {
    writeFileSync(
      path("shaped.json"),
      JSON.stringify({
        schema_version: 1,
        model: "test/llama-shape",
        vllm_version: "0.32.0",
        tensor_parallel_size: 1,
        kv_bytes_per_token: 524288,
        model_shape: LLAMA_SHAPE,
      }),
    );
    // The "measured" run: the roofline with efficiencies and overheads off the defaults.
    writeFileSync(
      path("roofline-truth.yaml"),
      JSON.stringify(rooflineSpec({ type: "roofline", memory_efficiency: 0.6, step_overhead_ms: 4, compute_efficiency: 0.45 })),
    );
    // The start: set in the spec (about 25% off the truth), so the test does not move with the shipped defaults.
    writeFileSync(
      path("roofline.yaml"),
      JSON.stringify(rooflineSpec({ type: "roofline", memory_efficiency: 0.8, step_overhead_ms: 3, compute_efficiency: 0.6 })),
    );
    expect(await runCli(["replay", "--spec", path("roofline-truth.yaml"), "--requests", path("roofline-measured.jsonl")], captureIo())).toBe(0);
  });

  it("fits the efficiencies and overheads, writes the spec with the roofline inlined, and reports fit and held-out errors", async () => {
    const io = captureIo();
    const out = path("out", "roofline-fitted.yaml");
    expect(
      await runCli(
        [
          "calibrate",
          "--spec",
          path("roofline.yaml"),
          "--measured",
          path("roofline-measured.jsonl"),
          "--out",
          out,
          "--max-evaluations",
          "40",
          "--format",
          "json",
        ],
        io,
      ),
    ).toBe(0);
    const r = JSON.parse(io.stdout) as {
      timing: string;
      params: Record<string, number>;
      fitted: string[];
      runs: {
        frontend_ms: number | null;
        fit: { latency: { metric: string; stat: string; error: number }[] };
        held_out: { latency: { metric: string; stat: string; error: number }[] };
      }[];
      warnings: { kind: string; terms?: string[] }[];
    };
    expect(r.timing).toBe("roofline");
    // A dense model at TP 1: the MoE and link efficiencies have nothing to fit and are reported unused.
    expect(r.fitted).not.toContain("moe_efficiency");
    expect(r.fitted).not.toContain("link_efficiency");
    expect(r.warnings.filter((w) => w.kind === "unused").map((w) => w.terms)).toEqual([["moe_efficiency"], ["link_efficiency"]]);
    // kvsim records are on the replay's own clock: no front end is fitted.
    expect(r.runs[0]!.frontend_ms).toBeNull();
    for (const v of Object.values(r.params)) expect(v).toBeGreaterThan(0);
    for (const k of ["compute_efficiency", "attention_efficiency", "memory_efficiency"]) expect(r.params[k]).toBeLessThanOrEqual(1);
    // The fitted timing reproduces the held-out half's TPOT mean within 5% (the start is off by about 25%).
    const tpot = r.runs[0]!.held_out.latency.find((l) => l.metric === "tpot" && l.stat === "mean")!;
    expect(Math.abs(tpot.error)).toBeLessThan(0.05);
    const written = parseYaml(readFileSync(out, "utf8")) as { timing: Record<string, unknown>; frontend?: unknown };
    expect(written.timing.type).toBe("roofline");
    expect(written.timing.memory_efficiency).toBe(r.params.memory_efficiency);
    expect(written.frontend).toBeUndefined();
    expect(await runCli(["replay", "--spec", out], captureIo())).toBe(0);
  });

  it("searches pcie_collective_gbps only for a run with TP over a PCIe link, and keeps it silently otherwise", async () => {
    writeFileSync(
      path("shaped-tp2.json"),
      JSON.stringify({
        schema_version: 1,
        model: "test/llama-shape",
        vllm_version: "0.32.0",
        tensor_parallel_size: 2,
        kv_bytes_per_token: 262144,
        model_shape: LLAMA_SHAPE,
      }),
    );
    const fitted = async (gpu: string) => {
      const spec = { ...rooflineSpec({ type: "roofline" }), profile: "./shaped-tp2.json", engine: { ...rooflineSpec({}).engine, gpu } };
      writeFileSync(path(`tp2-${gpu}.yaml`), JSON.stringify(spec));
      const io = captureIo();
      const argv = ["calibrate", "--spec", path(`tp2-${gpu}.yaml`), "--measured", path("roofline-measured.jsonl"), "--out", path("out", `tp2-${gpu}.yaml`)];
      expect(await runCli([...argv, "--max-evaluations", "3", "--format", "json"], io), io.stderr).toBe(0);
      const r = JSON.parse(io.stdout) as { fitted: string[]; warnings: { kind: string; terms?: string[] }[] };
      expect(r.warnings.filter((w) => w.terms?.includes("pcie_collective_gbps") === true && w.kind === "unused")).toEqual([]);
      return r.fitted;
    };
    expect(await fitted("RTX-PRO-6000")).toContain("pcie_collective_gbps");
    const nvlink = await fitted("H100-80GB");
    expect(nvlink).toContain("link_efficiency");
    expect(nvlink).not.toContain("pcie_collective_gbps");
  });

  it("fits several runs together, each with its own spec, and writes one spec per --out", async () => {
    const io = captureIo();
    const outs = [path("out", "multi-a.yaml"), path("out", "multi-b.yaml")];
    const argv = ["calibrate", "--spec", path("roofline.yaml"), "--measured", path("roofline-measured.jsonl"), "--out", outs[0]!];
    argv.push("--spec", path("roofline.yaml"), "--measured", path("roofline-measured.jsonl"), "--out", outs[1]!, "--max-evaluations", "6");
    expect(await runCli(argv, io)).toBe(0);
    expect(io.stdout).toContain("the roofline on 2 measured runs, fitted together");
    expect(parseYaml(readFileSync(outs[0]!, "utf8"))).toEqual(parseYaml(readFileSync(outs[1]!, "utf8")));
    const bad = captureIo();
    expect(
      await runCli(
        [
          "calibrate",
          "--spec",
          path("roofline.yaml"),
          "--measured",
          path("roofline-measured.jsonl"),
          "--measured",
          path("roofline-measured.jsonl"),
          "--out",
          outs[0]!,
          "--out",
          outs[1]!,
        ],
        bad,
      ),
    ).toBe(2);
    expect(bad.stderr).toContain("give one --out for every --spec");
    const linear = captureIo();
    expect(
      await runCli(
        [
          "calibrate",
          "--spec",
          path("spec.yaml"),
          "--measured",
          path("measured.jsonl"),
          "--measured",
          path("measured.jsonl"),
          "--out",
          path("out", "never.yaml"),
        ],
        linear,
      ),
    ).toBe(2);
    expect(linear.stderr).toContain("only with timing: { type: roofline }");
  });

  it("fits stage summaries with the front end (client-side TTFT), and marks an overloaded stage excluded", async () => {
    const stage = (rate: number, ttft: number, e2e: number, failures: number) => ({
      rate,
      successes: 50,
      failures,
      ttft: { mean: ttft, median: ttft, p90: ttft * 1.2, p99: ttft * 1.5 },
      e2e: { mean: e2e, median: e2e, p90: e2e * 1.1, p99: e2e * 1.2 },
      prompt_len: { mean: 230 },
      output_len: { mean: 40 },
    });
    writeFileSync(
      path("stages.json"),
      JSON.stringify({
        engine: { model: "test/llama-shape", tensor_parallelism: 1, max_num_batched_tokens: 1024, max_num_seqs: 32 },
        workload: {
          data: {
            type: "shared_prefix",
            shared_prefix: { num_groups: 2, num_prompts_per_group: 5, system_prompt_len: 100, question_len: 100, output_len: 40 },
          },
          load: {
            type: "constant",
            stages: [
              { rate: 2, duration: 10 },
              { rate: 4, duration: 10 },
              { rate: 50, duration: 5 },
            ],
          },
        },
        stages: [stage(2, 0.03, 0.45, 0), stage(4, 0.032, 0.5, 0), stage(50, 3, 5, 20)],
      }),
    );
    writeFileSync(
      path("roofline-stages.yaml"),
      JSON.stringify(rooflineSpec({ type: "roofline" }, { synthetic: { requests: 1, input_tokens: 8, output_tokens: 2 } })),
    );
    const io = captureIo();
    const out = path("out", "stages-fitted.yaml");
    expect(
      await runCli(
        [
          "calibrate",
          "--spec",
          path("roofline-stages.yaml"),
          "--measured",
          path("stages.json"),
          "--out",
          out,
          "--max-evaluations",
          "12",
          "--max-stage-seconds",
          "5",
          "--format",
          "json",
        ],
        io,
      ),
    ).toBe(0);
    const r = JSON.parse(io.stdout) as {
      fitted: string[];
      runs: { frontend_ms: number; format: string; stages: { stage: number; excluded: boolean; simulatedRequests: number }[] }[];
      warnings: { kind: string; message: string }[];
    };
    expect(r.fitted).toContain("frontend.overhead_ms");
    expect(r.runs[0]!.frontend_ms).toBeGreaterThan(0);
    expect(r.runs[0]!.format).toBe("stage-summary");
    // The final tables replay every stage whole: 2/s x 10 s = 20 requests in stage 0.
    expect(r.runs[0]!.stages.map((s) => [s.stage, s.excluded, s.simulatedRequests])).toEqual([
      [0, false, 20],
      [1, false, 40],
      [2, true, 250],
    ]);
    expect(r.warnings.some((w) => w.kind === "excluded" && w.message.includes("stage 2 (50 req/s): 20 of 70 requests failed"))).toBe(true);
    const written = parseYaml(readFileSync(out, "utf8")) as { frontend: { overhead_ms: number }; timing: { type: string } };
    expect([written.timing.type, written.frontend.overhead_ms]).toEqual(["roofline", r.runs[0]!.frontend_ms]);
  });
});

describe("kvsim calibrate says when a fit fails", () => {
  it("a run that only ever sees one batch regime: the linear fit warns that terms cannot be told apart, and the JSON carries it", async () => {
    // 16 identical requests arriving together on a 32-sequence engine: one prefill, then one batch
    // decoding in lockstep. Every request has the same TTFT and TPOT, so the per-step and KV terms
    // both move only TPOT (and E2E with it): the data fix their sum, not each.
    let trace = "";
    for (let i = 0; i < 16; i++) trace += `${JSON.stringify({ request_id: `u${i}`, arrival_ms: 0, input_tokens: 300, output_tokens: 60 })}\n`;
    writeFileSync(path("uniform.jsonl"), trace);
    const uniform = (timing: unknown) => ({ ...specFor(timing), workload: { trace: "./uniform.jsonl", format: "kvsim" } });
    writeFileSync(path("uniform-truth.yaml"), JSON.stringify(uniform(TRUE)));
    writeFileSync(path("uniform.yaml"), JSON.stringify(uniform({ type: "fixed", prefill_ms: 10, decode_ms: 10 })));
    expect(await runCli(["replay", "--spec", path("uniform-truth.yaml"), "--requests", path("uniform-measured.jsonl")], captureIo())).toBe(0);
    const io = captureIo();
    expect(
      await runCli(
        [
          "calibrate",
          "--spec",
          path("uniform.yaml"),
          "--measured",
          path("uniform-measured.jsonl"),
          "--out",
          path("out", "uniform.yaml"),
          "--fit-fraction",
          "1",
          "--max-evaluations",
          "20",
          "--format",
          "json",
        ],
        io,
      ),
    ).toBe(0);
    const r = JSON.parse(io.stdout) as { warnings: { kind: string; message: string; settle?: string; terms?: string[] }[] };
    const flat = r.warnings.filter((w) => w.kind === "indistinguishable" || w.kind === "undetermined");
    expect(flat.length).toBeGreaterThan(0);
    expect(flat.some((w) => (w.terms ?? []).some((t) => t.startsWith("kv scale")) || (w.terms ?? []).some((t) => t.startsWith("decode scale")))).toBe(true);
    expect(flat.every((w) => w.settle !== undefined && w.settle.length > 0)).toBe(true);
    // Without model_shape and engine.gpu the fit has no physical floor, and says so.
    expect(r.warnings.some((w) => w.kind === "no_floor")).toBe(true);
    const table = captureIo();
    expect(
      await runCli(
        [
          "calibrate",
          "--spec",
          path("uniform.yaml"),
          "--measured",
          path("uniform-measured.jsonl"),
          "--out",
          path("out", "uniform2.yaml"),
          "--fit-fraction",
          "1",
          "--max-evaluations",
          "20",
        ],
        table,
      ),
    ).toBe(0);
    expect(table.stdout).toMatch(/warning: linear fit: .* (cannot be told apart|is not determined)/);
    expect(table.stdout).toContain("what would settle it: ");
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
    expect(await runCli(["trace", "from-measured", "--measured", path("vllm.jsonl"), "--prompts", path("prompts.jsonl"), "--out", path("t.jsonl")], io)).toBe(
      0,
    );
    expect(readFileSync(path("t.jsonl"), "utf8")).toBe(
      `${JSON.stringify({ request_id: "bench-0", arrival_ms: 0, input_token_ids: [5, 6, 7], output_tokens: 4 })}\n${JSON.stringify({ request_id: "bench-1", arrival_ms: 500, input_token_ids: [5, 9], output_tokens: 4 })}\n`,
    );
    writeFileSync(path("short.jsonl"), `${JSON.stringify({ input_tok_ids: [5, 6] })}\n`);
    const bad = captureIo();
    expect(await runCli(["trace", "from-measured", "--measured", path("vllm.jsonl"), "--prompts", path("short.jsonl"), "--out", path("t2.jsonl")], bad)).toBe(
      2,
    );
    expect(bad.stderr).toContain("bench-0: has 2 prompt token ids");
  });
});
