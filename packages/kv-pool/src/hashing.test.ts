import { xxh3 } from "@node-rs/xxhash";
import { describe, expect, it } from "vitest";
import { computeBlockHashes, tokensKeyInto } from "./hashing.js";
import { createPromptTokens } from "./prompt-tokens.js";

// Oracles: docs/rules/dynamo.md §8.6 (XXH3-64, seed 1337, little-endian u32 tokens;
// block 0's hash is its tokens hash, block i hashes [parent LE u64, tokens hash LE u64]).
describe("computeBlockHashes (docs/rules/dynamo.md §8.6 vectors)", () => {
  it("hashes [11..88] in blocks of 4 and chains block 1 on block 0", () => {
    expect(computeBlockHashes([11, 22, 33, 44, 55, 66, 77, 88], 4)).toEqual([
      { tokensHash: 4117275816416024698n, blockHash: 4117275816416024698n },
      { tokensHash: 6081346995852963768n, blockHash: 5947898228081096063n },
    ]);
  });

  it("continues the chain with [99, 100, 101, 102] as block 2", () => {
    const h = computeBlockHashes([11, 22, 33, 44, 55, 66, 77, 88, 99, 100, 101, 102], 4);
    expect(h[2]).toEqual({ tokensHash: 12699502035523072446n, blockHash: 17335092954915961572n });
  });

  it("hashes only full blocks: tokens 1..10 in blocks of 4 give 2 blocks (the 2-token tail has none)", () => {
    expect(computeBlockHashes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4)).toEqual([
      { tokensHash: 14643705804678351452n, blockHash: 14643705804678351452n },
      { tokensHash: 16777012769546811212n, blockHash: 4945711292740353085n },
    ]);
  });

  it("hashes tokens 0..31 in blocks of 16", () => {
    const tokens = Array.from({ length: 32 }, (_, i) => i);
    expect(computeBlockHashes(tokens, 16)).toEqual([
      { tokensHash: 15310707395893867146n, blockHash: 15310707395893867146n },
      { tokensHash: 15292316782987903195n, blockHash: 13769157705258532664n },
    ]);
  });

  it("reuses the tokens hash of a repeated block but still chains it", () => {
    // [5]*8 in blocks of 4: both blocks share one tokens hash; block 1's hash is chained, so differs.
    const h = computeBlockHashes([5, 5, 5, 5, 5, 5, 5, 5], 4);
    expect(h[0]!.tokensHash).toBe(h[1]!.tokensHash);
    expect(h[1]!.blockHash).not.toBe(h[0]!.blockHash);
    // The same tokens hashed alone give the same tokens hash (the reuse changes no value).
    expect(computeBlockHashes([5, 5, 5, 5], 4)[0]!.tokensHash).toBe(h[1]!.tokensHash);
    // Alternating different blocks must not reuse a stale hash: [11,22,33,44] after [5,5,5,5].
    expect(computeBlockHashes([5, 5, 5, 5, 11, 22, 33, 44], 4)[1]!.tokensHash).toBe(4117275816416024698n);
  });

  it("refuses a token id that is not a u32 and a block size that is not positive", () => {
    expect(() => computeBlockHashes([1, -1], 2)).toThrow(RangeError);
    expect(() => computeBlockHashes([1, 2], 0)).toThrow(RangeError);
  });

  it("hashes the first block of a block size even when all its tokens are 0 (the hasher's scratch starts zeroed)", () => {
    // Block size 29 is used by no other test of this file: its hasher is new here. 29 tokens of 0
    // are 29 x 4 = 116 zero bytes; oracle: the native XXH3-64 of them with seed 1337.
    const expected = xxh3.xxh64(new Uint8Array(116), 1337n);
    const h = computeBlockHashes(new Array<number>(29).fill(0), 29);
    expect(h).toEqual([{ tokensHash: expected, blockHash: expected }]);
    expect(expected).not.toBe(0n);
  });

  it("names the token and the block size it refuses (the messages and the u32 ends)", () => {
    // Token 1 of each: -1 and 2^32 lie outside 0..2^32 - 1, 1.5 is no integer.
    for (const bad of [-1, 2 ** 32, 1.5]) {
      expect(() => computeBlockHashes([7, bad], 2)).toThrow(new RangeError(`token 1 (${bad}) is not a u32 token id`));
    }
    for (const bad of [0, -4, 2.5]) {
      expect(() => computeBlockHashes([1, 2], bad)).toThrow(new RangeError(`blockSize must be a positive integer, got ${bad}`));
    }
    // Both ends of the u32 range are token ids: [0, 2^32 - 1] is one block of 2.
    expect(computeBlockHashes([0, 0xffff_ffff], 2)).toHaveLength(1);
  });
});

describe("createPromptTokens", () => {
  it("memoises the chain per block size and agrees with computeBlockHashes", () => {
    const p = createPromptTokens(new Uint32Array([11, 22, 33, 44, 55, 66, 77, 88, 9]));
    const a = p.blockHashes(4);
    expect(a).toEqual([4117275816416024698n, 5947898228081096063n]);
    expect(p.blockHashes(4)).toBe(a);
    // Block size 8: one full block of the 9 tokens.
    expect(p.blockHashes(8)).toHaveLength(1);
  });
});

describe("tokensKeyInto (lookup keys for the output blocks of path prompts)", () => {
  const keyOf = (tokens: number[], tail: number[] = []): string => {
    const out = new Uint32Array(2);
    const head = Uint32Array.from(tokens);
    // The block is the whole source: head tokens, then tail tokens (outputs).
    tokensKeyInto({ head, headStart: 0, headLength: head.length, tail: Uint32Array.from(tail) }, 0, tokens.length + tail.length, out, 0);
    return `${out[0]}:${out[1]}`;
  };

  it("reads the block across the head and the tail: the split does not change the key", () => {
    expect(keyOf([5, 6, 7], [8, 9])).toBe(keyOf([5, 6, 7, 8, 9]));
    expect(keyOf([], [5, 6, 7, 8, 9])).toBe(keyOf([5, 6, 7, 8, 9]));
  });

  it("tells blocks apart by every token, its position and (odd sizes) the last one", () => {
    const base = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
    const keys = new Set([keyOf(base)]);
    for (let j = 0; j < base.length; j++) keys.add(keyOf(base.map((t, k) => (k === j ? t + 1 : t))));
    // Swapping two tokens inside one pair, and across pairs.
    keys.add(keyOf([2, 1, ...base.slice(2)]));
    keys.add(keyOf([1, 3, 2, ...base.slice(3)]));
    // 16 one-token changes + 2 swaps + the base: 19 different keys.
    expect(keys.size).toBe(19);
    // Odd size: the last token pairs with 0, and still counts.
    expect(keyOf([1, 2, 3])).not.toBe(keyOf([1, 2, 4]));
  });
});
