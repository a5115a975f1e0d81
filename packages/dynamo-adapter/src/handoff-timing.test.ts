import { bytes, tokens } from "@kvsim/profile-schema";
import { sourceTerms, transferDelayMs, withDestination, type TransferTerms } from "@kvsim/transfer-rules";
import { describe, expect, it } from "vitest";
import {
  dynamoDelayMs,
  fromDynamoTiming,
  handoffDelayMs,
  parseHandoffTiming,
  termsShape,
  toDestinationTransfer,
  toDynamoTiming,
  toLegacyTiming,
  transferTimingFor,
  type HandoffTransferTiming,
} from "./handoff-timing.js";
import { GLM, INEXACT, LLAMA_8B, linearProfile } from "./test-profiles.js";

const ok = <T>(c: { ok: true; value: T } | { ok: false; reason: string }): T => {
  if (!c.ok) throw new Error(`expected ok, got: ${c.reason}`);
  return c.value;
};

const timing = (t: Partial<HandoffTransferTiming>): HandoffTransferTiming => ({
  mode: "full_prompt",
  full_prompt_tokens: 0,
  kv_bytes_per_token: null,
  kv_bytes_per_request: 0,
  bandwidth_gb_s: null,
  ...t,
});

describe("docs/rules/dynamo.md §8.1: the four-field delay (decimal GB)", () => {
  it("FullPrompt 128 tokens x 1,000,000 B at 1 GB/s is 128 ms", () => {
    // 128 x 10^6 B / 10^9 B/s = 0.128 s = 128 ms.
    expect(dynamoDelayMs(timing({ full_prompt_tokens: 128, kv_bytes_per_token: 1_000_000, bandwidth_gb_s: 1 }))).toBe(128);
  });
  it("FullPrompt 8 tokens x 1,000,000 B at 1 GB/s is 8 ms", () => {
    expect(dynamoDelayMs(timing({ full_prompt_tokens: 8, kv_bytes_per_token: 1_000_000, bandwidth_gb_s: 1 }))).toBe(8);
  });
  it("DestinationMissing 20 of 100 tokens x 1,000 B at 1 GB/s is 0.02 ms; full prompt 0.1 ms", () => {
    // 20 x 1,000 = 20,000 B -> 0.02 ms; 100 x 1,000 = 100,000 B -> 0.1 ms.
    const t = timing({ mode: "destination_missing", full_prompt_tokens: 100, kv_bytes_per_token: 1000, bandwidth_gb_s: 1 });
    expect(dynamoDelayMs(t, { transferable_prompt_tokens: 20 })).toBe(0.02);
    expect(dynamoDelayMs(t)).toBe(0.1);
  });
  it("no per-token rate and no request bytes is no delay (None)", () => {
    expect(dynamoDelayMs(timing({ full_prompt_tokens: 100, bandwidth_gb_s: 1 }))).toBeUndefined();
  });
  it("a bandwidth of 0 is refused, not read as off", () => {
    expect(parseHandoffTiming({ mode: "full_prompt", full_prompt_tokens: 100, kv_bytes_per_token: 1000, bandwidth_gb_s: 0 })).toEqual({
      ok: false,
      reason: "transfer_timing.bandwidth_gb_s: bandwidth must be greater than 0 GB/s (leave it unset for no modelled delay), got 0",
    });
    expect(() => dynamoDelayMs(timing({ full_prompt_tokens: 100, kv_bytes_per_token: 1000, bandwidth_gb_s: 0 }))).toThrow(/greater than 0/);
  });
  it("Llama-3.1-8B bf16, 4,096 tokens at 64 GB/s is 8.388608 ms, from kvsim terms through the adapter", () => {
    // 131,072 B/token x 4,096 = 536,870,912 B; / 64e9 B/s = 8.388608 ms.
    const terms = sourceTerms(LLAMA_8B, tokens(4096), { mode: "full_prompt", bandwidthGbps: 64 });
    const t = ok(toDynamoTiming(terms));
    expect(t).toEqual({ mode: "full_prompt", full_prompt_tokens: 4096, kv_bytes_per_token: 131_072, kv_bytes_per_request: 0, bandwidth_gb_s: 64 });
    expect(dynamoDelayMs(t)).toBe(8.388608);
    expect(transferDelayMs(terms)).toBe(8.388608);
  });
  it("the delay-encoding idiom: 1 token x D x 10^6 B at 1 GB/s is D ms", () => {
    expect(dynamoDelayMs(timing({ full_prompt_tokens: 1, kv_bytes_per_token: 250 * 1e6, bandwidth_gb_s: 1 }))).toBe(250);
  });
});

describe("docs/rules/dynamo.md §8.2: the fixed term", () => {
  // DestinationMissing, full 4,096 tokens, 4,444 B/token, 21,479,424 fixed, 100 GB/s (10^11 B/s).
  const fixed = timing({
    mode: "destination_missing",
    full_prompt_tokens: 4096,
    kv_bytes_per_token: 4444,
    kv_bytes_per_request: 21_479_424,
    bandwidth_gb_s: 100,
  });

  it("Dynamo's formula charges the request bytes at every missing count", () => {
    // 0 x 4,444 + 21,479,424 = 21,479,424 B / 1e11 B/s = 0.21479424 ms
    expect(dynamoDelayMs(fixed, { transferable_prompt_tokens: 0 })).toBe(0.21479424);
    // 64 x 4,444 = 284,416; + 21,479,424 = 21,763,840 B -> 0.2176384 ms
    expect(dynamoDelayMs(fixed, { transferable_prompt_tokens: 64 })).toBe(0.2176384);
    // 512 x 4,444 = 2,275,328; + 21,479,424 = 23,754,752 B -> 0.23754752 ms
    expect(dynamoDelayMs(fixed, { transferable_prompt_tokens: 512 })).toBe(0.23754752);
    // 4,096 x 4,444 = 18,202,624; + 21,479,424 = 39,682,048 B -> 0.39682048 ms
    expect(dynamoDelayMs(fixed, { transferable_prompt_tokens: 4096 })).toBe(0.39682048);
  });
  it("at 1 GB/s each value is x100", () => {
    const slow = { ...fixed, bandwidth_gb_s: 1 };
    expect(dynamoDelayMs(slow, { transferable_prompt_tokens: 0 })).toBe(21.479424);
    expect(dynamoDelayMs(slow, { transferable_prompt_tokens: 64 })).toBe(21.76384);
    expect(dynamoDelayMs(slow, { transferable_prompt_tokens: 512 })).toBe(23.754752);
    expect(dynamoDelayMs(slow, { transferable_prompt_tokens: 4096 })).toBe(39.682048);
  });
  it("fixed-only (no per-token rate): delay(0) == delay(4096) > 0", () => {
    const only = { ...fixed, kv_bytes_per_token: null };
    const at0 = dynamoDelayMs(only, { transferable_prompt_tokens: 0 });
    expect(at0).toBe(0.21479424);
    expect(dynamoDelayMs(only, { transferable_prompt_tokens: 4096 })).toBe(at0);
  });
  it("old four-field JSON reads with a fixed term of 0: full prompt 0.128 ms", () => {
    // 128 x 1,000 = 128,000 B at 1 GB/s = 0.128 ms.
    const old = ok(parseHandoffTiming({ mode: "full_prompt", full_prompt_tokens: 128, kv_bytes_per_token: 1000, bandwidth_gb_s: 1.0 }));
    expect(old.kv_bytes_per_request).toBe(0);
    expect(dynamoDelayMs(old)).toBe(0.128);
  });

  describe("adapter regression: the fixed bytes survive the boundary", () => {
    // A source that prices 4,444 B per token and 21,479,424 fixed bytes at 100 GB/s, as kvsim terms.
    const terms: TransferTerms = {
      ...sourceTerms(linearProfile(4444), tokens(4096), { mode: "destination_missing", bandwidthGbps: 100 }),
      fixedBytes: bytes(21_479_424),
    };

    it("SourceHeld carries kv_bytes_per_request, so Dynamo's coordinator issues 0.21479424 ms for DestinationReserved{0}, not 0", () => {
      const held = ok(toDynamoTiming(terms));
      expect(held.kv_bytes_per_request).toBe(21_479_424);
      expect(dynamoDelayMs(held, { transferable_prompt_tokens: 0 })).toBe(0.21479424);
    });
    it("FullPrompt: 0.39682048 ms, not 0.18202624 (the value without the fixed term)", () => {
      // 18,202,624 B alone would be 0.18202624 ms; with 21,479,424 fixed it is 39,682,048 B.
      const held = ok(toDynamoTiming({ ...terms, mode: "full_prompt" }));
      expect(dynamoDelayMs(held, { transferable_prompt_tokens: 0 })).toBe(0.39682048);
      expect(transferDelayMs({ ...terms, mode: "full_prompt" })).toBe(0.39682048);
    });
    it("fixed-only: greater than 0", () => {
      const held: HandoffTransferTiming = { ...ok(toDynamoTiming(terms)), kv_bytes_per_token: null };
      expect(dynamoDelayMs(held, { transferable_prompt_tokens: 0 })).toBeGreaterThan(0);
    });
    it("the legacy shape refuses rather than dropping the fixed bytes", () => {
      const legacy = toLegacyTiming(terms);
      expect(legacy).toEqual({
        ok: false,
        reason:
          "the legacy four-field timing would lose the fixed bytes (21479424 B per request of window and state groups; the legacy shape has no kv_bytes_per_request)",
      });
    });
  });

  describe("the semantic gap: kvsim moves nothing on a full destination hit (docs/rules/decisions.md §13)", () => {
    it("destination_missing with 0 transferable tokens charges 0 request bytes for that transfer", () => {
      expect(transferTimingFor(fixed, { transferable_prompt_tokens: 0 }).kv_bytes_per_request).toBe(0);
      expect(handoffDelayMs(fixed, { transferable_prompt_tokens: 0 })).toBe(0);
    });
    it("a partly missing transfer still pays the fixed bytes: 64 tokens -> 0.2176384 ms", () => {
      expect(handoffDelayMs(fixed, { transferable_prompt_tokens: 64 })).toBe(0.2176384);
    });
    it("the destination's own figure wins when it sends one", () => {
      // 64 x 4,444 = 284,416 + 1,000,000 = 1,284,416 B / 1e11 B/s = 0.01284416 ms.
      expect(handoffDelayMs(fixed, { transferable_prompt_tokens: 64, kv_bytes_per_request: 1_000_000 })).toBe(0.01284416);
    });
    it("full_prompt mode prices the whole prompt whatever the destination holds", () => {
      expect(handoffDelayMs({ ...fixed, mode: "full_prompt" }, { transferable_prompt_tokens: 0 })).toBe(0.39682048);
    });
    it("agrees with transfer-rules on a GLM full hit: 0 ms", () => {
      // N = 4,353: T = 4,352 = 2 blocks of 2,176; a destination hit of 4,352 tokens lacks nothing.
      const t = withDestination(sourceTerms(GLM, tokens(4353), { mode: "destination_missing", bandwidthGbps: 1 }), GLM, tokens(4352));
      const held = ok(toDynamoTiming(t));
      const dest = ok(toDestinationTransfer(t));
      expect(dest).toEqual({ transferable_prompt_tokens: 0, kv_bytes_per_request: 0 });
      expect(handoffDelayMs(held, dest)).toBe(0);
      expect(transferDelayMs(t)).toBe(0);
    });
  });
});

describe("docs/rules/dynamo.md §8.3: block units", () => {
  // A linear vLLM source, engine block 16, prompt 100 tokens, 10^6 B/token at 1 GB/s.
  const profile = linearProfile(1_000_000);
  const src = sourceTerms(profile, tokens(100), { mode: "destination_missing", bandwidthGbps: 1, blockSizeTokens: 16 });
  const at = (hit: number) => withDestination(src, profile, tokens(hit), { blockSizeTokens: 16 });

  it("empty destination: 7 fresh blocks -> 112 tokens (full_prompt stays 100)", () => {
    // cdiv(100, 16) = 7 blocks x 16 = 112.
    expect(ok(toDynamoTiming(src)).full_prompt_tokens).toBe(100);
    expect(ok(toDestinationTransfer(at(0))).transferable_prompt_tokens).toBe(112);
  });
  it("64 cached tokens (4 blocks): 3 fresh blocks -> 48 tokens; a full hit -> 0", () => {
    expect(ok(toDestinationTransfer(at(64))).transferable_prompt_tokens).toBe(48);
    expect(ok(toDestinationTransfer(at(112))).transferable_prompt_tokens).toBe(0);
  });
  it("delays: FullPrompt 100 ms; DestinationMissing 112, 48 and 0 ms", () => {
    const held = ok(toDynamoTiming(src));
    expect(dynamoDelayMs({ ...held, mode: "full_prompt" })).toBe(100);
    for (const [hit, ms] of [
      [0, 112],
      [64, 48],
      [112, 0],
    ] as const) {
      expect(handoffDelayMs(held, ok(toDestinationTransfer(at(hit))))).toBe(ms);
      expect(transferDelayMs(at(hit))).toBe(ms);
    }
  });
  it("a grouped source counts attention blocks only: GLM N = 1,000 -> 1 block -> 2,176 tokens", () => {
    // T = 999 -> cdiv(999, 2,176) = 1 full-attention block; the 5 state groups never count.
    const t = withDestination(sourceTerms(GLM, tokens(1000), { mode: "destination_missing", bandwidthGbps: 1 }), GLM, tokens(0));
    expect(ok(toDestinationTransfer(t))).toEqual({ transferable_prompt_tokens: 2176, kv_bytes_per_request: 36_927_488 });
  });
  it("the conformance fixture: block 4, prompt 8, 10^6 B/token at 1 GB/s: both modes 8 ms", () => {
    // Empty destination: cdiv(8, 4) = 2 blocks x 4 = 8 tokens x 10^6 B = 8 x 10^6 B -> 8 ms.
    const p = linearProfile(1_000_000);
    for (const mode of ["full_prompt", "destination_missing"] as const) {
      const t = withDestination(sourceTerms(p, tokens(8), { mode, bandwidthGbps: 1, blockSizeTokens: 4 }), p, tokens(0), { blockSizeTokens: 4 });
      expect(handoffDelayMs(ok(toDynamoTiming(t)), ok(toDestinationTransfer(t)))).toBe(8);
    }
  });
});

describe("GLM-5.3-Flash in Dynamo's shape", () => {
  it("N = 1,000 at 1 GB/s: 2,176 tokens x 5,995 B + 36,927,488 B = 49,972,608 B -> 49.972608 ms", () => {
    // 13,045,120 / 2,176 = 5,995 exactly; 2,176 x 5,995 = 13,045,120.
    const terms = sourceTerms(GLM, tokens(1000), { mode: "full_prompt", bandwidthGbps: 1 });
    const t = ok(toDynamoTiming(terms));
    expect(t).toEqual({ mode: "full_prompt", full_prompt_tokens: 2176, kv_bytes_per_token: 5995, kv_bytes_per_request: 36_927_488, bandwidth_gb_s: 1 });
    expect(dynamoDelayMs(t)).toBe(49.972608);
    expect(transferDelayMs(terms)).toBe(49.972608);
  });
  it("N = 8,192: 4 blocks = 8,704 tokens x 5,995 + 36,927,488 = 89,107,968 B -> 89.107968 ms", () => {
    // T = 8,191 -> cdiv(8,191, 2,176) = 4; 4 x 13,045,120 = 52,180,480; + 36,927,488 = 89,107,968.
    const t = ok(toDynamoTiming(sourceTerms(GLM, tokens(8192), { mode: "full_prompt", bandwidthGbps: 1 })));
    expect(t.full_prompt_tokens).toBe(8704);
    expect(dynamoDelayMs(t)).toBe(89.107968);
  });
  it("never prices pages: 78,270,720 B (6 pages x 13,045,120) is not what it produces", () => {
    const t = ok(toDynamoTiming(sourceTerms(GLM, tokens(1000), { mode: "full_prompt", bandwidthGbps: 1 })));
    expect(t.full_prompt_tokens * t.kv_bytes_per_token! + t.kv_bytes_per_request).not.toBe(78_270_720);
  });
  it("bandwidth off is null, never 0", () => {
    const t = ok(toDynamoTiming(sourceTerms(GLM, tokens(1000), { mode: "full_prompt" })));
    expect(t.bandwidth_gb_s).toBeNull();
    expect(dynamoDelayMs(t)).toBeUndefined();
  });
  it("the legacy shape names both lost quantities", () => {
    const legacy = toLegacyTiming(sourceTerms(GLM, tokens(1000), { mode: "full_prompt", bandwidthGbps: 1 }));
    expect(legacy.ok).toBe(false);
    if (!legacy.ok) {
      expect(legacy.reason).toContain("the fixed bytes (36927488 B per request");
      expect(legacy.reason).toContain("the block units (the source counts full-attention blocks of 2176 tokens");
    }
  });
  it("a linear source without fixed bytes converts to the legacy shape", () => {
    const legacy = toLegacyTiming(sourceTerms(LLAMA_8B, tokens(10), { mode: "full_prompt", bandwidthGbps: 2 }));
    expect(legacy).toEqual({ ok: true, value: { mode: "full_prompt", full_prompt_tokens: 10, kv_bytes_per_token: 131_072, bandwidth_gb_s: 2 } });
  });
});

describe("block units are never passed as tokens inexactly", () => {
  it("1,000 B per 16-token block (62.5 B/token) has no token form", () => {
    const r = toDynamoTiming(sourceTerms(INEXACT, tokens(100), { mode: "full_prompt", bandwidthGbps: 1 }));
    expect(r).toEqual({
      ok: false,
      reason:
        "a grouped source counts full-attention blocks of 16 tokens at 1000 B per block, which is not a whole number of bytes per token (1000 / 16 = 62.5); block units are never passed as tokens inexactly",
    });
  });
  it("the reverse refuses a token count that is not whole blocks", () => {
    const shape = termsShape(sourceTerms(GLM, tokens(1000), { mode: "full_prompt" }));
    const r = fromDynamoTiming(timing({ full_prompt_tokens: 2000, kv_bytes_per_token: 5995, kv_bytes_per_request: 36_927_488 }), shape);
    expect(r).toEqual({ ok: false, reason: "full_prompt_tokens 2000 is not a whole number of 2176-token blocks" });
  });
  it("the reverse refuses a block count that does not match the transferred tokens", () => {
    // T = 999 needs cdiv(999, 2,176) = 1 block; 4,352 tokens are 2 blocks.
    const shape = termsShape(sourceTerms(GLM, tokens(1000), { mode: "full_prompt" }));
    const r = fromDynamoTiming(timing({ full_prompt_tokens: 4352, kv_bytes_per_token: 5995 }), shape);
    expect(r).toEqual({ ok: false, reason: "full_prompt_tokens 4352 is 2 blocks but 999 transferred tokens need cdiv(999, 2176) = 1" });
  });
});

describe("parseHandoffTiming", () => {
  it("reads the current shape and legacy capitalised modes", () => {
    expect(
      parseHandoffTiming({ mode: "DestinationMissing", full_prompt_tokens: 5, kv_bytes_per_token: 7, kv_bytes_per_request: 9, bandwidth_gb_s: null }),
    ).toEqual({
      ok: true,
      value: { mode: "destination_missing", full_prompt_tokens: 5, kv_bytes_per_token: 7, kv_bytes_per_request: 9, bandwidth_gb_s: null },
    });
  });
  it("refuses unknown keys and bad counts by field", () => {
    expect(parseHandoffTiming({ mode: "full_prompt", full_prompt_tokens: 5, state_bytes: 3 })).toEqual({
      ok: false,
      reason: "transfer_timing.state_bytes: unknown key",
    });
    expect(parseHandoffTiming({ mode: "full_prompt", full_prompt_tokens: 1.5 })).toEqual({
      ok: false,
      reason: "transfer_timing.full_prompt_tokens must be an integer >= 0, got 1.5",
    });
  });
});
