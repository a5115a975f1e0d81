import { describe, expect, it } from "vitest";
import { computeBlockHashes } from "./hashing.js";
import { createPromptTokens, promptHashes, promptPrefix } from "./prompt-tokens.js";

// Oracles: the docs/rules/dynamo.md §8.6 vectors of hashing.test.ts ([11..88] in blocks of 4 hash to
// 4117275816416024698, 5947898228081096063) and computeBlockHashes, which never shares.
const H0 = 4117275816416024698n;
const H1 = 5947898228081096063n;

describe("createPromptTokens with a shared prefix", () => {
  it("copies the whole blocks inside the shared tokens and hashes the rest itself", () => {
    const a = createPromptTokens(new Uint32Array([11, 22, 33, 44, 55, 66, 77, 88, 99, 100, 101, 102]));
    expect(a.blockHashes(4)).toHaveLength(3); // a hashes its 3 blocks first
    const tokens = new Uint32Array([11, 22, 33, 44, 55, 66, 77, 88, 1, 2, 3, 4, 5]);
    const b = createPromptTokens(tokens, { hashes: promptHashes(a), tokens: 8 });
    // 13 tokens -> 3 full blocks: blocks 0-1 copied, block 2 chained on block 1.
    expect(b.blockHashes(4)).toEqual([H0, H1, computeBlockHashes(tokens, 4)[2]!.blockHash]);
  });

  it("takes the copy on trust: a shared block is not recomputed", () => {
    // The caller claims 4 shared tokens although b's first block differs: b's block 0 is a's.
    const a = createPromptTokens(new Uint32Array([11, 22, 33, 44]));
    a.blockHashes(4);
    const b = createPromptTokens(new Uint32Array([9, 9, 9, 9]), { hashes: promptHashes(a), tokens: 4 });
    expect(b.blockHashes(4)).toEqual([H0]);
  });

  it("copies only whole shared blocks, and nothing when the other prompt has not hashed at that size", () => {
    const a = createPromptTokens(new Uint32Array([11, 22, 33, 44, 55, 66, 77, 88]));
    a.blockHashes(4);
    // 6 shared tokens cover floor(6 / 4) = 1 whole block; the caller lied about block 1 ([55..88]
    // vs [1, 2, 3, 4]) only within the unshared part, so block 1 is b's own.
    const tb = new Uint32Array([11, 22, 33, 44, 1, 2, 3, 4]);
    const b = createPromptTokens(tb, { hashes: promptHashes(a), tokens: 6 });
    expect(b.blockHashes(4)).toEqual(computeBlockHashes(tb, 4).map((h) => h.blockHash));
    // a never hashed at block size 2: c computes all of its own.
    const tc = new Uint32Array([11, 22, 33, 44]);
    const c = createPromptTokens(tc, { hashes: promptHashes(a), tokens: 4 });
    expect(c.blockHashes(2)).toEqual(computeBlockHashes(tc, 2).map((h) => h.blockHash));
  });

  it("refuses shared tokens beyond the prompt and hashes not from promptHashes", () => {
    const a = createPromptTokens(new Uint32Array([1, 2]));
    expect(() => createPromptTokens(new Uint32Array([1]), { hashes: promptHashes(a), tokens: 2 })).toThrow(RangeError);
    expect(() => createPromptTokens(new Uint32Array([1]), { hashes: { kind: "prompt-hashes" }, tokens: 1 })).toThrow(TypeError);
  });
});

describe("promptPrefix", () => {
  it("is the first n tokens with the whole prompt's hashes", () => {
    const a = createPromptTokens(new Uint32Array([11, 22, 33, 44, 55, 66, 77, 88, 99, 100, 101, 102]));
    const p = promptPrefix(a, 9);
    expect(Array.from(p.tokens)).toEqual([11, 22, 33, 44, 55, 66, 77, 88, 99]);
    // floor(9 / 4) = 2 blocks, the whole prompt's first two.
    expect(p.blockHashes(4)).toEqual([H0, H1]);
    expect(a.blockHashes(4)).toHaveLength(3); // computed once, for both
    expect(() => promptPrefix(a, 13)).toThrow(RangeError);
  });
});
