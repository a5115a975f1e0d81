import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { nativePairHash as native, jsPairHash as ours, propRuns } from "./test-helpers.js";
import { mulHigh32 } from "./xxh3-pair.js";

describe("mulHigh32 (property)", () => {
  it("agrees with BigInt multiplication on random u32 pairs", () => {
    fc.assert(
      fc.property(fc.nat({ max: 0xffff_ffff }), fc.nat({ max: 0xffff_ffff }), (a, b) => {
        expect(mulHigh32(a, b)).toBe(Number((BigInt(a) * BigInt(b)) >> 32n));
      }),
      { numRuns: propRuns(100) },
    );
  });
});

describe("xxh3PairInto (property)", () => {
  it("matches the native XXH3 on random 64-bit pairs", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), (a, b) => {
        expect(ours(a, b)).toBe(native(a, b));
      }),
      { numRuns: propRuns(2000) },
    );
  });
});
