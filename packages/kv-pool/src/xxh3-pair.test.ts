import { describe, expect, it } from "vitest";
import { nativePairHash as native, jsPairHash as ours } from "./test-helpers.js";
import { mulHigh32 } from "./xxh3-pair.js";

describe("mulHigh32", () => {
  it("is the high word of the 64-bit product", () => {
    // (2^32 - 1)^2 = 2^64 - 2^33 + 1 = 0xFFFFFFFE_00000001: high word 0xFFFFFFFE.
    expect(mulHigh32(0xffff_ffff, 0xffff_ffff)).toBe(0xffff_fffe);
    // 2^16 x 2^16 = 2^32: high word 1. 3 x 5 = 15: high word 0.
    expect(mulHigh32(0x1_0000, 0x1_0000)).toBe(1);
    expect(mulHigh32(3, 5)).toBe(0);
    // 0x80000000 x 6 = 3 x 2^32: high word 3.
    expect(mulHigh32(0x8000_0000, 6)).toBe(3);
  });
});

describe("xxh3PairInto (XXH3-64, seed 1337, 16 bytes)", () => {
  it("chains the docs/rules/dynamo.md §8.6 vector: block 1 of [11..88] in blocks of 4", () => {
    // hashing.test.ts: parent 4117275816416024698, tokens hash 6081346995852963768 -> 5947898228081096063.
    expect(ours(4117275816416024698n, 6081346995852963768n)).toBe(5947898228081096063n);
  });

  it("matches the native XXH3 at the edges of the 64-bit range", () => {
    const max = (1n << 64n) - 1n;
    for (const [a, b] of [
      [0n, 0n],
      [max, max],
      [max, 0n],
      [0n, max],
      [1n << 63n, 1n],
      [0xffff_ffffn, 0x1_0000_0000n],
    ] as const) {
      expect(ours(a, b)).toBe(native(a, b));
    }
  });
});
