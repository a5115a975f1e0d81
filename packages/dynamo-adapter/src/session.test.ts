import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { describe, expect, it } from "vitest";
import { parseJsonExact, stringifyJsonExact, type JsonValue } from "./json-u64.js";
import { createEngineSession, type EngineSession } from "./session.js";
import { GLM, INEXACT, linearProfile, refusal } from "./test-profiles.js";

/** Sends one line (a string as is, anything else as exact JSON) and parses the response line. */
function send(s: EngineSession, request: unknown): Record<string, JsonValue> {
  const line = typeof request === "string" ? request : stringifyJsonExact(request);
  const response = s.handleLine(line);
  expect(response).not.toContain("\n");
  return parseJsonExact(response) as Record<string, JsonValue>;
}

const effects = (r: Record<string, JsonValue>) => r.effects as Record<string, JsonValue>;

/**
 * The conformance fixture of docs/rules/dynamo.md §8.3: block 4, 64 blocks, 64 batched tokens, 2 seqs,
 * 1 GB/s, 10^6 B/token (a linear profile), with fixed timing 10 ms prefill / 2 ms decode so every
 * time can be derived by hand.
 */
const ENGINE = {
  block_size: 4,
  num_gpu_blocks: 64,
  max_num_batched_tokens: 64,
  max_num_seqs: 2,
  kv_transfer_bandwidth: 1,
  kv_transfer_timing_mode: "destination_missing",
  timing_model: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
};
const PROFILE = linearProfile(1_000_000);
// The 8.6 hash vectors: [11..88] by 4, and [1..10] by 4 (2 full blocks, the tail of 2 unhashed).
const PROMPT_1 = [11, 22, 33, 44, 55, 66, 77, 88];
const PROMPT_2 = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
const STORED_1 = {
  parent_hash: null,
  start_position: null,
  blocks: [
    { block_hash: 4117275816416024698n, tokens_hash: 4117275816416024698n },
    { block_hash: 5947898228081096063n, tokens_hash: 6081346995852963768n },
  ],
};
const STORED_2 = {
  parent_hash: null,
  start_position: null,
  blocks: [
    { block_hash: 14643705804678351452n, tokens_hash: 14643705804678351452n },
    { block_hash: 4945711292740353085n, tokens_hash: 16777012769546811212n },
  ],
};

/**
 * The ids kvsim samples for request "r1" (the rule in vllm-scheduler's token-ids.ts, worked
 * through by hand with 32-bit wrap-around):
 * FNV-1a("r1"): 0x811c9dc5 ^ 0x72 = 0x811c9db7, x 0x01000193 = 0xf70c4715; ^ 0x31 = 0xf70c4724,
 * x 0x01000193 = 0x0c53fdac.
 * Index 0: x = 0x0c53fdac ^ (1 x 0x9e3779b1) = 0x9264841d; fmix32: ^ x >>> 16 = 0x92641679,
 * x 0x85ebca6b = 0xa7a3de93, ^ x >>> 13 = 0xa7a6e38d, x 0xc2b2ae35 = 0x3640f231, ^ x >>> 16 =
 * 0x3640c471 = 910,214,257.
 * Index 1: (2 x 0x9e3779b1) mod 2^32 = 0x3c6ef362; x = 0x303d0ece; 0x303d3ef3, 0x85560d91,
 * 0x85522721, 0xa78c87d5, 0xa78c2059 = 2,810,978,393.
 */
const R1_TOKEN_0 = 910_214_257;
const R1_TOKEN_1 = 2_810_978_393;

// Each test below builds its sessions from scratch, replaying the earlier steps without checking
// them (the test of each step checks it), so a test passes or fails on its own.
const request1 = { request_id: "r1", tokens: PROMPT_1, max_output_tokens: 2 };
const request2 = { request_id: "r2", tokens: PROMPT_2, max_output_tokens: 2 };
// What the source reports for r1 and the destination for h1 (steps 2 and 3 check them).
const TIMING_1 = { mode: "destination_missing", full_prompt_tokens: 8, kv_bytes_per_token: 1_000_000, kv_bytes_per_request: 0, bandwidth_gb_s: 1 };
const RESERVED_1 = { handoff_id: "h1", request_id: "r1", transferable_prompt_tokens: 8, kv_bytes_per_request: 0, hit_tokens: 0 };

function sessions() {
  return {
    prefill: createEngineSession({ profile: PROFILE, role: "prefill", engineArgs: ENGINE }),
    decode: createEngineSession({ profile: PROFILE, role: "decode", engineArgs: ENGINE }),
  };
}
/** Step 1: h1 submitted on the source. */
function submitted() {
  const s = sessions();
  const submit = send(s.prefill, { id: 1, op: "submit_handoff_prefill", handoff_id: "h1", request: request1 });
  return { ...s, submit };
}
/** Steps 1-2: r1 prefilled 0 -> 10 ms, the source held. */
function held() {
  const s = submitted();
  return { ...s, pass: send(s.prefill, { id: 2, op: "step", now_ms: 0 }) };
}
/** Steps 1-3: the destination reserved. */
function reserved() {
  const s = held();
  return { ...s, reserve: send(s.decode, { id: 3, op: "reserve_destination", handoff_id: "h1", request: request1 }) };
}
/** Steps 1-5: the destination activated. */
function activated() {
  const s = reserved();
  return { ...s, activate: send(s.decode, { id: 5, op: "activate_destination", handoff_id: "h1" }) };
}
/** Steps 1-6: the source released. */
function released() {
  const s = activated();
  return { ...s, release: send(s.prefill, { id: 6, op: "release_source", handoff_id: "h1" }) };
}
/** Steps 1-7: r1 decoded to completion on the destination (passes 18 -> 20 -> 22 ms). */
function decoded() {
  const s = released();
  send(s.decode, { id: 7, op: "step", now_ms: 18 });
  send(s.decode, { id: 8, op: "step", now_ms: 20 });
  return s;
}

describe("a prefill rank and a decode rank through one full handoff and a cancelled one", () => {
  it("1. the source takes the handoff prefill", () => {
    const r = submitted().submit;
    expect(r).toMatchObject({ id: 1, ok: true, result: "submitted" });
    expect(effects(r).kv_events).toEqual([]);
    expect(effects(r).metrics).toMatchObject({ num_waiting: 1, has_work: true });
  });

  it("2. one prefill pass 0 -> 10 ms: one token, SourceHeld in the current shape, the router store", () => {
    const r = held().pass;
    // 8 prompt tokens fit the 64-token budget: one pass, 10 ms prefill, no decode time on a prefill rank.
    expect(r.pass).toEqual({ start_ms: 0, end_ms: 10, duration_ms: 10, prefill_ms: 10, decode_ms: 0, scheduled_tokens: 8 });
    const fx = effects(r);
    expect(fx.admissions).toEqual([{ request_id: "r1", reused_input_tokens: 0, resumed: false }]);
    // A prefill rank samples exactly one token, then holds its KV.
    expect(fx.outputs).toEqual([{ request_id: "r1", token_id: R1_TOKEN_0, index: 0, completed: true, rejected: false, at_ms: 10 }]);
    // Linear: backoff 0, full_prompt_tokens = N = 8; no fixed bytes; 2 blocks of 4 held.
    expect(fx.lifecycle_events).toEqual([{ source_held: { handoff_id: "h1", request_id: "r1", transfer_timing: TIMING_1, held_blocks: 2 } }]);
    expect(fx.kv_events).toEqual([{ event_id: 0, dp_rank: 0, data: { stored: STORED_1 } }]);
    expect(fx.metrics).toMatchObject({ active_blocks: 2, has_work: false, drained: false });
  });

  it("3. the destination reserves: 2 fresh blocks x 4 = 8 transferable tokens, no fixed bytes", () => {
    const r = reserved().reserve;
    expect(r).toMatchObject({ ok: true, result: "accepted" });
    const fx = effects(r);
    expect(fx.lifecycle_events).toEqual([{ destination_reserved: RESERVED_1 }]);
    // No destination store before activation.
    expect(fx.kv_events).toEqual([]);
  });

  it("4. the coordinator's delay from the two facts: 8 tokens x 10^6 B at 1 GB/s = 8 ms", () => {
    const { decode } = reserved();
    const r = send(decode, { id: 4, op: "handoff_delay", transfer_timing: TIMING_1, destination_reserved: RESERVED_1 });
    expect(r).toMatchObject({ id: 4, ok: true, delay_ms: 8 });
  });

  it("5. activation at 10 + 8 = 18 ms makes the destination's blocks router-visible (same hashes)", () => {
    const r = activated().activate;
    expect(r).toMatchObject({ ok: true, result: "applied" });
    expect(effects(r).kv_events).toEqual([{ event_id: 0, dp_rank: 0, data: { stored: STORED_1 } }]);
  });

  it("6. the source is released; its cached blocks stay (no removal event)", () => {
    const r = released().release;
    expect(r).toMatchObject({ ok: true, result: "applied" });
    expect(effects(r).kv_events).toEqual([]);
    expect(effects(r).metrics).toMatchObject({ active_blocks: 0, drained: true });
  });

  it("7. the decode rank computes the last prompt token and samples at 18 + 2 = 20, then 22", () => {
    const { decode } = released();
    // Attention-only: the destination recomputes the last of the 8 tokens (a 1-token decode row, 2 ms).
    const a = send(decode, { id: 7, op: "step", now_ms: 18 });
    expect(a.pass).toEqual({ start_ms: 18, end_ms: 20, duration_ms: 2, prefill_ms: 0, decode_ms: 2, scheduled_tokens: 1 });
    expect(effects(a).outputs).toEqual([{ request_id: "r1", token_id: R1_TOKEN_0, index: 0, completed: false, rejected: false, at_ms: 20 }]);
    const b = send(decode, { id: 8, op: "step", now_ms: 20 });
    expect(b.pass).toMatchObject({ start_ms: 20, end_ms: 22 });
    expect(effects(b).outputs).toEqual([{ request_id: "r1", token_id: R1_TOKEN_1, index: 1, completed: true, rejected: false, at_ms: 22 }]);
    expect(send(decode, { id: 9, op: "step", now_ms: 22 })).toMatchObject({ result: "idle", pass: null });
  });

  it("8. a second handoff is held, reserved (3 blocks -> 12 tokens, 12 ms), then cancelled on both sides", () => {
    const { prefill, decode } = decoded();
    send(prefill, { id: 10, op: "submit_handoff_prefill", handoff_id: "h2", request: request2 });
    const step = send(prefill, { id: 11, op: "step", now_ms: 22 });
    expect(step.pass).toMatchObject({ start_ms: 22, end_ms: 32 });
    const fx = effects(step);
    // cdiv(10, 4) = 3 blocks held; 2 full blocks stored (the tail of 2 is never published). The
    // source's second store: event id 1.
    const timing2 = { mode: "destination_missing", full_prompt_tokens: 10, kv_bytes_per_token: 1_000_000, kv_bytes_per_request: 0, bandwidth_gb_s: 1 };
    expect(fx.lifecycle_events).toEqual([{ source_held: { handoff_id: "h2", request_id: "r2", transfer_timing: timing2, held_blocks: 3 } }]);
    expect(fx.kv_events).toEqual([{ event_id: 1, dp_rank: 0, data: { stored: STORED_2 } }]);

    const reserve = send(decode, { id: 12, op: "reserve_destination", handoff_id: "h2", request: request2 });
    const reserved2 = { handoff_id: "h2", request_id: "r2", transferable_prompt_tokens: 12, kv_bytes_per_request: 0, hit_tokens: 0 };
    expect(effects(reserve).lifecycle_events).toEqual([{ destination_reserved: reserved2 }]);
    // Block-rounded: 12 tokens x 10^6 B = 12 x 10^6 B at 10^9 B/s = 12 ms.
    expect(send(prefill, { id: 13, op: "handoff_delay", transfer_timing: timing2, destination_reserved: reserved2 })).toMatchObject({ delay_ms: 12 });

    // The transfer times out: the coordinator cancels the destination, then the source.
    expect(send(decode, { id: 14, op: "cancel_destination", handoff_id: "h2" })).toMatchObject({ ok: true, result: "applied" });
    expect(send(prefill, { id: 15, op: "cancel_source", handoff_id: "h2" })).toMatchObject({ ok: true, result: "applied" });
    // Repeated cleanup is a no-op; activating a cancelled destination is refused with the reason.
    expect(send(prefill, { id: 16, op: "cancel_source", handoff_id: "h2" })).toMatchObject({ ok: true, result: "noop" });
    expect(send(decode, { id: 17, op: "activate_destination", handoff_id: "h2" })).toEqual({
      id: 17,
      ok: false,
      error: { code: "command_refused", message: 'destination handoff "h2" was cancelled' },
    });
    expect(send(decode, { id: 18, op: "metrics" }).metrics).toMatchObject({ drained: true, active_blocks: 0 });
    expect(send(prefill, { id: 19, op: "metrics" }).metrics).toMatchObject({ drained: true, active_blocks: 0 });
  });

  it("9. every malformed line gets an error response, and the sessions keep serving", () => {
    // The source's last pass (r1's prefill) ended at 10 ms; h1 is used on it.
    const { prefill, decode } = held();
    const errors: [EngineSession, string, JsonValue, string, string][] = [
      [prefill, "garbage", null, "parse_error", 'not JSON: unexpected character "g" at character 1'],
      [prefill, "", null, "parse_error", "not JSON: unexpected end of input at character 1"],
      [
        prefill,
        '{"id":30,"op":"teleport"}',
        30,
        "invalid_request",
        'unknown op "teleport"; ops: submit, submit_handoff_prefill, reserve_destination, activate_destination, cancel_destination, release_source, cancel_source, cancel_request, step, metrics, info, handoff_delay',
      ],
      [prefill, '{"id":31,"op":"step"}', 31, "invalid_request", "now_ms must be a number from 0 to 10^13 ms (about 317 years), got nothing"],
      [
        prefill,
        '{"id":32,"op":"submit","request":{"request_id":"x","tokens":"abc","max_output_tokens":1}}',
        32,
        "invalid_request",
        'request.tokens must be an array of u32 token ids, got "abc"',
      ],
      [prefill, '{"id":33,"op":"step","now_ms":5}', 33, "invalid_time", "now_ms 5 is before the end of the last pass (10 ms)"],
      [
        decode,
        '{"id":34,"op":"release_source","handoff_id":"h1"}',
        34,
        "command_refused",
        "release_source is a source command: it needs a prefill rank, this rank is decode",
      ],
      [
        prefill,
        '{"id":35,"op":"submit_handoff_prefill","handoff_id":"h1","request":{"request_id":"r9","tokens":[1],"max_output_tokens":1}}',
        35,
        "command_refused",
        'handoff "h1" was already used on this rank',
      ],
      [
        decode,
        '{"id":36,"op":"handoff_delay","transfer_timing":{"mode":"full_prompt","full_prompt_tokens":8,"kv_bytes_per_token":1,"bandwidth_gb_s":0}}',
        36,
        "invalid_request",
        "transfer_timing.bandwidth_gb_s: bandwidth must be greater than 0 GB/s (leave it unset for no modelled delay), got 0",
      ],
      // 10^12 tokens x 10^6 B = 10^18 B > 2^53 (about 9.007 x 10^15): refused, not a crash.
      // More tokens than the longest prompt (2^24 = 16,777,216; the linear engine block here is 4 tokens).
      [
        decode,
        '{"id":37,"op":"handoff_delay","transfer_timing":{"mode":"full_prompt","full_prompt_tokens":1000000000000,"kv_bytes_per_token":1000000,"bandwidth_gb_s":1}}',
        37,
        "invalid_request",
        "transfer_timing.full_prompt_tokens must be at most 16777216 (the longest prompt, 2^24 tokens, in whole 4-token blocks), got 1000000000000",
      ],
      // 10^6 tokens x 10^10 B = 10^16 B, beyond 2^53 (about 9.007 x 10^15).
      [
        decode,
        '{"id":37,"op":"handoff_delay","transfer_timing":{"mode":"full_prompt","full_prompt_tokens":1000000,"kv_bytes_per_token":10000000000,"bandwidth_gb_s":1}}',
        37,
        "invalid_request",
        "payload of 1000000 x 10000000000 + 0 bytes exceeds 2^53 bytes",
      ],
    ];
    for (const [session, line, id, code, message] of errors) {
      expect(send(session, line)).toEqual({ id, ok: false, error: { code, message } });
    }
    // Still serving: the decode rank answers, and a new request runs on the prefill rank from 10 ms.
    expect(send(decode, { id: 39, op: "metrics" })).toMatchObject({ id: 39, ok: true });
    expect(
      send(prefill, { id: 40, op: "submit_handoff_prefill", handoff_id: "h3", request: { request_id: "r3", tokens: [5, 6, 7], max_output_tokens: 1 } }),
    ).toMatchObject({ ok: true });
    expect(send(prefill, { id: 41, op: "step", now_ms: 10 }).pass).toMatchObject({ start_ms: 10, end_ms: 20 });
  });
});

describe("a grouped handoff: GLM-5.3-Flash, N = 1,000", () => {
  const engine = { kv_transfer_bandwidth: 1, kv_transfer_timing_mode: "destination_missing", timing_model: { type: "fixed", prefill_ms: 10, decode_ms: 2 } };
  const request = { request_id: "g1", tokens: Array.from({ length: 1000 }, (_, i) => i), max_output_tokens: 3 };
  // T = 999 tokens: cdiv(999, 2,176) = 1 block, reported as 2,176 tokens at 13,045,120 / 2,176 = 5,995 B per token.
  const timing = { mode: "destination_missing", full_prompt_tokens: 2176, kv_bytes_per_token: 5995, kv_bytes_per_request: 36_927_488, bandwidth_gb_s: 1 };
  const reserved = { handoff_id: "g", request_id: "g1", transferable_prompt_tokens: 2176, kv_bytes_per_request: 36_927_488, hit_tokens: 0 };
  /** The source prefilled (0 -> 10 ms) and held. */
  function glmHeld() {
    const prefill = createEngineSession({ profile: GLM, role: "prefill", engineArgs: engine });
    const decode = createEngineSession({ profile: GLM, role: "decode", engineArgs: engine });
    send(prefill, { id: 1, op: "submit_handoff_prefill", handoff_id: "g", request });
    return { prefill, decode, pass: send(prefill, { id: 2, op: "step", now_ms: 0 }) };
  }

  it("the source holds T = 999 tokens and reports 1 block as 2,176 tokens at 5,995 B plus 36,927,488 fixed bytes", () => {
    const fx = effects(glmHeld().pass);
    // Held: 1 full-attention block + 1 ring + 4 KDA running blocks = 6. No block of 2,176 is full: no store.
    expect(fx.lifecycle_events).toEqual([{ source_held: { handoff_id: "g", request_id: "g1", transfer_timing: timing, held_blocks: 6 } }]);
    expect(fx.kv_events).toEqual([]);
  });

  it("the destination lacks 1 full-attention block (2,176 tokens) and all the fixed bytes: 49.972608 ms", () => {
    const { decode } = glmHeld();
    const fx = effects(send(decode, { id: 3, op: "reserve_destination", handoff_id: "g", request }));
    expect(fx.lifecycle_events).toEqual([{ destination_reserved: reserved }]);
    // 2,176 x 5,995 = 13,045,120; + 36,927,488 = 49,972,608 B at 10^9 B/s.
    expect(send(decode, { id: 4, op: "handoff_delay", transfer_timing: timing, destination_reserved: reserved })).toMatchObject({ delay_ms: 49.972608 });
  });

  it("after activation the decode rank computes the last prompt token, then decodes 3 tokens", () => {
    const { prefill, decode } = glmHeld();
    send(decode, { id: 3, op: "reserve_destination", handoff_id: "g", request });
    send(decode, { id: 5, op: "activate_destination", handoff_id: "g" });
    send(prefill, { id: 6, op: "release_source", handoff_id: "g" });
    const outs: JsonValue[] = [];
    let now = 60;
    for (let i = 0; i < 3; i++) {
      const r = send(decode, { id: 7 + i, op: "step", now_ms: now });
      now = (r.pass as Record<string, number>).end_ms!;
      outs.push(...(effects(r).outputs as JsonValue[]));
    }
    // Three 2 ms decode passes from 60: tokens at 62, 64, 66; the last completes the request.
    expect(outs.map((o) => [(o as Record<string, JsonValue>).at_ms, (o as Record<string, JsonValue>).completed])).toEqual([
      [62, false],
      [64, false],
      [66, true],
    ]);
  });
});

describe("createEngineSession refusals", () => {
  const fail = refusal;
  it("a worker_type that contradicts the role", () => {
    expect(fail(() => createEngineSession({ profile: PROFILE, role: "prefill", engineArgs: { worker_type: "decode" } }))).toEqual([
      "worker_type: says decode but the session serves the prefill role",
    ]);
  });
  it("invalid engine args, by field", () => {
    expect(fail(() => createEngineSession({ profile: PROFILE, role: "aggregated", engineArgs: { speedup_ratio: 2 } }))[0]).toMatch(/^speedup_ratio: must be 1/);
  });
  it("a prefill rank whose grouped terms have no exact token form", () => {
    expect(
      fail(() => createEngineSession({ profile: INEXACT, role: "prefill", engineArgs: { timing_model: { type: "fixed", prefill_ms: 1, decode_ms: 1 } } })),
    ).toEqual([
      // Placed on the first full-attention group's bytes per block, the field to change.
      "kv_cache_groups[0].transfer_bytes_per_block: has no exact Dynamo transfer timing: a grouped source counts full-attention blocks of 16 tokens at 1000 B per block, which is not a whole number of bytes per token (1000 / 16 = 62.5); block units are never passed as tokens inexactly (a prefill session reports Dynamo's transfer timing)",
    ]);
  });
  it("the P/D gate of the rank, as located issues", () => {
    // The 0.31.0 layout (no checkpoint blocks) relabelled as 0.30.0: only the version is wrong.
    const old = { ...glmFlashProfile("0.31.0"), vllm_version: "0.30.0" };
    expect(fail(() => createEngineSession({ profile: old, role: "decode" }))).toEqual([
      "vllm_version: decode role: vllm_version must be 0.31.0 or 0.32.0 for a grouped P/D rank (got 0.30.0)",
    ]);
  });
});
