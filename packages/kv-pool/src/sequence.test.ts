import { describe, expect, it } from "vitest";
import { admit, group, manager, range, seqOf } from "./test-helpers.js";

// A sequence's output tokens (issue 17: mutants of sequence.ts no other test killed). Expected
// values are derived by hand beside them.

describe("appendToken", () => {
  it("takes every u32 token id and refuses the rest", () => {
    const m = manager(8, [group("full_attention", 4)]);
    const seq = seqOf(m, "a", [1]);
    // The ends of the u32 range: 0 and 2^32 - 1 = 4,294,967,295.
    seq.appendToken(0);
    seq.appendToken(0xffffffff);
    expect(seq.numTokens).toBe(3); // 1 prompt + 2 outputs
    for (const bad of [-1, 2 ** 32, 1.5, Number.NaN]) {
      expect(() => { seq.appendToken(bad); }).toThrow(new RangeError(`token id ${bad} is not a u32`));
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
