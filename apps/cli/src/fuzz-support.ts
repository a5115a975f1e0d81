import fc from "fast-check";
import { stringify as toYaml } from "yaml";
import { expect } from "vitest";
import { runCli } from "./main.js";
import type { StdinIo } from "./spec-input.js";
import { captureIo } from "./test-io.js";

/**
 * What the fuzz suites of the newer commands (commands.fuzz.test.ts, run.fuzz.test.ts) use: the
 * scale, a run of the CLI in this process, the properties every run must have, arbitraries that
 * damage a JSON document the way a typo, a bad generator or an attacker would, and the inputs
 * they start from. cli.fuzz.test.ts shares the
 * scale and the properties; it keeps its own value arbitraries so that its fixed-seed cases stay
 * as they were.
 */

const SCALE = Math.max(1, Number(process.env.KVSIM_FUZZ_SCALE ?? "1") || 1);
export const runs = (n: number): number => n * SCALE;
export const TIMEOUT = 60_000 * SCALE;

/** Runs the CLI in this process (optionally with standard input) and captures what it prints. */
export async function kvsim(argv: readonly string[], stdin?: NodeJS.ReadableStream): Promise<Run> {
  const io: StdinIo & { stdout: string; stderr: string } = Object.assign(captureIo(), stdin === undefined ? {} : { stdin });
  const code = await runCli(argv, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

export interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** No crash: a known exit code and no stack trace; a refusal (2) says where (a line starting with one of `located`), and prints nothing on stdout. */
export function wellBehaved(r: Run, located: readonly string[]): void {
  expect(r.stderr).not.toMatch(/internal error|\n\s+at |Maximum call stack|RangeError|TypeError|ReferenceError/);
  expect([0, 1, 2]).toContain(r.code);
  if (r.code !== 2) return;
  expect(r.stdout).toBe("");
  // Warnings (a deprecated key or flag) may come first; the error follows.
  const stderr = r.stderr
    .split("\n")
    .filter((l) => !l.startsWith("warning: "))
    .join("\n");
  if (stderr.startsWith("error: invalid input\n")) {
    // Each problem line starts with the file (or flag, or <stdin>) it is in.
    const lines = stderr.slice("error: invalid input\n".length).trimEnd().split("\n");
    for (const line of lines)
      expect(
        located.some((l) => line.startsWith(l)),
        `unlocated: ${line}`,
      ).toBe(true);
  } else {
    // A usage error names the flag or command at fault.
    expect(stderr).toMatch(/^error: /);
    expect(stderr).toMatch(/--|kvsim|argument|command|option|\.json|\.yaml|\.jsonl/);
  }
}

const NASTY_NUMBERS = [0, -1, -0.5, 0.5, 1.5, 5e-324, 1e-300, 1e308, -1e308, 2 ** 24 + 1, 2 ** 31, 2 ** 53, 2 ** 53 + 2, 2 ** 64, 1e15, 1e300];

/** JSON/YAML values of every kind, small and absurd; numbers include the limits' edges. */
export const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    ...NASTY_NUMBERS,
    null,
    true,
    false,
    "",
    "x",
    "50 GB/s",
    "1e400",
    [],
    {},
    [[[[[]]]]],
    { __proto__: null },
    "constructor",
    "__proto__",
  ),
  fc.integer({ min: -5, max: 70_000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 12 }),
  fc.array(fc.integer(), { maxLength: 3 }),
);

export type Json = Record<string, unknown>;

/** The paths of an object's keys, nested ones included (so a whole section may go). */
function paths(v: unknown, at: string[] = [], out: string[][] = []): string[][] {
  if (v !== null && typeof v === "object" && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) {
      out.push([...at, k]);
      paths(x, [...at, k], out);
    }
  }
  return out;
}

const DELETE = Symbol("delete");

/** A copy of `root` with `value` at `path` (DELETE removes the key); a path through a non-object is left as it was. */
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

/** Up to three mutations of `base`: a field set to a nasty value (`sized` picks the value for some keys), deleted, or a new key added. */
export function mutated(base: Json, sized: (key: string) => fc.Arbitrary<unknown> | undefined = () => undefined): fc.Arbitrary<Json> {
  const all = paths(base);
  const one = fc
    .tuple(fc.constantFrom(...all), fc.nat(3), nastyValue, fc.constantFrom("colour", "__proto__", "constructor", "toString"))
    .chain(([path, how, nasty, extra]) => (sized(path.at(-1)!) ?? fc.constant(nasty)).map((value) => ({ path, how, value, extra })))
    .map(
      ({ path, how, value, extra }) =>
        (o: Json) =>
          how === 0 ? setPath(o, path, DELETE) : how === 1 ? setPath(o, [...path.slice(0, -1), extra], 1) : setPath(o, path, value),
    );
  return fc.array(one, { minLength: 1, maxLength: 3 }).map((fs) => fs.reduce((o, f) => f(o), base));
}

/** A document as text: JSON, YAML, or text-level damage (truncation, a stray character, a duplicate key). */
export function asText(doc: Json, yaml = true): fc.Arbitrary<string> {
  const json = JSON.stringify(doc, null, 1);
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant(json) },
    { weight: 3, arbitrary: fc.constant(yaml ? toYaml(doc) : json) },
    { weight: 1, arbitrary: fc.nat(json.length).map((n) => json.slice(0, n)) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.nat(json.length), fc.constantFrom("[", "{", "&a", "*a", '"', "\r", "\u0000", "\uFEFF", ",", "9".repeat(400), "1e400"))
        .map(([n, c]) => json.slice(0, n) + c + json.slice(n)),
    },
    { weight: 1, arbitrary: fc.constant(json.replace(/^\{\n/, () => `{\n "${Object.keys(doc)[0] ?? "a"}": 1,\n`)) },
  );
}

/** The command suites' profile (./linear.json): TP 1, 1,000 bytes of KV per token. */
export const LINEAR: Json = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 };
/** The command suites' trace (./trace.jsonl), 24 requests: bursts of 6, 10 ms apart, every 400 ms. */
export const TRACE = Array.from({ length: 24 }, (_, i) => ({
  request_id: `q${i}`,
  arrival_ms: Math.floor(i / 6) * 400 + (i % 6) * 10,
  input_tokens: 16 + ((i * 37) % 90),
  output_tokens: 3 + ((i * 5) % 9),
}));
/** The command suites' spec over ./linear.json and ./trace.jsonl. */
export const SPEC: Json = {
  version: 1,
  profile: "./linear.json",
  topology: { kind: "aggregated", workers: 1 },
  engine: { num_gpu_blocks: 256, block_size: 4, max_num_seqs: 8, max_num_batched_tokens: 256 },
  timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
  workload: { trace: "./trace.jsonl", format: "kvsim" },
};
