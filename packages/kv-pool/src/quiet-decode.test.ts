import { describe, expect, it } from "vitest";
import { admit, group, manager, range, seqOf } from "./test-helpers.js";

/** Prefills a prompt in one step and samples its first token (the step path's order). */
function prefilled(m: ReturnType<typeof manager>, id: string, promptTokens: number) {
  const seq = seqOf(m, id, range(1000, 1000 + promptTokens));
  expect(admit(m, seq).ok).toBe(true);
  m.commitComputed(seq, promptTokens);
  seq.appendToken(7);
  return seq;
}

describe("quietDecodeSteps: the single-token steps that leave the pool untouched", () => {
  it("full attention, B 4: quiet until a new block is needed or a block fills", () => {
    const m = manager(20, [group("full_attention", 4)]);
    // Prompt 6 tokens: cdiv(6, 4) = 2 blocks, 1 full block cached; 7 tokens after the first output.
    const seq = prefilled(m, "a", 6);
    // Step 0 computes token 6 (7 tokens): floor(7/4) = 1 block full, still 1 cached: quiet.
    // Step 1 computes token 7 (8 tokens): block 2 fills (cached): not quiet. So 1 quiet step.
    expect(m.quietDecodeSteps(seq, 6)).toBe(1);
    // Not a decode position (6 computed of 8 tokens once another token is appended): none.
    seq.appendToken(8);
    expect(m.quietDecodeSteps(seq, 6)).toBe(0);
  });

  it("full attention, B 4, prompt on a block boundary: the next token needs a block at once", () => {
    const m = manager(20, [group("full_attention", 4)]);
    // Prompt 8 tokens: 2 full blocks; computing token 8 needs cdiv(9, 4) = 3 > 2 blocks.
    const seq = prefilled(m, "a", 8);
    expect(m.quietDecodeSteps(seq, 8)).toBe(0);
    // After that step (allocate, compute, sample), tokens 9 and 10 are quiet; token 11 fills block 3.
    expect(m.allocateSlots(seq, { computedTokens: 8, newTokens: 1 })).toBe(true);
    m.commitComputed(seq, 9);
    seq.appendToken(9);
    expect(m.quietDecodeSteps(seq, 9)).toBe(2);
  });

  it("without prefix caching only allocations count", () => {
    const m = manager(20, [group("full_attention", 4)], { caching: false });
    // Prompt 5 tokens: 2 blocks cover 8 tokens; tokens 5, 6, 7 fit, token 8 needs block 3.
    const seq = prefilled(m, "a", 5);
    expect(m.quietDecodeSteps(seq, 5)).toBe(3);
  });

  it("a sequence that holds no blocks is never quiet", () => {
    const m = manager(20, [group("full_attention", 4)]);
    const seq = seqOf(m, "a", range(0, 5));
    expect(m.quietDecodeSteps(seq, 4)).toBe(0);
  });
});
