import { InputError, tokens, type CacheGroup, type Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { fullGroup, glmProfile, groupedProfile, linearProfile, stateGroup, windowGroup } from "./fixtures.js";
import { transferProfileIssues } from "./profile-check.js";
import { backoffTokens, groupPayload, transferredTokens } from "./rules.js";
import { chargedFixedBytes, payloadBytes, sourceTerms, transferDelayMs, withDestination } from "./source-terms.js";

const sum = (rows: readonly { bytes: number }[]) => rows.reduce((s, r) => s + r.bytes, 0);
const glm = glmProfile("0.32.0");
// Toy hybrid: full attention (B 16, 1,000 B/block) + sliding window (W 33, B 16, 300 B/block), no state.
const toy = groupedProfile([fullGroup(16, 1000), windowGroup(33, 16, 300)]);

function missingTerms(profile: Profile, n: number, hit: number) {
  return withDestination(sourceTerms(profile, tokens(n), { mode: "destination_missing", bandwidthGbps: 1 }), profile, tokens(hit));
}

describe("backoff and transferred tokens", () => {
  it("refuses N of 0, negative or fractional prompts", () => {
    for (const n of [0, -1, 1.5, Number.NaN]) {
      expect(() => backoffTokens(glm, tokens(n))).toThrow(RangeError);
      expect(() => sourceTerms(glm, tokens(n), { mode: "full_prompt" })).toThrow(/promptTokens must be an integer >= 1/);
    }
  });
  it("N 1 keeps its token; N 2 backs off one (Mamba-type model)", () => {
    expect(backoffTokens(glm, tokens(1))).toBe(0);
    expect(transferredTokens(glm, tokens(1))).toBe(1);
    expect(backoffTokens(glm, tokens(2))).toBe(1);
    expect(transferredTokens(glm, tokens(2))).toBe(1);
    // Both move T = 1 token: cdiv(1, 2,176) = 1 block: 13,045,120 + 36,927,488 = 49,972,608.
    expect(payloadBytes(sourceTerms(glm, tokens(1), { mode: "full_prompt" }))).toBe(49_972_608);
    expect(payloadBytes(sourceTerms(glm, tokens(2), { mode: "full_prompt" }))).toBe(49_972_608);
  });
  it("a model without Mamba-type state (a ring is not one) backs off nothing", () => {
    const ringModel = groupedProfile([fullGroup(16, 1000), stateGroup(16, 50, false)]);
    expect(backoffTokens(ringModel, tokens(1000))).toBe(0);
    expect(transferredTokens(ringModel, tokens(1000))).toBe(1000);
    // T 1,000: cdiv(1,000, 16) = 63 full blocks x 1,000 = 63,000; the ring's one block 50: 63,050.
    expect(payloadBytes(sourceTerms(ringModel, tokens(1000), { mode: "full_prompt" }))).toBe(63_050);
    expect(backoffTokens(toy, tokens(2))).toBe(0);
    expect(backoffTokens(linearProfile(1000), tokens(2))).toBe(0);
  });
  it("toy model, N 1 and 2: T = N", () => {
    // N 2: full cdiv(2, 16) = 1 block = 1,000; window cdiv(2, 16) - floor(max(0, 2 - 33 + 1) / 16) = 1 - 0 = 1 block = 300.
    expect(groupPayload(toy, transferredTokens(toy, tokens(2)))).toEqual([
      { name: "fa", kind: "full_attention", blocks: 1, bytes: 1000 },
      { name: "sw", kind: "sliding_window", blocks: 1, bytes: 300 },
    ]);
    expect(payloadBytes(sourceTerms(toy, tokens(1), { mode: "full_prompt" }))).toBe(1300);
  });
});

describe("window groups", () => {
  it("mixes full-attention and window groups: W 33, B 16, T 1,000 moves 3 window blocks", () => {
    // full: cdiv(1,000, 16) = 63 blocks x 1,000 = 63,000.
    // window: floor((1,000 - 33 + 1) / 16) = floor(968 / 16) = 60 below the window; 63 - 60 = 3 blocks x 300 = 900.
    expect(groupPayload(toy, tokens(1000))).toEqual([
      { name: "fa", kind: "full_attention", blocks: 63, bytes: 63_000 },
      { name: "sw", kind: "sliding_window", blocks: 3, bytes: 900 },
    ]);
    const terms = sourceTerms(toy, tokens(1000), { mode: "full_prompt" });
    expect(terms).toMatchObject({ unit: "block", blockSizeTokens: 16, promptUnits: 63, bytesPerUnit: 1000, fixedBytes: 900 });
    expect(payloadBytes(terms)).toBe(63_900);
  });
  it("W 32, B 16, T 1,024 (a block boundary) moves 2 window blocks", () => {
    const p = groupedProfile([fullGroup(16, 1000), windowGroup(32, 16, 300)]);
    // cdiv(1,024, 16) = 64; floor((1,024 - 32 + 1) / 16) = floor(993 / 16) = 62; 64 - 62 = 2.
    expect(groupPayload(p, tokens(1024))[1]).toEqual({ name: "sw", kind: "sliding_window", blocks: 2, bytes: 600 });
    // 64 x 1,000 + 2 x 300 = 64,600.
    expect(payloadBytes(sourceTerms(p, tokens(1024), { mode: "full_prompt" }))).toBe(64_600);
  });
  it("one more prompt token can move one window block less (payload is not monotone in N with windows)", () => {
    // N 47: full cdiv(47, 16) = 3 blocks (3,000); window 3 - floor((47 - 33 + 1) / 16) = 3 - 0 = 3 (900): 3,900.
    // N 48: full cdiv(48, 16) = 3 blocks (3,000); window 3 - floor((48 - 33 + 1) / 16) = 3 - 1 = 2 (600): 3,600.
    expect(payloadBytes(sourceTerms(toy, tokens(47), { mode: "full_prompt" }))).toBe(3900);
    expect(payloadBytes(sourceTerms(toy, tokens(48), { mode: "full_prompt" }))).toBe(3600);
  });
  it("a convolution group follows the window rule", () => {
    const conv: CacheGroup = { ...windowGroup(4, 16, 70, "conv"), kind: "convolution" };
    const p = groupedProfile([fullGroup(16, 1000), conv]);
    // T 100: cdiv(100, 16) = 7; floor((100 - 4 + 1) / 16) = floor(97 / 16) = 6; 7 - 6 = 1 block x 70.
    expect(groupPayload(p, tokens(100))[1]).toEqual({ name: "conv", kind: "convolution", blocks: 1, bytes: 70 });
  });
});

describe("destination hits", () => {
  it("a partial hit moves only the missing full-attention blocks, with the fixed bytes (GLM)", () => {
    // N 8,192, T 8,191: 4 full blocks; the destination holds 4,352 = 2 x 2,176 tokens, so 4 - 2 = 2 move:
    // 2 x 13,045,120 = 26,090,240 + 36,927,488 = 63,017,728 bytes, 63.017728 ms at 1 GB/s.
    const terms = missingTerms(glm, 8192, 4352);
    expect(terms.missing).toEqual({ units: 2, fixedBytes: 36_927_488 });
    expect(payloadBytes(terms)).toBe(63_017_728);
    expect(transferDelayMs(terms)).toBe(63.017728);
    expect(sum(groupPayload(glm, tokens(8191), tokens(4352)))).toBe(63_017_728);
    // A hit that is not whole blocks counts its whole blocks only: floor(5,000 / 2,176) = 2.
    expect(payloadBytes(missingTerms(glm, 8192, 5000))).toBe(63_017_728);
  });
  it("a partial hit also trims window groups below the hit (toy)", () => {
    // T 1,000 (63 blocks, 60 below the window). Hit 992 = 62 blocks: full 63 - 62 = 1 (1,000);
    // window 63 - max(60, 62) = 1 (300). Total 1,300.
    expect(groupPayload(toy, tokens(1000), tokens(992))).toEqual([
      { name: "fa", kind: "full_attention", blocks: 1, bytes: 1000 },
      { name: "sw", kind: "sliding_window", blocks: 1, bytes: 300 },
    ]);
    expect(missingTerms(toy, 1000, 992).missing).toEqual({ units: 1, fixedBytes: 300 });
    // Hit 960 = 60 blocks: full 63 - 60 = 3 (3,000); window 63 - max(60, 60) = 3 (900). Total 3,900.
    expect(payloadBytes(missingTerms(toy, 1000, 960))).toBe(3900);
  });
  it("a full hit moves nothing, window and state groups included", () => {
    // N 4,353, T 4,352 = exactly 2 full blocks; the destination holds both.
    const terms = missingTerms(glm, 4353, 4352);
    expect(terms.missing).toEqual({ units: 0, fixedBytes: 0 });
    expect(payloadBytes(terms)).toBe(0);
    expect(chargedFixedBytes(terms)).toBe(0);
    expect(transferDelayMs(terms)).toBe(0);
    // full_prompt ignores what the destination holds: the fixed bytes are the ring's and KDA groups' 36,927,488.
    expect(chargedFixedBytes({ ...terms, mode: "full_prompt" })).toBe(36_927_488);
    expect(groupPayload(glm, tokens(4352), tokens(4352)).every((r) => r.blocks === 0 && r.bytes === 0)).toBe(true);
    // full_prompt mode still charges the whole prompt: 2 x 13,045,120 + 36,927,488 = 63,017,728.
    expect(payloadBytes({ ...terms, mode: "full_prompt" })).toBe(63_017_728);
  });
  it("a hit larger than the transfer lacks nothing", () => {
    // T 8,191 (4 blocks); hit 8,704 = 4 x 2,176 > 8,191.
    expect(payloadBytes(missingTerms(glm, 8192, 8704))).toBe(0);
    // Toy, T 1,000 (63 blocks); hit 2,000 = 125 whole blocks: nothing is missing.
    expect(groupPayload(toy, tokens(1000), tokens(2000)).map((r) => r.bytes)).toEqual([0, 0]);
  });
  it("a hit longer than T but short of its last block still misses that block", () => {
    // T 8,191; hit 8,192 > T rounds down to floor(8,192 / 2,176) = 3 blocks; 4 - 3 = 1 moves:
    // 13,045,120 + 36,927,488 = 49,972,608.
    expect(payloadBytes(missingTerms(glm, 8192, 8192))).toBe(49_972_608);
  });
  it("refuses a negative or fractional hit, or negative transferred tokens, naming the count", () => {
    const terms = sourceTerms(glm, tokens(10), { mode: "destination_missing" });
    expect(() => withDestination(terms, glm, tokens(-1))).toThrow(new RangeError("destination hit tokens must be an integer >= 0, got -1"));
    expect(() => groupPayload(glm, tokens(9), tokens(0.5))).toThrow(new RangeError("destination hit tokens must be an integer >= 0, got 0.5"));
    expect(() => groupPayload(glm, tokens(-1))).toThrow(new RangeError("transferred tokens must be an integer >= 0, got -1"));
  });
  it("refuses block terms priced with another full-attention block size", () => {
    // The toy's terms count blocks of 16 tokens; this profile's full-attention block is 32.
    const other = groupedProfile([fullGroup(32, 1000), windowGroup(33, 16, 300)]);
    expect(() => withDestination(sourceTerms(toy, tokens(100), { mode: "destination_missing" }), other, tokens(0))).toThrow(
      new RangeError("the terms count blocks of 16 tokens but the profile's full-attention block is 32 tokens"),
    );
  });
  it("destination_missing before the destination is known charges the full prompt", () => {
    expect(payloadBytes(sourceTerms(glm, tokens(8192), { mode: "destination_missing" }))).toBe(89_107_968);
  });
});

describe("linear profiles: token units", () => {
  const lin = linearProfile(1000);
  it("full_prompt charges N tokens exactly; destination_missing the block-rounded missing tokens", () => {
    const terms = sourceTerms(lin, tokens(10), { mode: "full_prompt", blockSizeTokens: 4 });
    expect(terms).toEqual({
      mode: "full_prompt",
      bandwidthGbps: undefined,
      backoffTokens: 0,
      transferredTokens: 10,
      unit: "token",
      promptUnits: 10,
      bytesPerUnit: 1000,
      fixedBytes: 0,
    });
    expect("blockSizeTokens" in terms).toBe(false);
    // 10 tokens x 1,000 = 10,000.
    expect(payloadBytes(terms)).toBe(10_000);
    // No hit: cdiv(10, 4) = 3 blocks x 4 = 12 tokens -> 12,000 bytes in destination_missing.
    const fresh = withDestination({ ...terms, mode: "destination_missing" }, lin, tokens(0), { blockSizeTokens: 4 });
    expect(fresh.missing).toEqual({ units: 12, fixedBytes: 0 });
    expect(payloadBytes(fresh)).toBe(12_000);
    // The destination holds all three blocks: (3 - floor(12 / 4)) x 4 = 0.
    expect(withDestination(terms, lin, tokens(12), { blockSizeTokens: 4 }).missing).toEqual({ units: 0, fixedBytes: 0 });
    // A 10-token hit holds only 2 whole blocks: (3 - 2) x 4 = 4 tokens.
    expect(withDestination(terms, lin, tokens(10), { blockSizeTokens: 4 }).missing?.units).toBe(4);
  });
  it("a 4-token prompt (B 4): the first destination lacks 4 tokens, an identical second 0", () => {
    const terms = sourceTerms(lin, tokens(4), { mode: "destination_missing", blockSizeTokens: 4 });
    expect(withDestination(terms, lin, tokens(0), { blockSizeTokens: 4 }).missing?.units).toBe(4);
    expect(withDestination(terms, lin, tokens(4), { blockSizeTokens: 4 }).missing?.units).toBe(0);
  });
  it("the engine block size defaults to 16", () => {
    // cdiv(10, 16) = 1 block = 16 tokens x 1,000 = 16,000.
    expect(payloadBytes(missingTerms(lin, 10, 0))).toBe(16_000);
  });
  it("one pseudo-group row named kv", () => {
    // Full prompt: cdiv(10, 4) = 3 engine blocks, 10 tokens x 1,000 = 10,000 bytes.
    expect(groupPayload(lin, tokens(10), undefined, { blockSizeTokens: 4 })).toEqual([{ name: "kv", kind: "full_attention", blocks: 3, bytes: 10_000 }]);
    // Hit 4: 3 - 1 = 2 blocks = 8 tokens x 1,000 = 8,000.
    expect(groupPayload(lin, tokens(10), tokens(4), { blockSizeTokens: 4 })).toEqual([{ name: "kv", kind: "full_attention", blocks: 2, bytes: 8000 }]);
  });
  it("refuses a block size below 1 and terms from the other kind of profile", () => {
    expect(() => sourceTerms(lin, tokens(10), { mode: "full_prompt", blockSizeTokens: 0 })).toThrow(/blockSizeTokens must be an integer >= 1/);
    expect(() => withDestination(sourceTerms(glm, tokens(10), { mode: "full_prompt" }), lin, tokens(0))).toThrow(/need the grouped profile/);
    expect(() => withDestination(sourceTerms(lin, tokens(10), { mode: "full_prompt" }), glm, tokens(0))).toThrow(/need the linear profile/);
  });
});

describe("payloads a double cannot hold exactly", () => {
  it("are refused, not rounded", () => {
    // One full-attention group of 2^30 = 1,073,741,824 bytes per 16-token block. The layout check
    // accepts it: the longest prompt kvsim takes, 2^24 tokens, moves 2^20 blocks x 2^30 = 2^50
    // bytes. groupPayload itself still refuses a longer T rather than round the product.
    const big = groupedProfile([fullGroup(16, 2 ** 30)]);
    // T 16: 1 block = 2^30 bytes, exact.
    expect(groupPayload(big, tokens(16))[0]!.bytes).toBe(1_073_741_824);
    // T 2^28 = 268,435,456: 2^24 = 16,777,216 blocks x 2^30 = 2^54 bytes > 2^53.
    expect(() => groupPayload(big, tokens(2 ** 28))).toThrow(new RangeError("payload of 16777216 x 1073741824 bytes exceeds 2^53 bytes"));
  });
});

describe("profiles that cannot price a handoff", () => {
  const withoutField = (p: Profile, group: string, field: "transfer_bytes_per_block" | "prefix_cacheable"): Profile => ({
    ...p,
    kv_cache_groups: p.kv_cache_groups!.map((g) => (g.name === group ? (Object.fromEntries(Object.entries(g).filter(([k]) => k !== field)) as CacheGroup) : g)),
  });
  it("a group without transfer_bytes_per_block is refused, naming the group and field", () => {
    const old = withoutField(glm, "tail_ring", "transfer_bytes_per_block");
    expect(transferProfileIssues(old)).toEqual([
      {
        path: "kv_cache_groups[1].transfer_bytes_per_block",
        message: 'transfer_bytes_per_block is required on every group for P/D (kv_cache_groups[1] "tail_ring" has none)',
      },
    ]);
    expect(() => groupPayload(old, tokens(999))).toThrow(InputError);
    expect(() => sourceTerms(old, tokens(1000), { mode: "full_prompt" })).toThrow(
      /kv_cache_groups\[1\]\.transfer_bytes_per_block: transfer_bytes_per_block is required on every group for P\/D \(kv_cache_groups\[1\] "tail_ring"/,
    );
    // Backoff needs only prefix_cacheable on state groups, which the ring still has.
    expect(backoffTokens(old, tokens(1000))).toBe(1);
  });
  it("a state group without prefix_cacheable cannot tell its backoff", () => {
    const old = withoutField(glm, "kda_2", "prefix_cacheable");
    expect(() => backoffTokens(old, tokens(1000))).toThrow(/kv_cache_groups\[4\]\.prefix_cacheable: state group "kda_2"/);
    // Only state groups need the marker for the backoff: a full-attention group without it does
    // not matter there (the KDA groups still say Mamba-type, so N 1,000 backs off 1).
    expect(backoffTokens(withoutField(glm, "full_attention", "prefix_cacheable"), tokens(1000))).toBe(1);
  });
  it("needs a full-attention group, and one block size across them", () => {
    expect(transferProfileIssues(groupedProfile([windowGroup(32, 16, 300)])).map((i) => i.path)).toEqual(["kv_cache_groups"]);
    const split = groupedProfile([fullGroup(16, 1000, "a"), fullGroup(32, 1000, "b")]);
    expect(transferProfileIssues(split)).toEqual([
      {
        path: "kv_cache_groups[1].block_size_tokens",
        message: "block_size_tokens must be the same on every full_attention group, the handoff unit (got 32, kv_cache_groups[0] has 16)",
      },
    ]);
    expect(transferProfileIssues(glm)).toEqual([]);
    expect(transferProfileIssues(linearProfile(1000))).toEqual([]);
  });
});
