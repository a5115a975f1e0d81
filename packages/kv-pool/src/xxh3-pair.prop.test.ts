import { xxh3 } from "@node-rs/xxhash";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mulHigh32, xxh3PairInto } from "./xxh3-pair.js";

// Oracle: the native XXH3-64 of @node-rs/xxhash (the library block hashing used before), over the
// same 16 bytes [a LE u64, b LE u64] with seed 1337.
function native(a: bigint, b: bigint): bigint {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, a, true);
  view.setBigUint64(8, b, true);
  return xxh3.xxh64(bytes, 1337n);
}

function ours(a: bigint, b: bigint): bigint {
  const out = new Uint32Array(2);
  xxh3PairInto(Number(a >> 32n), Number(a & 0xffffffffn), Number(b >> 32n), Number(b & 0xffffffffn), out, 0);
  return (BigInt(out[0]!) << 32n) | BigInt(out[1]!);
}

describe("mulHigh32 (property)", () => {
  it("agrees with BigInt multiplication on random u32 pairs", () => {
    fc.assert(
      fc.property(fc.nat({ max: 0xffff_ffff }), fc.nat({ max: 0xffff_ffff }), (a, b) => {
        expect(mulHigh32(a, b)).toBe(Number((BigInt(a) * BigInt(b)) >> 32n));
      }),
    );
  });
});

describe("xxh3PairInto (property)", () => {
  it("matches the native XXH3 on random 64-bit pairs", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), (a, b) => {
        expect(ours(a, b)).toBe(native(a, b));
      }),
      { numRuns: 2000 },
    );
  });
});
