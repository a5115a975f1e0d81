import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { stringify as toYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asText, kvsim, LINEAR, mutated, runs, SPEC, TIMEOUT, TRACE, wellBehaved, type Json } from "./fuzz-support.js";

/**
 * The fuzz suite of the commands added after the first fuzz campaign (issue 38) that read
 * configs and measured runs: calibrate, compare, trace from-measured, diff, profile from-hf,
 * profile show and plan (those that run a spec with flags are in run.fuzz.test.ts). Each case damages an input (a mutated field, text damage, an absurd flag) and
 * runs the command end to end through `runCli`. Properties, as in cli.fuzz.test.ts:
 *  - never an uncaught exception or a stack trace;
 *  - every refusal is exit 2 with a located message (the file and line or field, or the flag);
 *  - no partial outputs: a command that does not succeed writes none of its files, and no
 *    temporary file is left behind;
 *  - what one command writes, the next accepts: a trace from `trace from-measured` replays, a
 *    profile from `profile from-hf` validates.
 * Fixed seeds; CI runs SIZE cases per property (a few seconds each), `pnpm fuzz` 20x as many
 * (KVSIM_FUZZ_SCALE), and KVSIM_FUZZ_SEED picks another seed.
 */

const SEED = Number(process.env.KVSIM_FUZZ_SEED ?? "20261206") || 20261206;
/** Cases per property in CI. */
export const SIZE = {
  fromHf: 60,
  profileShow: 30,
  measured: 30,
  calibrate: 6,
  diff: 30,
  plan: 10,
} as const;

let dir = "";
let counter = 0;
const fresh = (name: string) => join(dir, `${counter++}-${name}`);
const at = (name: string) => join(dir, name);
/** Files in `folder` a failed command must not have left: its outputs and any temporary file. */
const leftovers = (folder: string) => readdirSync(folder).filter((f) => f.endsWith(".tmp"));

const GLM = glmFlashProfile("0.32.0") as unknown as Json;
const LLAMA: Json = {
  architectures: ["LlamaForCausalLM"],
  hidden_size: 4096,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  intermediate_size: 14336,
  vocab_size: 128256,
  max_position_embeddings: 131072,
  torch_dtype: "bfloat16",
  tie_word_embeddings: false,
};
const DEEPSEEK: Json = {
  architectures: ["DeepseekV3ForCausalLM"],
  hidden_size: 7168,
  num_hidden_layers: 61,
  num_attention_heads: 128,
  q_lora_rank: 1536,
  kv_lora_rank: 512,
  qk_nope_head_dim: 128,
  qk_rope_head_dim: 64,
  v_head_dim: 128,
  intermediate_size: 18432,
  moe_intermediate_size: 2048,
  n_routed_experts: 256,
  n_shared_experts: 1,
  num_experts_per_tok: 8,
  first_k_dense_replace: 3,
  vocab_size: 129280,
  max_position_embeddings: 163840,
  torch_dtype: "bfloat16",
  quantization_config: { quant_method: "fp8", weight_block_size: [128, 128] },
};
const GEMMA: Json = {
  architectures: ["Gemma3ForCausalLM"],
  hidden_size: 3840,
  num_hidden_layers: 48,
  num_attention_heads: 16,
  num_key_value_heads: 8,
  head_dim: 256,
  intermediate_size: 15360,
  vocab_size: 262208,
  sliding_window: 1024,
  sliding_window_pattern: 6,
  max_position_embeddings: 131072,
  torch_dtype: "bfloat16",
};

/** Sizes a measured field may take: cheap when valid, often not. */
const measuredSize = (key: string): fc.Arbitrary<unknown> | undefined =>
  /toks|tokens|lens/.test(key)
    ? fc.oneof(fc.integer({ min: 1, max: 12 }), fc.constantFrom<unknown>(0, -1, 1.5, 2 ** 24, 2 ** 24 + 1, 2 ** 53, "3", null))
    : undefined;

let records: Json[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-fuzz-commands-"));
  writeFileSync(at("linear.json"), JSON.stringify(LINEAR));
  writeFileSync(at("glm.json"), JSON.stringify(GLM));
  writeFileSync(at("trace.jsonl"), TRACE.map((t) => `${JSON.stringify(t)}\n`).join(""));
  writeFileSync(at("spec.yaml"), toYaml(SPEC));
  // The simulated run and its report: the other side of compare, and what diff reads.
  const r = await kvsim(["replay", "--spec", at("spec.yaml"), "--requests", at("sim.jsonl"), "--report", at("report.json")]);
  expect(r.code, r.stderr).toBe(0);
  records = readFileSync(at("sim.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Json);
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Measured runs in the three formats, made from the simulated records (times in seconds for vLLM).

const vllmLine = (r: Json): Json => {
  const a = r.arrival_ms as number;
  return {
    request_id: r.request_id,
    input_toks: r.input_tokens,
    output_toks: r.output_tokens,
    queued_ts: a / 1000,
    scheduled_ts: a / 1000,
    first_token_ts: (a + (r.ttft_ms as number)) / 1000,
    last_token_ts: (a + (r.e2e_ms as number)) / 1000,
  };
};
const benchDoc = (): Json => ({
  input_lens: records.map((r) => r.input_tokens),
  output_lens: records.map((r) => r.output_tokens),
  ttfts: records.map((r) => (r.ttft_ms as number) / 1000),
  itls: records.map((r) =>
    Array.from({ length: (r.output_tokens as number) - 1 }, () => ((r.e2e_ms as number) - (r.ttft_ms as number)) / ((r.output_tokens as number) - 1) / 1000),
  ),
  errors: records.map(() => ""),
  start_times: records.map((r) => (r.arrival_ms as number) / 1000),
});

/** A measured file's text: JSONL with one line mutated (or damaged), or the bench JSON mutated. */
const measuredText: fc.Arbitrary<{ format: string; text: string }> = fc
  .constantFrom("vllm-requests", "kvsim-requests", "vllm-bench")
  .chain((format): fc.Arbitrary<{ format: string; text: string }> => {
    if (format === "vllm-bench")
      return mutated(benchDoc(), measuredSize)
        .chain((d) => asText(d, false))
        .map((text) => ({ format, text }));
    const lines = format === "vllm-requests" ? records.map(vllmLine) : records;
    return fc
      .tuple(fc.nat(lines.length - 1), fc.nat(lines.length - 1))
      .chain(([i, j]) =>
        fc.tuple(
          fc.constant(i),
          fc.oneof(
            mutated(lines[i]!, measuredSize).map((o) => JSON.stringify(o)),
            asText(lines[i]!, false).map((t) => t.replace(/\n/g, "")),
            fc.constant(JSON.stringify(lines[j])),
          ),
        ),
      )
      .map(([i, line]) => ({ format, text: lines.map((l, k) => (k === i ? line : JSON.stringify(l))).join("\n") + "\n" }));
  });

// ---------------------------------------------------------------------------------------------

describe("fuzz: profile from-hf", () => {
  it(
    "a mutated Hugging Face config derives a profile that validates, or is refused naming the config",
    async () => {
      const sized = (key: string): fc.Arbitrary<unknown> | undefined => {
        if (key === "architectures")
          return fc.constantFrom<unknown>(["constructor"], ["toString"], ["__proto__"], ["hasOwnProperty", "LlamaForCausalLM"], [], ["LlamaForCausalLM", 3]);
        if (key.endsWith("dtype")) return fc.constantFrom<unknown>("float7", "fp8", "auto", "", "float32", "bfloat16", 2);
        if (/layers|size|heads|dim|experts|rank/.test(key))
          return fc.oneof(fc.integer({ min: 1, max: 64 }), fc.constantFrom<unknown>(0, 4096, 4097, 2 ** 24, 2 ** 24 + 1, 2 ** 53 - 1, 1e9));
        return undefined;
      };
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(LLAMA, DEEPSEEK, GEMMA).chain((c) => mutated(c, sized).chain((d) => asText(d, false))),
          fc.constantFrom("1", "2", "8", "3", "0"),
          fc.constantFrom<string[]>([], ["--gpu", "H100"], ["--gpu-memory-gib", "80"], ["--kv-cache-dtype", "fp8"], ["--block-size", "32"]),
          fc.boolean(),
          async (text, tp, flags, out) => {
            const cfg = fresh("config.json");
            writeFileSync(cfg, text);
            const profile = fresh("profile.json");
            const r = await kvsim(["profile", "from-hf", cfg, "--tp", tp, ...flags, ...(out ? ["--out", profile] : [])]);
            wellBehaved(r, [cfg]);
            // A refusal names the config's own keys, never a field of the profile derived from it.
            expect(r.stderr).not.toContain("(derived profile)");
            // Written only on success, and then a profile kvsim accepts.
            expect(existsSync(profile)).toBe(out && r.code === 0);
            if (out && r.code === 0) {
              const v = await kvsim(["validate", profile]);
              expect(v.code, v.stderr).toBe(0);
            }
          },
        ),
        { seed: SEED, numRuns: runs(SIZE.fromHf) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: profile show", () => {
  it(
    "a mutated profile is shown, or refused naming the file",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(LINEAR, GLM).chain((p) => mutated(p).chain((d) => asText(d))),
          fc.constantFrom<string[]>(
            [],
            ["--num-gpu-blocks", "1000"],
            ["--gpu", "H100"],
            ["--gpu-memory-gib", "24"],
            ["--format", "json"],
            ["--block-size", "7"],
          ),
          async (text, flags) => {
            const file = fresh("profile.json");
            writeFileSync(file, text);
            wellBehaved(await kvsim(["profile", "show", file, ...flags]), [file]);
          },
        ),
        { seed: SEED + 1, numRuns: runs(SIZE.profileShow) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: compare and trace from-measured", () => {
  it(
    "a damaged measured run is compared or refused naming file, line and field; a trace written from it replays",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          measuredText,
          fc.constantFrom<string[]>([], ["--from-request", "3"], ["--after-ms", "500"], ["--format", "json"]),
          fc.boolean(),
          async ({ text }, select, html) => {
            const m = fresh("measured.jsonl");
            writeFileSync(m, text);
            const out = fresh("out");
            mkdirSync(out);
            const page = join(out, "c.html");
            const c = await kvsim(["compare", "--measured", m, "--requests", at("sim.jsonl"), ...select, ...(html ? ["--html", page] : [])]);
            wellBehaved(c, [m, at("sim.jsonl")]);
            expect(readdirSync(out)).toEqual(html && c.code === 0 ? ["c.html"] : []);

            const trace = join(out, "t.jsonl");
            const t = await kvsim(["trace", "from-measured", "--measured", m, "--out", trace]);
            wellBehaved(t, [m]);
            expect(existsSync(trace)).toBe(t.code === 0);
            expect(leftovers(out)).toEqual([]);
            if (t.code === 0) {
              // What trace from-measured writes, replay takes (a run that cannot finish is exit 1, not a refusal).
              const spec = join(out, "spec.yaml");
              writeFileSync(spec, toYaml({ ...SPEC, profile: at("linear.json"), workload: { trace, format: "kvsim" } }));
              const r = await kvsim(["replay", "--spec", spec, "--format", "json"]);
              expect(r.code, r.stderr).not.toBe(2);
            }
          },
        ),
        { seed: SEED + 2, numRuns: runs(SIZE.measured) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: calibrate", () => {
  it(
    "a damaged measured run is fitted or refused, and a refused fit writes nothing",
    async () => {
      const lines = () => records.map(vllmLine);
      await fc.assert(
        fc.asyncProperty(
          fc.nat(23).chain((i) =>
            mutated(lines()[i]!, measuredSize).map(
              (o) =>
                lines()
                  .map((l, k) => JSON.stringify(k === i ? o : l))
                  .join("\n") + "\n",
            ),
          ),
          fc.constantFrom("0.5", "0.9", "0", "2", "x"),
          async (text, fraction) => {
            const m = fresh("measured.jsonl");
            writeFileSync(m, text);
            const out = fresh("out");
            mkdirSync(out);
            const r = await kvsim([
              "calibrate",
              "--spec",
              at("spec.yaml"),
              "--measured",
              m,
              "--out",
              join(out, "fitted.yaml"),
              "--fit-fraction",
              fraction,
              "--max-evaluations",
              "2",
            ]);
            wellBehaved(r, [m, at("spec.yaml"), at("trace.jsonl")]);
            expect(readdirSync(out)).toEqual(r.code === 0 ? ["fitted.yaml"] : []);
          },
        ),
        { seed: SEED + 3, numRuns: runs(SIZE.calibrate) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: diff", () => {
  it(
    "a mutated report is compared or refused naming the file",
    async () => {
      const report = () => JSON.parse(readFileSync(at("report.json"), "utf8")) as Json;
      await fc.assert(
        fc.asyncProperty(
          fc.constant(null).chain(() => mutated(report()).chain((d) => asText(d, false))),
          fc.constantFrom("table", "json", "xml"),
          async (text, format) => {
            const a = fresh("a.json");
            writeFileSync(a, text);
            const r = await kvsim(["diff", a, at("report.json"), "--format", format]);
            wellBehaved(r, [a, at("report.json")]);
            expect(r.stdout).not.toMatch(/∞|NaN/);
          },
        ),
        { seed: SEED + 4, numRuns: runs(SIZE.diff) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: plan", () => {
  /** A flag of kvsim plan with a value from the edge of what it takes, or past it. */
  const planFlag = fc.oneof(
    fc.tuple(
      fc.constantFrom("--gpus", "--rate", "--tolerance", "--top", "--price-per-gpu-hour"),
      fc.constantFrom("0", "-1", "1e400", "NaN", "", "2.5", "1", "0.6"),
    ),
    fc.tuple(fc.constantFrom("--tp", "--max-num-seqs", "--max-num-batched-tokens"), fc.constantFrom("1,2", "0", "1,,2", "x", "3", "99999999999", "1,1,1")),
    fc.tuple(fc.constant("--topology"), fc.constantFrom("aggregated", "disaggregated,aggregated", "mesh", "")),
    fc.tuple(fc.constant("--sla"), fc.constantFrom("p90_ttft_ms<=1e9", "p90_ttft_ms<=0", "goodput_rps>=1", "x<=1", "", "p90_tpot_ms<=-1")),
    fc.tuple(fc.constant("--trace-format"), fc.constantFrom("kvsim", "azure", "mooncake", "csv")),
    fc.tuple(fc.constant("--gpu"), fc.constantFrom("H100-SXM", "L4", "H900", "")),
  );
  it(
    "a damaged config, trace or flag plans or is refused, located; nothing partial",
    async () => {
      const sized = (key: string): fc.Arbitrary<unknown> | undefined =>
        /layers|size|heads/.test(key) ? fc.oneof(fc.integer({ min: 1, max: 64 }), fc.constantFrom<unknown>(0, 3, 4097, 2 ** 24 + 1, 1e9)) : undefined;
      const traceText = fc.oneof(
        { weight: 3, arbitrary: fc.constant(readTraceText()) },
        { weight: 1, arbitrary: fc.nat(2000).map((n) => readTraceText().slice(0, n)) },
        { weight: 1, arbitrary: fc.constantFrom("", "{}\n", '{"arrival_ms":0,"input_tokens":1e9,"output_tokens":1}\n', "not json\n") },
      );
      await fc.assert(
        fc.asyncProperty(
          mutated(LLAMA, sized).chain((d) => asText(d, false)),
          traceText,
          fc.array(planFlag, { maxLength: 2 }),
          async (configText, trace, flags) => {
            const cfg = fresh("config.json");
            writeFileSync(cfg, configText);
            const tr = fresh("trace.jsonl");
            writeFileSync(tr, trace);
            const out = fresh("out");
            mkdirSync(out);
            const extra: string[] = flags.flat();
            const has = (f: string) => extra.includes(f);
            const r = await kvsim([
              "plan",
              "--model",
              cfg,
              ...(has("--gpu") ? [] : ["--gpu", "L4"]),
              ...(has("--gpus") ? [] : ["--gpus", "2"]),
              ...(has("--tp") ? [] : ["--tp", "1,2"]),
              ...(has("--sla") ? [] : ["--sla", "p90_ttft_ms<=2000"]),
              ...(has("--max-num-batched-tokens") ? [] : ["--max-num-batched-tokens", "512"]),
              "--trace",
              tr,
              ...extra,
              "--jobs",
              "1",
              "--out",
              join(out, "plan.jsonl"),
              "--format",
              "json",
            ]);
            wellBehaved(r, [cfg, tr, ...extra.filter((x) => x.startsWith("--")), "kvsim plan"]);
            expect(readdirSync(out)).toEqual(r.code === 0 ? ["plan.jsonl"] : []);
          },
        ),
        { seed: SEED + 11, numRuns: runs(SIZE.plan) },
      );
    },
    TIMEOUT,
  );
});

/** The suite's trace as text (24 requests). */
function readTraceText(): string {
  return readFileSync(at("trace.jsonl"), "utf8");
}
