import { describe, expect, it } from "vitest";
import { createPathPrompt } from "./prompt-tokens.js";
import { Sequence } from "./sequence.js";
import { admit, group, manager, range, seqOf } from "./test-helpers.js";

// A sequence's output tokens: appending, reading back and the refusals. Expected values are
// derived by hand beside them.

describe("appendToken", () => {
  it("takes every u32 token id and refuses the rest", () => {
    const m = manager(8, [group("full_attention", 4)]);
    const seq = seqOf(m, "a", [1]);
    // The ends of the u32 range: 0 and 2^32 - 1 = 4,294,967,295.
    seq.appendToken(0);
    seq.appendToken(0xffffffff);
    expect(seq.numTokens).toBe(3); // 1 prompt + 2 outputs
    for (const bad of [-1, 2 ** 32, 1.5, Number.NaN]) {
      expect(() => {
        seq.appendToken(bad);
      }).toThrow(new RangeError(`token id ${bad} is not a u32`));
    }
    expect(seq.numTokens).toBe(3);
  });

  it("keeps every output past the first 16 (its buffer grows): a later prompt of the same tokens hits them", () => {
    const m = manager(40, [group("full_attention", 4)]);
    // Prompt [0..3], then 36 outputs 4..39: 40 tokens, past the 16 and 32 outputs where the buffer doubles.
    const a = seqOf(m, "a", range(0, 4));
    for (let t = 4; t < 40; t++) a.appendToken(t);
    expect(a.numPromptTokens).toBe(4);
    expect(a.numTokens).toBe(40);
    // All 40 tokens in one step: cdiv(40, 4) = 10 blocks, all full, all cached at commit.
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 40 })).toBe(true);
    m.commitComputed(a, 40);
    // A prompt of tokens 0..40 (41 tokens): a hit is at most 40 tokens = 10 blocks, all held by a.
    expect(admit(m, seqOf(m, "b", range(0, 41)))).toEqual({ ok: true, hit: 40 });
  });
});

describe("SequenceChain.ensure", () => {
  it("hashes exactly min(numBlocks, the sequence's full blocks): never fewer, never more", () => {
    const m = manager(8, [group("full_attention", 4)]);
    const seq = seqOf(m, "a", range(0, 6));
    if (!(seq instanceof Sequence)) throw new Error("a KvCacheManager's sequences are Sequence instances");
    for (let t = 6; t < 14; t++) seq.appendToken(t);
    // 6 prompt + 8 outputs = 14 tokens: floor(14 / 4) = 3 full blocks; the prompt's own chain
    // has floor(6 / 4) = 1.
    const chain = seq.chain(4);
    expect(chain.length).toBe(1);
    // Asked for 2 of the 3: min(2, 3) = 2 (block 2 stays unhashed until asked for).
    expect(chain.ensure(2).length).toBe(2);
    // Asked past the end: min(5, 3) = 3, no block past the 14 tokens. (Through KvCacheManager the
    // ask never passes the full blocks; the property tests ask for Number.MAX_SAFE_INTEGER.)
    expect(chain.ensure(5).length).toBe(3);
  });

  it("a path prompt's output block that starts inside the prompt reads the prompt's last tokens, built or not", () => {
    const m = manager(8, [group("full_attention", 4)]);
    // Path [7, 9], 3 tokens per id, 6 tokens: [7, 7, 7, 9, 9, 9]. At block size 4 its chain holds
    // floor(6 / 4) = 1 block, so output block 1 is [9, 9, out0, out1]: tokens 4 and 5 come from the
    // prompt's tail from token 1 x 4 = 4 on (its tokens are never built here).
    const a = m.createSequence("a", createPathPrompt(Uint32Array.of(7, 9), 6, 3));
    a.appendToken(100);
    a.appendToken(101);
    // 8 tokens, one step: 2 blocks, both cached at commit (block 1 = [9, 9, 100, 101]).
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    // An equal path prompt whose tokens were built (read through `tokens`), the same outputs and one
    // more (9 tokens): a hit is at most floor((9 - 1) / 4) = 2 blocks, block 0 by the equal path
    // key and block 1 by the key of the same tokens [9, 9, 100, 101] on it: 2 x 4 = 8 tokens.
    const p = createPathPrompt(Uint32Array.of(7, 9), 6, 3);
    expect(Array.from(p.tokens)).toEqual([7, 7, 7, 9, 9, 9]);
    const b = m.createSequence("b", p);
    for (const t of [100, 101, 102]) b.appendToken(t);
    expect(m.findPrefixHit(b).tokens).toBe(8);
  });
});
