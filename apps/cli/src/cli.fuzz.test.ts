import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { stringify as toYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "./main.js";
import { runs, TIMEOUT, wellBehaved } from "./fuzz-support.js";
import { captureIo } from "./test-io.js";

/**
 * The project's fuzz suite over the CLI (issue 11): fast-check arbitraries over profiles, specs,
 * trace lines and command-line flags, each run end to end through `runCli`. Properties:
 *  - never an uncaught exception or a stack trace (no "internal error", no "    at ");
 *  - every refusal is exit 2 with a located message (the file and field or line, or the flag);
 *  - `validate` and `replay` agree: what validate accepts, replay runs (exit 0, or 1 for a run
 *    that cannot finish); what it refuses, replay refuses with the same message before starting;
 *  - no partial outputs: a replay that does not succeed writes neither --report nor --requests,
 *    and leaves no temporary file.
 * Fixed seeds; CI runs FUZZ_RUNS cases per property (see SIZE below), `pnpm fuzz` 20x as many
 * (KVSIM_FUZZ_SCALE), and KVSIM_FUZZ_SEED picks another seed.
 */

const SEED = Number(process.env.KVSIM_FUZZ_SEED ?? "20261130") || 20261130;
/** Cases per property in CI; each case is one to four CLI runs. */
export const SIZE = { profiles: 60, specs: 120, traces: 60, flags: 150 } as const;

let dir = "";
let counter = 0;
const fresh = (name: string) => join(dir, `${counter++}-${name}`);

async function kvsim(...argv: string[]) {
  const io = captureIo();
  const code = await runCli(argv, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

// ---------------------------------------------------------------------------------------------
// Values: what a typo, a bad generator or an attacker puts in a field.

const NASTY_NUMBERS = [0, -1, -0.5, 0.5, 1.5, 5e-324, 1e-300, 1e308, -1e308, 2 ** 24 + 1, 2 ** 31, 2 ** 53, 2 ** 53 + 2, 2 ** 64, 1e15, 1e300];
/** JSON/YAML values of every kind, small and absurd; numbers include the limits' edges. */
const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(...NASTY_NUMBERS, null, true, false, "", "x", "50 GB/s", "1e400", [], {}, [[[[[]]]]], { __proto__: null }),
  fc.integer({ min: -5, max: 70_000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 12 }),
  fc.array(fc.integer(), { maxLength: 3 }),
);
/** A size that is cheap when valid (no 10^6-request workload), and often not valid. */
const sizeValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: 1, max: 4 }),
  fc.constantFrom<unknown>(0, -1, 1.5, 2 ** 24 + 1, 1e6 + 1, 2 ** 53, "2", null, [], {}),
);

type Json = Record<string, unknown>;

/** The leaves of an object (paths to non-object values, and to objects too, so a whole section may go). */
function paths(v: unknown, at: string[] = [], out: string[][] = []): string[][] {
  if (v !== null && typeof v === "object" && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) {
      out.push([...at, k]);
      paths(x, [...at, k], out);
    }
  }
  return out;
}

function setPath(root: Json, path: readonly string[], value: unknown): Json {
  const copy: Json = structuredClone(root);
  let o: Json = copy;
  for (const k of path.slice(0, -1)) {
    const next = o[k];
    if (next === null || typeof next !== "object" || Array.isArray(next)) return copy;
    o = next as Json;
  }
  const last = path.at(-1)!;
  // Deleting a key the fuzzer picked is the point here.
  // eslint-disable-next-line @typescript-eslint/no-dynamic-delete
  if (value === DELETE) delete o[last];
  else o[last] = value;
  return copy;
}

const DELETE = Symbol("delete");
const SIZE_KEYS = new Set([
  "requests",
  "input_tokens",
  "output_tokens",
  "workers",
  "num_gpu_blocks",
  "max_num_seqs",
  "max_num_batched_tokens",
  "prefill",
  "decode",
]);

/** Up to three mutations of `base`: a field set to a nasty value, deleted, or a new key added. */
function mutated(base: Json): fc.Arbitrary<Json> {
  const all = paths(base);
  const one = fc.tuple(fc.constantFrom(...all), fc.nat(3), nastyValue, sizeValue, fc.constantFrom("colour", "__proto__", "constructor", "bandwidth_gbps")).map(
    ([path, how, nasty, size]) =>
      (o: Json) =>
        how === 0
          ? setPath(o, path, DELETE)
          : how === 1
            ? setPath(o, [...path.slice(0, -1), "extra_key"], 1)
            : setPath(o, path, SIZE_KEYS.has(path.at(-1)!) ? size : nasty),
  );
  return fc.array(one, { minLength: 1, maxLength: 3 }).map((fs) => fs.reduce((o, f) => f(o), base));
}

/** A document as text: JSON, YAML, or text-level damage (truncation, a stray character, a duplicate key). */
function asText(doc: Json): fc.Arbitrary<string> {
  const json = JSON.stringify(doc, null, 1);
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant(json) },
    { weight: 3, arbitrary: fc.constant(toYaml(doc)) },
    { weight: 1, arbitrary: fc.nat(json.length).map((n) => json.slice(0, n)) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.nat(json.length), fc.constantFrom("[", "{", "&a", "*a", '"', "\r", "\u0000", "\uFEFF", ",", "9".repeat(400)))
        .map(([n, c]) => json.slice(0, n) + c + json.slice(n)),
    },
    { weight: 1, arbitrary: fc.constant(json.replace(/^\{\n/, () => `{\n "${Object.keys(doc)[0] ?? "a"}": 1,\n`)) },
  );
}

// ---------------------------------------------------------------------------------------------

const LINEAR: Json = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 };
const GLM = glmFlashProfile("0.32.0") as unknown as Json;
const SPEC: Json = {
  version: 1,
  profile: "./linear.json",
  topology: { kind: "aggregated", workers: 1 },
  engine: { num_gpu_blocks: 64, block_size: 4, max_num_seqs: 4 },
  timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
  workload: { synthetic: { requests: 3, input_tokens: 8, output_tokens: 2, rate_per_s: 10, seed: 1 } },
  sla: { ttft_ms: 100 },
};
const PD_SPEC: Json = {
  version: 1,
  profile: "./glm.json",
  topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
  engine: { num_gpu_blocks: 64 },
  kv_transfer: { bandwidth: "50 GB/s", mode: "destination_missing" },
  timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
  workload: { synthetic: { requests: 2, input_tokens: 100, output_tokens: 2 } },
};
const TRACE_LINE: Json = { timestamp: 0, input_length: 1000, output_length: 3, hash_ids: [1, 2] };

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-fuzz-"));
  writeFileSync(join(dir, "linear.json"), JSON.stringify(LINEAR));
  writeFileSync(join(dir, "glm.json"), JSON.stringify(GLM));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/**
 * validate, then replay with --report and --requests; checks every property of the suite.
 * `files` are the inputs a message may be located in.
 */
async function validateThenReplay(spec: string, files: readonly string[]): Promise<void> {
  const located = [...files, "--set", "<stdin>"];
  const v = await kvsim("validate", spec);
  wellBehaved(v, located);
  expect(v.code).not.toBe(1);
  const out = join(dir, `out-${counter++}`);
  mkdirSync(out);
  const report = join(out, "r.json");
  const requests = join(out, "q.jsonl");
  const r = await kvsim("replay", "--spec", spec, "--format", "json", "--report", report, "--requests", requests);
  wellBehaved(r, located);
  if (v.code === 0) {
    // What validate accepts, replay runs (or ends as a failed run, exit 1, with its reason).
    expect(r.code, r.stderr).not.toBe(2);
  } else {
    expect(r.code, `validate refused, replay said:\n${r.stdout.slice(0, 200)}${r.stderr}`).toBe(2);
    // The same located problems, and no more (warnings aside).
    const problems = (s: string) => s.split("\n").filter((l) => !l.startsWith("warning: "));
    expect(problems(r.stderr)).toEqual(problems(v.stderr));
  }
  // All or nothing, and no temporary file left behind.
  expect(readdirSync(out).sort()).toEqual(r.code === 0 ? ["q.jsonl", "r.json"] : []);
  if (r.code === 0) expect((JSON.parse(r.stdout) as { digest: string }).digest).toMatch(/^[0-9a-f]{64}$/);
}

describe("fuzz: profiles", () => {
  it(
    "a mutated profile is validated, priced and replayed without a crash, refused where it is wrong",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(LINEAR, GLM).chain((p) => mutated(p).chain(asText)),
          fc.boolean(),
          async (text, pd) => {
            const file = fresh("profile.json");
            writeFileSync(file, text);
            wellBehaved(await kvsim("validate", file), [file]);
            wellBehaved(await kvsim("transfer", "--profile", file, "--prompt-tokens", "1000", "--bandwidth", "1 GB/s"), [file]);
            const spec = fresh("spec.yaml");
            writeFileSync(
              spec,
              toYaml({ ...(pd ? PD_SPEC : SPEC), profile: file, engine: pd ? { num_gpu_blocks: 64 } : { num_gpu_blocks: 64, block_size: 4 } }),
            );
            await validateThenReplay(spec, [file, spec]);
          },
        ),
        { seed: SEED, numRuns: runs(SIZE.profiles) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: specs", () => {
  it(
    "validate and replay agree on a mutated spec, and a failed replay writes nothing",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(SPEC, PD_SPEC).chain((s) => mutated(s).chain(asText)),
          async (text) => {
            const spec = fresh("spec.yaml");
            writeFileSync(spec, text);
            // A mangled profile path is named as the missing file it is (somewhere in the folder).
            await validateThenReplay(spec, [spec, join(dir, "linear.json"), join(dir, "glm.json"), `${dir}/`]);
          },
        ),
        { seed: SEED + 1, numRuns: runs(SIZE.specs) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: trace lines", () => {
  const traceLine = fc.oneof(
    { weight: 3, arbitrary: fc.constant(JSON.stringify(TRACE_LINE)) },
    { weight: 3, arbitrary: mutated(TRACE_LINE).map((o) => JSON.stringify(o)) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        "",
        "not json",
        "[1,2,3]",
        `{"timestamp":0,"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[1]}`,
        `{"timestamp":0,"input_length":10,"output_length":1,"hash_ids":[1]}\r{"timestamp":1}`,
        `{"timestamp":0,"input_length":${"9".repeat(400)},"output_length":1,"hash_ids":[1]}`,
        "[".repeat(5000),
        `{"timestamp":0,"input_length":16777216,"output_length":16777216,"hash_ids":[1]}`,
      ),
    },
  );
  it(
    "validate and replay agree on a trace with damaged lines",
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(traceLine, { minLength: 1, maxLength: 5 }), fc.constantFrom("mooncake", "kvsim"), async (lines, format) => {
          const trace = fresh("trace.jsonl");
          writeFileSync(trace, `${lines.join("\n")}\n`);
          const spec = fresh("spec.yaml");
          writeFileSync(spec, toYaml({ ...SPEC, workload: { trace, format, trace_block_size: 512 }, max_virtual_time_ms: 1e7 }));
          await validateThenReplay(spec, [spec, trace]);
        }),
        { seed: SEED + 2, numRuns: runs(SIZE.traces) },
      );
    },
    TIMEOUT,
  );
});

describe("fuzz: command-line flags", () => {
  const value = fc.oneof(
    fc.constantFrom(
      "",
      "0",
      "-1",
      "1e15",
      "5e-324",
      "1e308",
      "NaN",
      "Infinity",
      "0x10",
      "1.5",
      "9".repeat(400),
      "50 GB/s",
      "50 Gbps",
      "table",
      "json",
      "xml",
      "-",
      ".",
    ),
    fc.integer({ min: -3, max: 100_000 }).map(String),
    fc.string({ maxLength: 8 }),
  );
  const fileValue = () =>
    fc.constantFrom(join(dir, "linear.json"), join(dir, "glm.json"), join(dir, "nope.json"), "/dev/zero", dir, join(dir, "missing", "x.json"), "");
  const FLAGS: Record<string, readonly string[]> = {
    validate: ["--set"],
    transfer: ["--profile", "--prompt-tokens", "--destination-cached-tokens", "--bandwidth", "--bandwidth-gbps", "--mode", "--block-size", "--format"],
    "dynamo handoff-timing": ["--profile", "--prompt-tokens", "--bandwidth", "--bandwidth-gbps", "--mode", "--legacy"],
    replay: ["--set", "--format", "--report", "--requests", "--force", "--quiet", "--bogus"],
    "profile show": ["--num-gpu-blocks", "--gpu", "--gpu-memory-gib", "--format"],
    schemas: ["--check", "--force"],
  };
  const argv = fc.constantFrom(...Object.keys(FLAGS)).chain((command) =>
    fc
      .array(
        fc.tuple(fc.constantFrom(...FLAGS[command]!), value, fileValue()).map(([flag, v, file]) => {
          if (flag === "--profile") return [flag, file];
          if (flag === "--report" || flag === "--requests") return [flag, v === "" ? "" : join(dir, "flags-out", `${v.replace(/[/\\]/g, "_")}.json`)];
          if (["--force", "--quiet", "--legacy", "--check", "--bogus"].includes(flag)) return [flag];
          if (flag === "--set") return [flag, `engine.max_num_seqs=${v}`];
          return [flag, v];
        }),
        { maxLength: 5 },
      )
      .map((flags) => {
        const head = command.split(" ");
        // Commands with a positional input get one; replay always runs the small spec.
        const spec = join(dir, "flags-spec.yaml");
        const pos =
          command === "validate" || command === "profile show"
            ? [join(dir, "linear.json")]
            : command === "replay"
              ? ["--spec", spec]
              : command === "schemas"
                ? ["--out", join(dir, "flags-schemas")]
                : [];
        return [...head, ...pos, ...flags.flat()];
      }),
  );
  it(
    "any mix of flags and values: a result, or a usage error naming what is wrong; never a crash",
    async () => {
      writeFileSync(join(dir, "flags-spec.yaml"), toYaml({ ...SPEC, profile: join(dir, "linear.json") }));
      mkdirSync(join(dir, "flags-out"), { recursive: true });
      await fc.assert(
        fc.asyncProperty(argv, async (args) => {
          const r = await kvsim(...args);
          wellBehaved(r, [
            join(dir, "linear.json"),
            join(dir, "glm.json"),
            join(dir, "nope.json"),
            join(dir, "flags-spec.yaml"),
            "/dev/zero",
            dir,
            "--",
            "-",
            "",
          ]);
          // No temporary file is ever left behind, whatever the outcome.
          expect(readdirSync(join(dir, "flags-out")).filter((f) => f.endsWith(".tmp"))).toEqual([]);
        }),
        { seed: SEED + 3, numRuns: runs(SIZE.flags) },
      );
    },
    TIMEOUT,
  );
});
