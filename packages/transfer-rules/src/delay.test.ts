import { blocks, bytes, tokens, type Blocks, type Tokens } from "@kvsim/profile-schema";
import { describe, expect, expectTypeOf, it } from "vitest";
import { blocksToTokens, tokensToBlocksCeil, tokensToBlocksFloor } from "./conversions.js";
import { checkBandwidth, delayMsForBytes } from "./delay.js";
import { glmProfile } from "./fixtures.js";
import { transferredTokens } from "./rules.js";
import { sourceTerms, transferDelayMs } from "./source-terms.js";

describe("bandwidth and delay", () => {
  it("refuses 0, negative and non-finite bandwidths with a reason", () => {
    expect(checkBandwidth(1)).toBeUndefined();
    expect(checkBandwidth(0.5)).toBeUndefined();
    expect(checkBandwidth(0)).toBe("bandwidth must be greater than 0 GB/s (leave it unset for no modelled delay), got 0");
    expect(checkBandwidth(-3)).toBe("bandwidth must be greater than 0 GB/s (leave it unset for no modelled delay), got -3");
    expect(checkBandwidth(Number.NaN)).toBe("bandwidth must be a finite number of GB/s, got NaN");
    expect(checkBandwidth(Number.POSITIVE_INFINITY)).toBe("bandwidth must be a finite number of GB/s, got Infinity");
    // The range is [10^-3, 10^5] GB/s (1 MB/s to 100 TB/s): both ends are usable, just outside is refused.
    expect([checkBandwidth(1e-3), checkBandwidth(1e5)]).toEqual([undefined, undefined]);
    const range = (got: string) => `bandwidth must be at least 0.001 and at most 100000 GB/s (1 MB/s to 100 TB/s), got ${got}`;
    expect([checkBandwidth(9e-4), checkBandwidth(100_001)]).toEqual([range("0.0009"), range("100001")]);
    expect(() => delayMsForBytes(bytes(1), 0)).toThrow(new RangeError(checkBandwidth(0)));
    expect(() => sourceTerms(glmProfile("0.31.0"), tokens(10), { mode: "full_prompt", bandwidthGbps: -1 })).toThrow(RangeError);
  });
  it("delay = bytes / (GB/s x 10^9) x 1000", () => {
    // 50,000,000 B at 50 GB/s: 5e7 / 5e10 s = 1e-3 s = 1 ms.
    expect(delayMsForBytes(bytes(50_000_000), 50)).toBe(1);
    // 89,107,968 B at 25 GB/s: 89,107,968 / 25 = 3,564,318.72 B per ms... / 10^6 = 3.56431872 ms.
    expect(delayMsForBytes(bytes(89_107_968), 25)).toBe(3.56431872);
    // 1,000 B at 0.5 GB/s: 1,000 / 5e8 s = 2e-6 s = 0.002 ms.
    expect(delayMsForBytes(bytes(1000), 0.5)).toBe(0.002);
    expect(delayMsForBytes(bytes(0), 1)).toBe(0);
    expect(() => delayMsForBytes(bytes(-1), 1)).toThrow(new RangeError("payload must be a finite number of bytes >= 0, got -1"));
    expect(() => delayMsForBytes(bytes(Number.POSITIVE_INFINITY), 1)).toThrow(new RangeError("payload must be a finite number of bytes >= 0, got Infinity"));
  });
  it("no bandwidth, no modelled delay", () => {
    expect(transferDelayMs(sourceTerms(glmProfile("0.32.0"), tokens(8192), { mode: "full_prompt" }))).toBeUndefined();
  });
});

describe("unit conversions", () => {
  it("converts between blocks and tokens only explicitly", () => {
    // 4 blocks of 2,176 tokens = 8,704 tokens; 8,191 tokens need cdiv = 4 blocks and hold floor = 3 whole blocks.
    expect(blocksToTokens(blocks(4), tokens(2176))).toBe(8704);
    expect(tokensToBlocksCeil(tokens(8191), tokens(2176))).toBe(4);
    expect(tokensToBlocksFloor(tokens(8191), tokens(2176))).toBe(3);
    expect(tokensToBlocksFloor(tokens(8704), tokens(2176))).toBe(4);
  });
  it("refuses a block size of 0 or below instead of dividing by it", () => {
    expect(() => tokensToBlocksFloor(tokens(5), tokens(0))).toThrow(new RangeError("block size must be positive, got 0"));
    expect(() => tokensToBlocksFloor(tokens(5), tokens(-4))).toThrow(new RangeError("block size must be positive, got -4"));
  });
  it("the compiler refuses a block count where tokens are expected (checked by tsc --noEmit)", () => {
    expectTypeOf<Blocks>().not.toExtend<Tokens>();
    expectTypeOf<Tokens>().not.toExtend<Blocks>();
    expectTypeOf(transferredTokens).parameter(1).toEqualTypeOf<Tokens>();
    const four = blocks(4);
    // @ts-expect-error a Blocks is not a Tokens: convert with blocksToTokens
    const wrong: Tokens = four;
    // @ts-expect-error blocksToTokens takes blocks first
    blocksToTokens(tokens(4), tokens(2176));
    const right: Tokens = blocksToTokens(four, tokens(16));
    expect([wrong, right]).toEqual([4, 64]);
  });
});
