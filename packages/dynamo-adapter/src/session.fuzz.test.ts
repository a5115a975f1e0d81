import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseJsonExact, type JsonValue } from "./json-u64.js";
import { createEngineSession } from "./session.js";
import { GLM, linearProfile } from "./test-profiles.js";

/**
 * The fuzz suite of the stdio engine (issue 11, "the stdio engine must survive every line"):
 * sequences of engine lines, well-formed commands with mutated fields and raw damage mixed,
 * against aggregated, prefill and decode ranks. Properties: every line gets exactly one JSON
 * answer and `handleLine` never throws; a refusal is a named protocol error, never
 * `internal_error`, so the session is never poisoned (the next metrics call is served); a clock
 * that is served advances (a pass never ends before it starts). Fixed seed; CI runs SIZE
 * sequences, `pnpm fuzz` 20x as many (KVSIM_FUZZ_SCALE; KVSIM_FUZZ_SEED picks another seed).
 */

const SCALE = Math.max(1, Number(process.env.KVSIM_FUZZ_SCALE ?? "1") || 1);
const SEED = Number(process.env.KVSIM_FUZZ_SEED ?? "20261130") || 20261130;
/** Sequences per run in CI, each of 1 to 12 lines. */
export const SIZE = 300;

const ENGINE = { num_gpu_blocks: 64, block_size: 4, timing_model: { type: "fixed", prefill_ms: 10, decode_ms: 2 }, kv_transfer_bandwidth: 1 };

/** Numbers a field may be given: edges of every limit, beyond 2^53 and 2^64, tiny and huge doubles. */
const number = fc.oneof(
  fc.constantFrom(
    "0",
    "-1",
    "1",
    "3",
    "12",
    "1.5",
    "5e-324",
    "1e300",
    "1e308",
    "9007199254740992",
    "9007199254740993",
    "18446744073709551616",
    "16777217",
    "10000000000000",
    "1e999",
    "-0",
  ),
  fc.nat(100).map(String),
);
const value = fc.oneof(
  number,
  fc.constantFrom('"x"', "null", "true", "[]", "{}", '"destination_missing"', '"full_prompt"', "[1,2,3]", `[${"1,".repeat(40)}1]`),
);
const tokens = fc.oneof(
  fc.constantFrom("[1,2,3,4]", "[1,2,3,4,5,6,7,8]", "[]", "[-1]", "[1.5]", "[4294967296]", "[18446744073709551616]", '["a"]'),
  fc.array(fc.nat(50_000), { maxLength: 20 }).map((a) => JSON.stringify(a)),
);
const requestId = fc.constantFrom('"r1"', '"r2"', '"r3"', "1", '""', "null", '"__proto__"');
const handoffId = fc.constantFrom('"h1"', '"h2"', '"constructor"', "7");
const request = fc.tuple(requestId, tokens, value).map(([id, t, m]) => `{"request_id":${id},"tokens":${t},"max_output_tokens":${m}}`);
const timing = fc
  .tuple(fc.constantFrom('"destination_missing"', '"full_prompt"', '"x"'), number, number, number, number)
  .map(
    ([mode, full, perToken, perRequest, bw]) =>
      `{"mode":${mode},"full_prompt_tokens":${full},"kv_bytes_per_token":${perToken},"kv_bytes_per_request":${perRequest},"bandwidth_gb_s":${bw}}`,
  );

/** A command line: a template of every op with fields drawn above, or raw damage. */
const line = fc.oneof(
  { weight: 2, arbitrary: fc.tuple(fc.nat(9), request).map(([id, r]) => `{"id":${id},"op":"submit","request":${r}}`) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(9), number).map(([id, t]) => `{"id":${id},"op":"step","now_ms":${t}}`) },
  { weight: 1, arbitrary: fc.tuple(handoffId, request).map(([h, r]) => `{"id":"p","op":"submit_handoff_prefill","handoff_id":${h},"request":${r}}`) },
  { weight: 1, arbitrary: fc.tuple(handoffId, request).map(([h, r]) => `{"id":"d","op":"reserve_destination","handoff_id":${h},"request":${r}}`) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom("activate_destination", "cancel_destination", "release_source", "cancel_source"), handoffId)
      .map(([op, h]) => `{"id":"o","op":"${op}","handoff_id":${h}}`),
  },
  { weight: 1, arbitrary: requestId.map((r) => `{"id":"c","op":"cancel_request","request_id":${r}}`) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(timing, value)
      .map(([t, n]) => `{"id":"t","op":"handoff_delay","transfer_timing":${t},"destination_reserved":{"transferable_prompt_tokens":${n}}}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom('{"id":"i","op":"info"}', '{"id":"m","op":"metrics"}', '{"id":1,"op":"fly"}', '{"op":"step"}', '{"id":{},"op":"info"}'),
  },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.constantFrom(
        "",
        "null",
        "[]",
        "{",
        '{"id":1,"op":"info","op":"metrics"}',
        '{"id":1,"op":"step","now_ms":1,"__proto__":{}}',
        `{"id":1,"op":"info","x":${"[".repeat(400)}}`,
        '{"id":1,\r"op":"info"}',
        "\uFEFF{}",
      ),
    ),
  },
);

function answer(handle: (l: string) => string, l: string): Record<string, JsonValue> {
  const text = handle(l);
  expect(text).not.toContain("\n");
  const r = parseJsonExact(text) as Record<string, JsonValue>;
  expect(typeof r.ok).toBe("boolean");
  return r;
}

describe("fuzz: stdio engine lines", () => {
  it(
    "every line is answered once; refusals are named and never poison the session",
    () => {
      fc.assert(
        fc.property(
          fc.constantFrom("aggregated", "prefill", "decode"),
          fc.boolean(),
          fc.array(line, { minLength: 1, maxLength: 12 }),
          (role, grouped, lines) => {
            const session = createEngineSession({
              profile: grouped ? GLM : linearProfile(1000),
              role,
              engineArgs: grouped ? { ...ENGINE, block_size: undefined } : ENGINE,
            });
            const handle = (l: string) => session.handleLine(l);
            let clock = -Infinity;
            for (const l of lines) {
              const r = answer(handle, l);
              if (r.ok === false) {
                const code = (r.error as Record<string, JsonValue>).code;
                expect(["parse_error", "invalid_request", "command_refused", "invalid_time"], `${l} -> ${JSON.stringify(r)}`).toContain(code);
              }
              const pass = r.pass as Record<string, JsonValue> | undefined | null;
              if (pass !== undefined && pass !== null) {
                // Time advances: a served pass ends no earlier than it starts, and no earlier than the last.
                expect(Number(pass.end_ms)).toBeGreaterThanOrEqual(Number(pass.start_ms));
                expect(Number(pass.start_ms)).toBeGreaterThanOrEqual(clock);
                clock = Number(pass.end_ms);
              }
              // Never poisoned: the session still serves.
              expect(answer(handle, '{"id":"alive","op":"metrics"}').ok).toBe(true);
            }
          },
        ),
        { seed: SEED, numRuns: SIZE * SCALE },
      );
    },
    60_000 * SCALE,
  );
});
