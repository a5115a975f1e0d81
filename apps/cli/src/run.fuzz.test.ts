import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { stringify as toYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asText, kvsim, LINEAR, mutated, nastyValue, runs, SPEC, TIMEOUT, TRACE, wellBehaved, type Json } from "./fuzz-support.js";

/**
 * The fuzz suite of the commands added after the first fuzz campaign (issue 38) that run a spec
 * with flags: `--set`, sweep, `--timeseries`, worker's flags and spec from-vllm (those that read
 * configs and measured runs are in commands.fuzz.test.ts). Each case damages an input (a mutated
 * field, text damage, an absurd flag) and runs the command end to end through `runCli`.
 * Properties, as in cli.fuzz.test.ts:
 *  - never an uncaught exception or a stack trace;
 *  - every refusal is exit 2 with a located message (the file and line or field, or the flag);
 *  - no partial outputs: a command that does not succeed writes none of its files, and no
 *    temporary file is left behind;
 *  - sweep and replay agree on the base spec: `--set` that makes replay refuse it makes the
 *    sweep refuse it (exit 2), and validate and replay agree on `--set`.
 * Fixed seeds (those of the suite before it was split in two, so the cases are the same); CI runs
 * SIZE cases per property (a few seconds each), `pnpm fuzz` 20x as many (KVSIM_FUZZ_SCALE), and
 * KVSIM_FUZZ_SEED picks another seed.
 */

const SEED = Number(process.env.KVSIM_FUZZ_SEED ?? "20261206") || 20261206;
/** Cases per property in CI. */
export const SIZE = {
  set: 30,
  sweep: 12,
  timeseries: 15,
  worker: 10,
  fromVllm: 30,
} as const;

let dir = "";
let counter = 0;
const fresh = (name: string) => join(dir, `${counter++}-${name}`);
const at = (name: string) => join(dir, name);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-fuzz-run-"));
  writeFileSync(at("linear.json"), JSON.stringify(LINEAR));
  writeFileSync(at("trace.jsonl"), TRACE.map((t) => `${JSON.stringify(t)}\n`).join(""));
  writeFileSync(at("spec.yaml"), toYaml(SPEC));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A value as --set takes it (YAML): a string as it is, anything else as JSON. */
function yamlText(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** A --set flag: a spec path (real, misspelt or absurd) and a value as YAML text. */
const setFlag: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom(
      "engine.max_num_seqs",
      "engine.num_gpu_blocks",
      "engine.block_size",
      "engine.max_model_len",
      "timing.prefill_ms",
      "timing",
      "topology.workers",
      "topology.kind",
      "workload.speedup",
      "workload.trace",
      "workload",
      "profile",
      "profile.kv_bytes_per_token",
      "router",
      "router.policy",
      "__proto__.x",
      "constructor",
      "engine..x",
      "engine[0]",
      "a".repeat(2000),
      Array.from({ length: 100 }, () => "a").join("."),
      "",
    ),
    fc.oneof(nastyValue.map(yamlText), fc.constantFrom("{", "[1,", "*a", "&a [1]", "!!binary x", "nope.json", "null")),
  )
  .map(([path, value]) => `${path}=${value}`);

/** The values of --set flags that name a file (a profile or a trace): messages name those files as given. */
const pathValues = (flags: readonly string[]): string[] =>
  flags
    .filter((f) => /^(profile|workload\.trace)=/.test(f))
    .map((f) => f.slice(f.indexOf("=") + 1).trim())
    .filter((v) => v !== "");

describe("fuzz: --set", () => {
  it(
    "validate and replay agree on a spec with --set flags, and a failed replay writes nothing",
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(setFlag, { minLength: 1, maxLength: 3 }), async (flags) => {
          const sets = flags.flatMap((f) => ["--set", f]);
          // A relative trace or profile path given in a flag is resolved against the working folder
          // (and shown as given, relative to it).
          const located = [at("spec.yaml"), "--set", dir, process.cwd(), ...pathValues(flags)];
          const v = await kvsim(["validate", at("spec.yaml"), ...sets]);
          wellBehaved(v, located);
          const out = fresh("out");
          mkdirSync(out);
          const r = await kvsim(["replay", "--spec", at("spec.yaml"), ...sets, "--format", "json", "--report", join(out, "r.json")]);
          wellBehaved(r, located);
          if (v.code === 0) expect(r.code, r.stderr).not.toBe(2);
          else expect(r.code).toBe(2);
          expect(readdirSync(out)).toEqual(r.code === 0 ? ["r.json"] : []);
        }),
        { seed: SEED + 5, numRuns: runs(SIZE.set) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: sweep", () => {
  const gridPath = fc.constantFrom(
    "engine.max_num_seqs",
    "engine.max_num_batched_tokens",
    "timing.decode_ms",
    "workload.speedup",
    "topology.workers",
    "workload.trace",
    "router",
    "colour",
    "engine..x",
    Array.from({ length: 80 }, () => "a").join("."),
  );
  const gridValues = fc.oneof(
    fc.array(nastyValue, { minLength: 1, maxLength: 3 }),
    fc.array(fc.integer({ min: 1, max: 16 }), { minLength: 1, maxLength: 3 }),
    fc.record({ from: nastyValue, to: nastyValue, step: nastyValue }),
    fc.record({ values: fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 2 }), zip: fc.constantFrom("z", "") }),
    nastyValue,
  );
  it(
    "a damaged grid or base spec is swept or refused, located; a base replay refuses, the sweep refuses; nothing partial",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.dictionary(gridPath, gridValues, { minKeys: 1, maxKeys: 2 }).chain((g) => asText(g as Json)),
          fc.array(setFlag, { maxLength: 1 }),
          async (gridText, flags) => {
            const grid = fresh("grid.yaml");
            writeFileSync(grid, gridText);
            const sets = flags.flatMap((f) => ["--set", f]);
            const out = fresh("out");
            mkdirSync(out);
            const s = await kvsim([
              "sweep",
              "--spec",
              at("spec.yaml"),
              ...sets,
              "--grid",
              grid,
              "--jobs",
              "1",
              "--out",
              join(out, "rows.jsonl"),
              "--csv",
              join(out, "rows.csv"),
              "--format",
              "json",
            ]);
            wellBehaved(s, [grid, at("spec.yaml"), "--set", dir, process.cwd(), ...pathValues(flags)]);
            expect(readdirSync(out).sort()).toEqual(s.code === 0 ? ["rows.csv", "rows.jsonl"] : []);
            if (sets.length > 0) {
              const r = await kvsim(["validate", at("spec.yaml"), ...sets]);
              if (r.code === 2) expect(s.code, `validate refused the base spec:\n${r.stderr}\nsweep said:\n${s.stderr}`).toBe(2);
            }
          },
        ),
        { seed: SEED + 6, numRuns: runs(SIZE.sweep) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: replay --timeseries", () => {
  it(
    "any file name and interval: a series, or a refusal naming the flag; nothing partial",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom("ts.csv", "ts.jsonl", "ts.txt", "ts", ""),
          fc.option(fc.constantFrom("0.001", "0.0001", "0", "-5", "1e13", "1e14", "5", "NaN", "x", "", "1e-7", "400"), { nil: undefined }),
          fc.boolean(),
          async (name, sampleMs, html) => {
            const out = fresh("out");
            mkdirSync(out);
            const ts = name === "" ? "" : join(out, name);
            const r = await kvsim([
              "replay",
              "--spec",
              at("spec.yaml"),
              "--timeseries",
              ts,
              ...(sampleMs === undefined ? [] : ["--sample-ms", sampleMs]),
              ...(html ? ["--html", join(out, "r.html")] : []),
              "--format",
              "json",
            ]);
            wellBehaved(r, ["--"]);
            const written = readdirSync(out).sort();
            expect(written).toEqual(r.code === 0 ? [...(html ? ["r.html"] : []), name].sort() : []);
          },
        ),
        { seed: SEED + 7, numRuns: runs(SIZE.timeseries) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: worker flags", () => {
  it(
    "a bad --jobs, --lock-ms or --stalled-ms is a usage error before any connection",
    async () => {
      const bad = fc.constantFrom("", "0", "-1", "1.5", "x", "1e400", "99", "9".repeat(40));
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom("--jobs", "--lock-ms", "--stalled-ms"),
          bad,
          fc.constantFrom("redis://127.0.0.1:1/0", "http://x", "", "redis://"),
          async (flag, value, queue) => {
            // 99 is a valid --lock-ms/--stalled-ms below their minimum of 100; for --jobs it is valid, so pair it with a bad lock.
            const extra = flag === "--jobs" && value === "99" ? ["--lock-ms", "5"] : [];
            const r = await kvsim(["worker", "--queue", queue, flag, value, ...extra]);
            wellBehaved(r, ["--"]);
            expect(r.code).toBe(2);
          },
        ),
        { seed: SEED + 8, numRuns: runs(SIZE.worker) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: spec from-vllm", () => {
  const META: Json = {
    model: "test/linear",
    vllm_version: "0.32.0",
    engine_kwargs: { tensor_parallel_size: 1, max_num_seqs: 32, max_num_batched_tokens: 1024, enable_prefix_caching: true },
    kv_cache: { num_gpu_blocks: 500, block_size: 16 },
    hardware: { device_name: "NVIDIA H100 80GB HBM3" },
    resolved_config: {
      scheduler_config: { async_scheduling: true, scheduler_reserve_full_isl: false },
      compilation_config: { cudagraph_capture_sizes: [1, 2, 4, 8] },
    },
  };
  const FLAG = fc.constantFrom(
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--tensor-parallel-size",
    "--data-parallel-size",
    "--block-size",
    "--gpu-memory-utilization",
    "--max-model-len",
    "--async-scheduling",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--swap-space",
    "--nonsense",
  );
  const VALUE = fc.constantFrom("", "1", "0", "-1", "8", "2.5", "1e400", "NaN", "abc", "4096", String(2 ** 53), "0.9", "--", "=");
  it(
    "a mutated meta.json or damaged serve arguments give a spec that validates with a fixed timing, or a located refusal",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            mutated(META)
              .chain((d) => asText(d, false))
              .map((text) => ({ meta: text })),
            fc
              .array(fc.tuple(FLAG, fc.option(VALUE, { nil: undefined })), { maxLength: 6 })
              .map((pairs) => ({ args: pairs.flatMap(([f, v]) => (v === undefined ? [f] : [f, v])) })),
          ),
          fc.constantFrom<string[]>([], ["--gpu", "H100-SXM"], ["--gpu", "nope"], ["--timing", "linear"], ["--timing", "bogus"], ["--format", "mooncake"]),
          async (source, flags) => {
            const out = fresh("spec.yaml");
            let argv: string[];
            const located: string[] = [];
            if ("meta" in source) {
              const meta = fresh("meta.json");
              writeFileSync(meta, source.meta);
              located.push(meta);
              argv = ["spec", "from-vllm", meta];
            } else argv = ["spec", "from-vllm", "--", "vllm", "serve", "test/linear", ...source.args];
            const r = await kvsim([...argv, "--profile", at("linear.json"), "--trace", at("trace.jsonl"), ...flags, "--out", out]);
            wellBehaved(r, located);
            // Written only on success, and then a spec that replays once given a timing the profile can price.
            expect(existsSync(out)).toBe(r.code === 0);
            if (r.code === 0) {
              const v = await kvsim(["validate", out, "--set", "timing={type: fixed, prefill_ms: 5, decode_ms: 1}"]);
              expect([0, 2]).toContain(v.code);
              wellBehaved(v, [out, "--set", at("trace.jsonl"), at("linear.json")]);
            }
          },
        ),
        { seed: SEED + 9, numRuns: runs(SIZE.fromVllm) },
      );
    },
    TIMEOUT,
  );
});
