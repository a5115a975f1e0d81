import { xxh3 } from "@node-rs/xxhash";
import { describe, expect, it } from "vitest";
import { computeBlockHashes } from "./hashing.js";
import { PathPrompt, asPromptImpl, createPathPrompt, createPromptTokens, promptPrefix } from "./prompt-tokens.js";

/** XXH3-64 (seed 1337) of [a LE u64, b LE u64], the native way. */
const pair = (a: bigint, b: bigint): bigint => {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, a, true);
  view.setBigUint64(8, b, true);
  return xxh3.xxh64(bytes, 1337n);
};

/** A path prompt's per-prefix keys (private), as 64-bit values. */
const pathKeysOf = (p: PathPrompt): bigint[] => {
  const w = Reflect.get(p, "pathKeys") as Uint32Array;
  return Array.from({ length: w.length / 2 }, (_, j) => (BigInt(w[2 * j]!) << 32n) | BigInt(w[2 * j + 1]!));
};

describe("path keys: P[j] = XXH3(P[j - 1], ids[j]) from a fixed start", () => {
  it("chains every id on the previous key (checked with the native XXH3)", () => {
    // The start: hex digits 1-16 of pi's fraction (3.243f6a88 85a308d3...), a fixed constant.
    let prev = 0x243f_6a88_85a3_08d3n;
    const ids = [5, 7, 9, 0xffff_ffff];
    const expected = ids.map((id) => (prev = pair(prev, BigInt(id))));
    expect(pathKeysOf(new PathPrompt(Uint32Array.from(ids), 13, 4))).toEqual(expected);
  });

  it("a prefix shares the whole prompt's keys (no second chain)", () => {
    const p = new PathPrompt(Uint32Array.from([5, 7, 9]), 12, 4);
    const q = promptPrefix(p, 6);
    if (!(q instanceof PathPrompt)) throw new Error("a path prompt's prefix is a path prompt");
    // ceil(6 / 4) = 2 ids: the first 2 keys, read from the same memory.
    expect(pathKeysOf(q)).toEqual(pathKeysOf(p).slice(0, 2));
    expect((Reflect.get(q, "pathKeys") as Uint32Array).buffer).toBe((Reflect.get(p, "pathKeys") as Uint32Array).buffer);
  });
});

describe("path prompts: units, tails and key views", () => {
  it("refuses a unit that is not a positive integer, by name", () => {
    expect(() => createPathPrompt(Uint32Array.from([5]), 1, 0)).toThrow(/^unit must be a positive integer, got 0$/);
    expect(() => createPathPrompt(Uint32Array.from([5]), 1, 1.5)).toThrow(/^unit must be a positive integer, got 1.5$/);
    expect(() => new PathPrompt(Uint32Array.from([5]), 0, -2)).toThrow(/^unit must be a positive integer, got -2$/);
  });

  it("a key view remembers no block at first: block -1 read first is 0 (as documented), not a refusal", () => {
    // PathKeyView starts with last = -1 and hi = lo = 0: a first read of block -1 returns them.
    const v = new PathPrompt(Uint32Array.from([5, 7]), 8, 4).keys(4);
    expect([v.blockHi(-1), v.blockLo(-1)]).toEqual([0, 0]);
  });
});

describe("prefixes take their chains from the whole prompt", () => {
  it("a token prompt's prefix hashes the whole prompt's chain and copies its first blocks", () => {
    const t = Uint32Array.from([11, 22, 33, 44, 55, 66, 77, 88, 99, 100]);
    const p = createPromptTokens(t);
    const q = promptPrefix(p, 7);
    // 7 tokens at B 3: floor(7 / 3) = 2 blocks, the first 2 of the tokens' 3.
    const ref = computeBlockHashes(t, 3).map((h) => h.blockHash);
    expect(q.blockHashes(3)).toEqual(ref.slice(0, 2));
    // The whole prompt's chain was made for it (3 blocks), and is the one p then uses.
    const whole = asPromptImpl(p).hashes.chains.get(3);
    expect(whole?.length).toBe(3);
    expect(asPromptImpl(p).chain(3)).toBe(whole);
  });

  it("so does a path prompt's prefix", () => {
    const p = new PathPrompt(Uint32Array.from([5, 7, 9]), 12, 4);
    const q = promptPrefix(p, 6);
    // 5 5 5 5 7 7 at B 2: 3 blocks; the whole prompt (12 tokens) gets its 6.
    expect(q.blockHashes(2)).toEqual(computeBlockHashes(Uint32Array.from([5, 5, 5, 5, 7, 7]), 2).map((h) => h.blockHash));
    expect(asPromptImpl(p).hashes.chains.get(2)?.length).toBe(6);
  });
});
