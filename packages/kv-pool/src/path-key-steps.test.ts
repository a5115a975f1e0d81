import { describe, expect, it } from "vitest";
import { pathKeyStepInto } from "./path-key-steps.js";
import { nativePairHash } from "./test-helpers.js";

/** A step through the cache, as one u64. */
function step(parent: bigint, id: number): bigint {
  const out = new Uint32Array(2);
  pathKeyStepInto(Number(parent >> 32n), Number(parent & 0xffff_ffffn), id, out, 0);
  return (BigInt(out[0]!) << 32n) | BigInt(out[1]!);
}

describe("pathKeyStepInto (a path key step through the shared cache)", () => {
  it("is XXH3-64 (seed 1337) of [parent LE u64, id LE u64], whatever the cache held before", () => {
    const p = 0x243f_6a88_85a3_08d3n;
    const q = 0xffff_ffff_0000_0001n;
    // Ids 5 and 5 + 2^16 share a slot (a slot is 16 or fewer of the id's low bits); 2^32 - 1 is
    // the largest id; parent 0 with id 0 is a first step into an empty slot (whose other words
    // are 0, so a slot that took it for cached would answer key 0). Each pair of inputs is asked
    // several times, in an order that makes the cache hold another step's inputs in between: a
    // repeat (a hit), the same id after another parent, another id in the same slot.
    const inputs: [bigint, number][] = [
      [p, 5],
      [p, 5],
      [q, 5],
      [p, 5],
      [p, 5 + 0x1_0000],
      [p, 5],
      [q, 5 + 0x1_0000],
      [q, 5 + 0x1_0000],
      [p, 0xffff_ffff],
      [0n, 0],
      [0n, 0],
      [(1n << 64n) - 1n, 0xffff],
    ];
    for (const [parent, id] of inputs) expect(step(parent, id)).toBe(nativePairHash(parent, BigInt(id)));
  });

  it("writes the two halves at out[at] and out[at + 1] and nothing else", () => {
    const out = new Uint32Array(5).fill(7);
    pathKeyStepInto(1, 2, 3, out, 2);
    const key = nativePairHash((1n << 32n) | 2n, 3n);
    expect(Array.from(out)).toEqual([7, 7, Number(key >> 32n), Number(key & 0xffff_ffffn), 7]);
    // The same step again (from the cache) writes the same halves.
    const again = new Uint32Array(2);
    pathKeyStepInto(1, 2, 3, again, 0);
    expect(Array.from(again)).toEqual([Number(key >> 32n), Number(key & 0xffff_ffffn)]);
  });
});
