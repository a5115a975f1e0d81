import { tokens } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { glmProfile } from "./fixtures.js";
import { backoffTokens, groupPayload, transferredTokens } from "./rules.js";
import { payloadBytes, sourceTerms, transferDelayMs, withDestination } from "./source-terms.js";

// docs/rules/grouped-pd.md §2, oracle: GLM-5.3-Flash, TP 4, fp8. Full-attention block B = 2,176 tokens.
// Full attention moves 13,045,120 bytes per block; the fixed groups move one block each:
// ring 22,528 + 2 x 9,768,960 + 2 x 8,683,520 = 22,528 + 19,537,920 + 17,367,040 = 36,927,488.
// Payload = 13,045,120 x cdiv(N - 1, 2,176) + 36,927,488.
const FIXED = 36_927_488;
const ORACLE = [
  // N 1,000: T 999, cdiv(999, 2,176) = 1: 13,045,120 + 36,927,488 = 49,972,608.
  { n: 1000, t: 999, units: 1, bytes: 49_972_608, ms: 49.972608 },
  // N 2,177: T 2,176 = exactly 1 block: the same 49,972,608.
  { n: 2177, t: 2176, units: 1, bytes: 49_972_608, ms: 49.972608 },
  // N 8,192: T 8,191; 3 x 2,176 = 6,528 < 8,191 <= 8,704 = 4 x 2,176, so 4 blocks:
  // 4 x 13,045,120 = 52,180,480; + 36,927,488 = 89,107,968.
  { n: 8192, t: 8191, units: 4, bytes: 89_107_968, ms: 89.107968 },
  // N 131,072: T 131,071; 60 x 2,176 = 130,560 < 131,071 <= 132,736 = 61 x 2,176, so 61 blocks:
  // 61 x 13,045,120 = 795,752,320; + 36,927,488 = 832,679,808.
  { n: 131_072, t: 131_071, units: 61, bytes: 832_679_808, ms: 832.679808 },
] as const;

describe.each(["0.31.0", "0.32.0"] as const)("GLM-5.3-Flash oracle on vLLM %s", (version) => {
  const profile = glmProfile(version);

  it.each(ORACLE)("N $n moves $bytes bytes in $ms ms at 1 GB/s", ({ n, t, units, bytes, ms }) => {
    expect(backoffTokens(profile, tokens(n))).toBe(1);
    expect(transferredTokens(profile, tokens(n))).toBe(t);
    const terms = sourceTerms(profile, tokens(n), { mode: "full_prompt", bandwidthGbps: 1 });
    expect(terms).toMatchObject({ unit: "block", blockSizeTokens: 2176, promptUnits: units, bytesPerUnit: 13_045_120, fixedBytes: FIXED });
    expect(payloadBytes(terms)).toBe(bytes);
    // ms = bytes / 10^9 x 1000; the decimal must print exactly, with no binary tail.
    expect(transferDelayMs(terms)).toBe(ms);
    expect(String(transferDelayMs(terms))).toBe(String(ms));
    // The per-group rows add up to the same payload.
    expect(groupPayload(profile, tokens(t)).reduce((s, r) => s + r.bytes, 0)).toBe(bytes);
  });

  it.each(ORACLE)("N $n: destination_missing with an empty destination charges the same $bytes", ({ n, bytes }) => {
    const terms = withDestination(sourceTerms(profile, tokens(n), { mode: "destination_missing", bandwidthGbps: 1 }), profile, tokens(0));
    expect(payloadBytes(terms)).toBe(bytes);
  });

  it("N 8,192: the per-group rows (the 0.32.0 checkpoint blocks never move)", () => {
    expect(groupPayload(profile, tokens(8191))).toEqual([
      { name: "full_attention", kind: "full_attention", blocks: 4, bytes: 52_180_480 },
      { name: "tail_ring", kind: "state", blocks: 1, bytes: 22_528 },
      { name: "kda_0", kind: "state", blocks: 1, bytes: 9_768_960 },
      { name: "kda_1", kind: "state", blocks: 1, bytes: 9_768_960 },
      { name: "kda_2", kind: "state", blocks: 1, bytes: 8_683_520 },
      { name: "kda_3", kind: "state", blocks: 1, bytes: 8_683_520 },
    ]);
  });

  it("N 1,000 is not priced from pages (6 x 13,045,120 = 78,270,720)", () => {
    const terms = sourceTerms(profile, tokens(1000), { mode: "full_prompt" });
    const rows = groupPayload(profile, tokens(999));
    const blocksMoved = rows.reduce((s, r) => s + r.blocks, 0);
    expect(blocksMoved).toBe(6);
    const pagePriced = blocksMoved * 13_045_120;
    expect(pagePriced).toBe(78_270_720);
    expect(payloadBytes(terms)).not.toBe(pagePriced);
    // The page price overcharges the five one-block fixed groups by their padding:
    // 78,270,720 - 49,972,608 = 28,298,112 = 5 x 13,045,120 - 36,927,488.
    expect(pagePriced - payloadBytes(terms)).toBe(28_298_112);
  });
});
