import { describe, expect, it } from "vitest";
import type { PromptTokens } from "./contract.js";
import { computeBlockHashes } from "./hashing.js";
import { PathPrompt, asPromptImpl, createPathPrompt, createPromptTokens, promptHashes, promptPrefix } from "./prompt-tokens.js";

// Oracle: the docs/rules/dynamo.md §8.6 vectors (hashing.test.ts): [11..88] in blocks of 4 hash to H0, H1.
const H0 = 4117275816416024698n;
const H1 = 5947898228081096063n;
const T8 = [11, 22, 33, 44, 55, 66, 77, 88];

/** Block i's lookup key as one string (hi:lo). */
const key = (p: PromptTokens, bs: number, i: number): string => {
  const v = asPromptImpl(p).keys(bs);
  return `${v.blockHi(i)}:${v.blockLo(i)}`;
};

describe("token prompts: chains per block size", () => {
  it("hashes floor(length / B) whole blocks, once per block size", () => {
    // 10 tokens at B 4: floor(10 / 4) = 2 blocks; the 2 trailing tokens make no block.
    const p = createPromptTokens(Uint32Array.from([...T8, 1, 2]));
    const hs = p.blockHashes(4);
    expect(hs).toEqual([H0, H1]);
    // Memoised: the same array on a second call.
    expect(p.blockHashes(4)).toBe(hs);
    expect(asPromptImpl(p).chain(4)).toBe(asPromptImpl(p).chain(4));
    // B 5: floor(10 / 5) = 2 blocks; B 11 > 10 tokens: none.
    expect(p.blockHashes(5)).toHaveLength(2);
    expect(p.blockHashes(11)).toEqual([]);
    // B 10: exactly one block.
    expect(p.blockHashes(10)).toHaveLength(1);
    // Token prompts' lookup keys are their real hashes: H0's halves.
    expect(key(p, 4, 0)).toBe(`${Number(H0 >> 32n)}:${Number(H0 & 0xffff_ffffn)}`);
  });

  it("refuses a block size that is not a positive integer", () => {
    const p = asPromptImpl(createPromptTokens(Uint32Array.from(T8)));
    expect(() => p.chain(0)).toThrow(/blockSize must be a positive integer, got 0/);
    expect(() => p.chain(-4)).toThrow(RangeError);
    expect(() => p.chain(1.5)).toThrow(RangeError);
  });

  it("a shared prefix longer than the other prompt's chain copies only that chain", () => {
    // a has 4 tokens (1 block at B 4); b claims its 4 first tokens are a's but is 8 long: block 0
    // copied (min(floor(4 / 4), 1, 2) = 1), block 1 chained on it.
    const a = createPromptTokens(Uint32Array.from(T8.slice(0, 4)));
    a.blockHashes(4);
    const b = createPromptTokens(Uint32Array.from(T8), { hashes: promptHashes(a), tokens: 4 });
    expect(b.blockHashes(4)).toEqual([H0, H1]);
    // a hashed 8 tokens, b is 5 long and shares 5: it has floor(5 / 4) = 1 block.
    const c = createPromptTokens(Uint32Array.from(T8));
    c.blockHashes(4);
    const d = createPromptTokens(Uint32Array.from(T8.slice(0, 5)), { hashes: promptHashes(c), tokens: 5 });
    expect(d.blockHashes(4)).toEqual([H0]);
  });

  it("refuses shared token counts outside 0..length", () => {
    const a = createPromptTokens(Uint32Array.from([1, 2]));
    const hashes = promptHashes(a);
    expect(() => createPromptTokens(Uint32Array.from([1]), { hashes, tokens: -1 })).toThrow(/shared.tokens must be an integer in 0..1, got -1/);
    expect(() => createPromptTokens(Uint32Array.from([1]), { hashes, tokens: 0.5 })).toThrow(RangeError);
    expect(() => createPromptTokens(Uint32Array.from([1]), { hashes, tokens: 2 })).toThrow(RangeError);
    // 0 and the length itself are fine.
    expect(createPromptTokens(Uint32Array.from([1]), { hashes, tokens: 0 }).length).toBe(1);
    expect(createPromptTokens(Uint32Array.from([1]), { hashes, tokens: 1 }).length).toBe(1);
    expect(() => createPromptTokens(Uint32Array.from([1]), { hashes: { kind: "prompt-hashes" }, tokens: 0 })).toThrow(
      /shared.hashes must come from promptHashes\(\)/,
    );
  });

  it("promptPrefix refuses counts outside 0..length", () => {
    const a = createPromptTokens(Uint32Array.from(T8));
    expect(() => promptPrefix(a, -1)).toThrow(/numTokens must be an integer in 0..8, got -1/);
    expect(() => promptPrefix(a, 2.5)).toThrow(RangeError);
    expect(promptPrefix(a, 0).length).toBe(0);
    expect(promptPrefix(a, 8).blockHashes(4)).toEqual([H0, H1]);
  });

  it("wraps a foreign prompt by its tokens", () => {
    const foreign = { length: 8, tokens: Uint32Array.from(T8), blockHashes: () => [] } as unknown as PromptTokens;
    const p = asPromptImpl(foreign);
    expect(p).not.toBe(foreign);
    expect(p.blockHashes(4)).toEqual([H0, H1]);
    const own = createPromptTokens(Uint32Array.from(T8));
    expect(asPromptImpl(own)).toBe(own);
    expect(promptHashes(own).kind).toBe("prompt-hashes");
  });
});

describe("path prompts", () => {
  it("materialises ids [5, 7, 9] at unit 3 and length 7 as 5 5 5 7 7 7 9", () => {
    const p = createPathPrompt(Uint32Array.from([5, 7, 9]), 7, 3);
    expect(Array.from(p.tokens)).toEqual([5, 5, 5, 7, 7, 7, 9]);
    // Built once: the same array at every read.
    expect(p.tokens).toBe(p.tokens);
    // Length 0 and a length ending on a unit boundary (6 = 2 x 3).
    expect(Array.from(createPathPrompt(Uint32Array.from([5, 7, 9]), 0, 3).tokens)).toEqual([]);
    expect(Array.from(createPathPrompt(Uint32Array.from([5, 7, 9]), 6, 3).tokens)).toEqual([5, 5, 5, 7, 7, 7]);
    // ids x unit = 9 is the most.
    expect(createPathPrompt(Uint32Array.from([5, 7, 9]), 9, 3).length).toBe(9);
    expect(() => createPathPrompt(Uint32Array.from([5, 7, 9]), 10, 3)).toThrow(/length must be an integer in 0..9 \(ids x unit\), got 10/);
    expect(() => createPathPrompt(Uint32Array.from([5]), -1, 3)).toThrow(RangeError);
    expect(() => createPathPrompt(Uint32Array.from([5]), 1.5, 3)).toThrow(RangeError);
    expect(() => createPathPrompt(Uint32Array.from([5]), 1, 1.5)).toThrow(/unit must be a positive integer, got 1.5/);
    expect(createPathPrompt(Uint32Array.from([5, 6]), 2, 1).tokens).toEqual(Uint32Array.from([5, 6]));
  });

  it("refuses ids that are not u32 token ids when a JavaScript caller passes a plain array", () => {
    const ids = (v: number[]): Uint32Array => v as unknown as Uint32Array;
    expect(() => createPathPrompt(ids([1, -1]), 2, 1)).toThrow(/id 1 \(-1\) is not a u32 token id/);
    expect(() => createPathPrompt(ids([1.5]), 1, 1)).toThrow(RangeError);
    expect(() => createPathPrompt(ids([2 ** 32]), 1, 1)).toThrow(RangeError);
    // The edges of the u32 range are fine.
    expect(Array.from(createPathPrompt(ids([0, 2 ** 32 - 1]), 2, 1).tokens)).toEqual([0, 2 ** 32 - 1]);
  });

  it("keys are equal exactly when the blocks end at the same token after equal tokens", () => {
    // unit 4, B 4: block 0 is the first id's 4 tokens, block 1 the second's.
    const a = new PathPrompt(Uint32Array.from([5, 7]), 8, 4);
    const b = new PathPrompt(Uint32Array.from([5, 8]), 8, 4);
    expect(key(a, 4, 0)).toBe(key(b, 4, 0)); // 5 5 5 5 on both
    expect(key(a, 4, 1)).not.toBe(key(b, 4, 1)); // 7s vs 8s
    // The key depends on the tokens up to the block's end, not on the block size: block 1 at B 2
    // and block 0 at B 4 both end at token 4 after 5 5 5 5.
    expect(key(a, 2, 1)).toBe(key(a, 4, 0));
    // B 2: blocks 0 and 1 both lie in id 0 (5 5 | 5 5) but end at 2 and 4: different keys.
    expect(key(a, 2, 0)).not.toBe(key(a, 2, 1));
    // A block cut by the unit: B 3 block 1 is tokens 3..5 = 5 7 7, ending in id 1.
    const c = new PathPrompt(Uint32Array.from([5, 7, 1]), 12, 4);
    const d = new PathPrompt(Uint32Array.from([5, 8, 1]), 12, 4);
    expect(key(c, 3, 0)).toBe(key(d, 3, 0)); // 5 5 5
    expect(key(c, 3, 1)).not.toBe(key(d, 3, 1)); // 5 7 7 vs 5 8 8
    // Another unit and the same tokens make other keys (path prompts match only at one unit):
    // ids [5, 5] at unit 2 are 5 5 5 5 too.
    const e = new PathPrompt(Uint32Array.from([5, 5]), 4, 2);
    expect(key(e, 4, 0)).not.toBe(key(a, 4, 0));
    // blockKeysInto writes the same keys as int32 halves.
    const out = new Int32Array(4);
    a.keys(4).blockKeysInto(0, 2, out);
    expect(`${out[0]! >>> 0}:${out[1]! >>> 0}`).toBe(key(a, 4, 0));
    expect(`${out[2]! >>> 0}:${out[3]! >>> 0}`).toBe(key(a, 4, 1));
    // From block 1 on: out[0..1] is block 1.
    a.keys(4).blockKeysInto(1, 2, out);
    expect(`${out[0]! >>> 0}:${out[1]! >>> 0}`).toBe(key(a, 4, 1));
    // The key view is made once per block size; lookup keys have no tokens hash.
    const v = a.keys(4);
    expect(a.keys(4)).toBe(v);
    expect(v.length).toBe(2);
    expect([v.tokensHi(0), v.tokensLo(0)]).toEqual([0, 0]);
  });

  it("key views refuse blocks outside the prompt and block sizes that are not positive integers", () => {
    const a = new PathPrompt(Uint32Array.from([5, 7]), 8, 4);
    const v = a.keys(4); // 2 blocks
    expect(() => v.blockHi(2)).toThrow(/block 2 outside 0..1/);
    expect(() => v.blockLo(3)).toThrow(/block 3 outside 0..1/);
    // A negative block, once a block was read (the view remembers the last block it
    // computed, starting from none, -1, so only a read after another reaches the check).
    v.blockHi(0);
    expect(() => v.blockHi(-1)).toThrow(new RangeError("block -1 outside 0..1"));
    expect(() => v.blockLo(-2)).toThrow(new RangeError("block -2 outside 0..1"));
    expect(() => {
      v.blockKeysInto(0, 3, new Int32Array(6));
    }).toThrow(/blocks 0..2 outside 0..1/);
    expect(() => {
      v.blockKeysInto(-1, 1, new Int32Array(4));
    }).toThrow(RangeError);
    expect(() => a.keys(0)).toThrow(/blockSize must be a positive integer, got 0/);
    expect(() => a.keys(2.5)).toThrow(RangeError);
    // Reading a block after another recomputes it: block 0, then 1, then 0 again.
    const k0 = `${v.blockHi(0)}:${v.blockLo(0)}`;
    const k1 = `${v.blockHi(1)}:${v.blockLo(1)}`;
    expect(`${v.blockHi(0)}:${v.blockLo(0)}`).toBe(k0);
    expect(k1).not.toBe(k0);
  });

  it("a prefix keeps the whole prompt's keys for its blocks and its real hashes are its tokens'", () => {
    const p = new PathPrompt(Uint32Array.from([5, 7, 9]), 12, 4);
    // 6 tokens: ceil(6 / 4) = 2 ids, 5 5 5 5 7 7.
    const q = promptPrefix(p, 6);
    if (!(q instanceof PathPrompt)) throw new Error("a path prompt's prefix is a path prompt");
    expect(Array.from(q.ids)).toEqual([5, 7]);
    expect(Array.from(q.tokens)).toEqual([5, 5, 5, 5, 7, 7]);
    // B 3: 2 blocks, the same keys as the whole prompt's first 2.
    expect(q.keys(3).length).toBe(2);
    expect(key(q, 3, 0)).toBe(key(p, 3, 0));
    expect(key(q, 3, 1)).toBe(key(p, 3, 1));
    // Built from its own ids, the same keys.
    const r = new PathPrompt(Uint32Array.from([5, 7]), 6, 4);
    expect(key(r, 3, 1)).toBe(key(p, 3, 1));
    expect(q.blockHashes(3)).toEqual(computeBlockHashes(Uint32Array.from([5, 5, 5, 5, 7, 7]), 3).map((h) => h.blockHash));
    expect(p.blockHashes(3).slice(0, 2)).toEqual(q.blockHashes(3));
  });
});
