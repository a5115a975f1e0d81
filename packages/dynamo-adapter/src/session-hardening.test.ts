import { describe, expect, it } from "vitest";
import { describeJson, parseJsonExact, type JsonValue } from "./json-u64.js";
import { createEngineSession, type EngineSession } from "./session.js";
import { GLM, linearProfile, refusal } from "./test-profiles.js";

/**
 * Issue 11, "the stdio engine must survive every line": each reproducer is answered with a located
 * refusal, and a refused line leaves the session exactly as it was (no poisoning, no half change).
 */

const ENGINE = { num_gpu_blocks: 64, timing_model: { type: "fixed", prefill_ms: 10, decode_ms: 2 }, kv_transfer_bandwidth: 1 };

function answer(s: EngineSession, line: string): Record<string, JsonValue> {
  return parseJsonExact(s.handleLine(line)) as Record<string, JsonValue>;
}
const errorOf = (r: Record<string, JsonValue>) => r.error as Record<string, JsonValue>;

/** A GLM timing as a prefill rank reports it for a 2,176-token prompt: 1 block x 2,176 tokens, 5,995 B per token. */
const timing = (patch: Record<string, string> = {}) => {
  const fields: Record<string, string> = {
    mode: '"destination_missing"',
    full_prompt_tokens: "2176",
    kv_bytes_per_token: "5995",
    kv_bytes_per_request: "36927488",
    bandwidth_gb_s: "1",
    ...patch,
  };
  return `{${Object.entries(fields)
    .map(([k, v]) => `"${k}":${v}`)
    .join(",")}}`;
};

/** The reproducers of the issue, with the refusal each must get. */
const BAD_LINES: readonly (readonly [string, string, string])[] = [
  [
    `{"id":1,"op":"handoff_delay","transfer_timing":${timing({ bandwidth_gb_s: "5e-324" })}}`,
    "invalid_request",
    "transfer_timing.bandwidth_gb_s: bandwidth must be at least 0.001 and at most 100000 GB/s (1 MB/s to 100 TB/s), got 5e-324",
  ],
  [
    `{"id":2,"op":"handoff_delay","transfer_timing":${timing({ full_prompt_tokens: "18446744073709551616" })}}`,
    "invalid_request",
    "transfer_timing.full_prompt_tokens must be an integer >= 0, got 18446744073709551616",
  ],
  [
    `{"id":3,"op":"handoff_delay","transfer_timing":${timing({ kv_bytes_per_token: "9007199254740992" })}}`,
    "invalid_request",
    "transfer_timing.kv_bytes_per_token must be an integer > 0 or null, got 9007199254740992",
  ],
  [
    `{"id":4,"op":"handoff_delay","transfer_timing":${timing({ kv_bytes_per_request: "18446744073709551615" })}}`,
    "invalid_request",
    "transfer_timing.kv_bytes_per_request must be an integer >= 0, got 18446744073709551615",
  ],
  // 10^12 transferable tokens on a 2,176-token prompt (one block): at most 2,176.
  [
    `{"id":5,"op":"handoff_delay","transfer_timing":${timing()},"destination_reserved":{"transferable_prompt_tokens":1000000000000}}`,
    "invalid_request",
    "destination_reserved.transferable_prompt_tokens must be at most 2176 (transfer_timing.full_prompt_tokens in whole 2176-token blocks): a destination cannot lack more than the whole prompt, got 1000000000000",
  ],
  ['{"id":6,"op":"step","now_ms":1e300}', "invalid_request", "now_ms must be a number from 0 to 10^13 ms (about 317 years), got 1e+300"],
  [
    '{"id":7,"op":"submit","request":{"request_id":"x","tokens":[18446744073709551616],"max_output_tokens":1}}',
    "invalid_request",
    "request.tokens[0] must be a u32 token id, got 18446744073709551616",
  ],
  [
    '{"id":8,"op":"submit","request":{"request_id":"x","tokens":[1],"max_output_tokens":9007199254740991}}',
    "invalid_request",
    "request.max_output_tokens must be an integer from 0 to 16777216 (2^24), got 9007199254740991",
  ],
  [
    '{"id":9,"op":"submit","request":[18446744073709551616, {"a": 1e999}]}',
    "invalid_request",
    'request must be an object, got [18446744073709551616,{"a":Infinity}]',
  ],
  ['{"id":10,"op":"step","now_ms":0,"__proto__":{"x":1}}', "invalid_request", "__proto__: unknown key for op step"],
  // `{"id":11,"op":"info","x":` is 25 characters and the object is level 0: level 257 opens at offset 25 + 256 = 281.
  [`{"id":11,"op":"info","x":${"[".repeat(300)}${"]".repeat(300)}}`, "parse_error", "not JSON: nesting deeper than 256 at character 282"],
];

describe("stdio engine session: issue 11 reproducers", () => {
  it.each(BAD_LINES.map(([line, code, message]) => ({ line: line.length > 80 ? `${line.slice(0, 77)}...` : line, full: line, code, message })))(
    "$line is refused with $code",
    ({ full, code, message }) => {
      const s = createEngineSession({ profile: GLM, role: "prefill", engineArgs: ENGINE });
      expect(errorOf(answer(s, full))).toEqual({ code, message });
      // Not poisoned: the next command is served.
      expect(answer(s, '{"id":99,"op":"metrics"}').ok).toBe(true);
    },
  );

  it("a refused line leaves the session exactly as it was: the same good lines get the same answers", () => {
    const GOOD = [
      '{"id":"a","op":"submit_handoff_prefill","handoff_id":"h1","request":{"request_id":"r1","tokens":[1,2,3,4,5,6,7,8],"max_output_tokens":1}}',
      '{"id":"b","op":"step","now_ms":0}',
      `{"id":"c","op":"handoff_delay","transfer_timing":${timing()}}`,
      '{"id":"d","op":"release_source","handoff_id":"h1"}',
      '{"id":"e","op":"step","now_ms":20}',
      '{"id":"f","op":"metrics"}',
    ];
    const clean = createEngineSession({ profile: GLM, role: "prefill", engineArgs: ENGINE });
    const bothered = createEngineSession({ profile: GLM, role: "prefill", engineArgs: ENGINE });
    for (const line of GOOD) {
      for (const [bad] of BAD_LINES) expect(answer(bothered, bad).ok).toBe(false);
      expect(bothered.handleLine(line)).toBe(clean.handleLine(line));
    }
  });

  it("a step at a huge but allowed time still advances the clock by the whole pass", () => {
    const s = createEngineSession({ profile: linearProfile(1000), role: "aggregated", engineArgs: ENGINE });
    answer(s, '{"id":1,"op":"submit","request":{"request_id":"r","tokens":[1,2,3],"max_output_tokens":2}}');
    // At 10^13 ms a double resolves 2^-9 ms (about 2 us): a 10 + 2 ms pass ends exactly 12 ms later.
    const r = answer(s, '{"id":2,"op":"step","now_ms":10000000000000}');
    expect(r.pass).toMatchObject({ start_ms: 1e13, end_ms: 1e13 + 12, duration_ms: 12, prefill_ms: 10, decode_ms: 2 });
  });
});

describe("engine args: keys that name Object.prototype members", () => {
  it("refuses __proto__ and constructor as unknown keys and values instead of crashing", () => {
    const args = JSON.parse('{"__proto__": {}, "constructor": 1}') as unknown;
    expect(refusal(() => createEngineSession({ profile: GLM, role: "prefill", engineArgs: args }))).toEqual([
      "__proto__: unknown key",
      "constructor: unknown key",
    ]);
    expect(refusal(() => createEngineSession({ profile: GLM, role: "prefill", engineArgs: { worker_type: "constructor" } }))).toEqual([
      'worker_type: must be aggregated, prefill or decode, got "constructor"',
    ]);
    expect(refusal(() => createEngineSession({ profile: GLM, role: "prefill", engineArgs: { kv_transfer_bandwidth: 5e-324 } }))).toEqual([
      "kv_transfer_bandwidth: bandwidth must be at least 0.001 and at most 100000 GB/s (1 MB/s to 100 TB/s), got 5e-324 (0 or null: no transfer delay)",
    ]);
  });
});

describe("a timing refusal is named, not an internal error", () => {
  it("answers timing_refused for a pass outside the measured grid (outside_grid: refuse)", () => {
    const profile = {
      ...linearProfile(1000),
      forward_pass: {
        provenance: "test",
        prefill: [{ batch_size: 1, new_tokens: 1, cached_tokens: 0, latency_ms: 1 }],
        decode: [{ batch_size: 1, kv_tokens: 1, latency_ms: 1 }],
      },
    };
    const s = createEngineSession({ profile, role: "aggregated", engineArgs: { timing_model: { type: "profile", outside_grid: "refuse" } } });
    answer(s, '{"id":1,"op":"submit","request":{"request_id":"r","tokens":[1,2,3],"max_output_tokens":1}}');
    const r = answer(s, '{"id":2,"op":"step","now_ms":0}');
    expect(r.ok, JSON.stringify(r)).toBe(false);
    expect(errorOf(r).code).toBe("timing_refused");
    // The query (batch 1, 3 new tokens, 0 cached) lies outside the one-point grid (new_tokens 1..1).
    expect(errorOf(r).message as string).toMatch(
      /^forward_pass.prefill: the query \(batch_size 1, new_tokens 3, cached_tokens 0\) is outside the measured grid/,
    );
    expect(errorOf(answer(s, '{"id":3,"op":"step","now_ms":100}')).code).toBe("session_poisoned");
  });
});

describe("describeJson, the renderer of offending values", () => {
  it("names bigints and non-finite numbers as they are and cuts long values at 80 characters", () => {
    expect(describeJson(2n ** 64n)).toBe("18446744073709551616");
    expect(describeJson({ a: [Infinity, null, "x"] })).toBe('{"a":[Infinity,null,"x"]}');
    // 1,000 ones render as "[1,1,...": cut to 77 characters ("[" and 38 times "1,") and "...".
    const long = describeJson(Array.from({ length: 1000 }, () => 1));
    expect(long).toBe(`[${"1,".repeat(38)}...`);
    expect(long).toHaveLength(80);
    expect(describeJson(undefined)).toBe("nothing");
  });
});
