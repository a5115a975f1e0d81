import { describe, expect, it } from "vitest";
import { poolOf } from "./kv-cache-manager.js";
import { createPathPrompt } from "./prompt-tokens.js";
import { admit, group, manager, range, seqOf, tablesOf } from "./test-helpers.js";

// A sequence's chain and group state over its life (outputs appended step by step,
// a prompt shorter than a block, a free and a second admission). Expected values by hand.

const FA4 = group("full_attention", 4);

describe("a sequence's output blocks", () => {
  it("hashes outputs appended one step at a time, past the 16 and 32 where their buffer grows", () => {
    const m = manager(16, [FA4]);
    // Prompt [0..3] (1 block), then outputs 4..39 one per decode step, committed each step.
    const a = seqOf(m, "a", range(0, 4));
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 4 })).toBe(true);
    m.commitComputed(a, 4);
    for (let t = 4; t < 40; t++) {
      a.appendToken(t);
      expect(m.allocateSlots(a, { computedTokens: t, newTokens: 1 })).toBe(true);
      m.commitComputed(a, t + 1);
    }
    // 40 tokens = 10 full blocks, all cached. A prompt of tokens 0..40 (41 tokens) hits all 40.
    expect(m.heldBlocks(a)).toEqual([10]);
    expect(admit(m, seqOf(m, "b", range(0, 41)))).toEqual({ ok: true, hit: 40 });
  });

  it("chains the first output block from nothing when the prompt holds no whole block", () => {
    const m = manager(16, [FA4]);
    // Prompt [0, 1]: floor(2 / 4) = 0 prompt blocks. Outputs 2..7 make blocks [0..3] and [4..7].
    const a = seqOf(m, "a", [0, 1]);
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 2 })).toBe(true);
    for (let t = 2; t < 8; t++) a.appendToken(t);
    expect(m.allocateSlots(a, { computedTokens: 2, newTokens: 6 })).toBe(true);
    m.commitComputed(a, 8);
    // Block 0 of a is hashed as the first block of a chain, as a prompt of [0..3] would be:
    // a prompt [0..8] (9 tokens) hits both blocks, 8 tokens.
    expect(admit(m, seqOf(m, "b", range(0, 9)))).toEqual({ ok: true, hit: 8 });
  });

  it("a path prompt's outputs match the outputs of an equal path prompt, after a prompt shorter than a block", () => {
    const m = manager(16, [FA4]);
    // ids [9] at unit 4, length 2: tokens 9 9, no whole block. Outputs 1..6 (8 tokens, 2 blocks).
    const run = (id: string): ReturnType<typeof seqOf> => {
      const s = m.createSequence(id, createPathPrompt(Uint32Array.from([9]), 2, 4));
      expect(m.allocateSlots(s, { computedTokens: 0, newTokens: 2 })).toBe(true);
      for (let t = 1; t <= 6; t++) s.appendToken(t);
      return s;
    };
    const a = run("a");
    expect(m.allocateSlots(a, { computedTokens: 2, newTokens: 6 })).toBe(true);
    m.commitComputed(a, 8);
    // b has the same 8 tokens (9 9 1 2 | 3 4 5 6): its longest hit is at most 8 - 1 = 7 tokens,
    // so 1 whole block = 4 tokens.
    const b = run("b");
    expect(m.findPrefixHit(b).tokens).toBe(4);
  });
});

describe("a sequence freed and admitted again", () => {
  it("starts with an empty table and caches its blocks anew when its old ones were evicted", () => {
    // 4 pages (3 usable), B 4.
    const m = manager(4, [FA4]);
    const pool = poolOf(m);
    const a = seqOf(m, "a", range(0, 8));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 }); // blocks 1, 2 (cached)
    expect(tablesOf(a)).toEqual([[1, 2]]);
    m.free(a); // tail first to the back: queue [3, 2, 1]
    expect(m.heldBlocks(a)).toEqual([0]);
    expect(tablesOf(a)).toEqual([[]]);
    // x takes all 3 pages, evicting 2 and 1; then frees them (unhashed tail block 1 to the front).
    const x = seqOf(m, "x", range(100, 110));
    expect(admit(m, x)).toEqual({ ok: true, hit: 0 });
    m.free(x);
    // a again: no hit left; 8 tokens take 2 fresh pages and are cached again at commit.
    expect(m.findPrefixHit(a).tokens).toBe(0);
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 8 })).toBe(true);
    m.commitComputed(a, 8);
    expect(m.heldBlocks(a)).toEqual([2]);
    const [t] = tablesOf(a);
    expect(t!.map((blk) => pool.isHashed(blk))).toEqual([true, true]);
    // A prompt [0..8] hits both blocks.
    expect(admit(m, seqOf(m, "b", range(0, 9)))).toEqual({ ok: true, hit: 8 });
  });

  it("takes its own cached prefix as a hit at its next admission", () => {
    const m = manager(8, [FA4]);
    const pool = poolOf(m);
    // 9 tokens: cdiv(9, 4) = 3 blocks 1, 2, 3; floor(9 / 4) = 2 cached (1, 2).
    const a = seqOf(m, "a", range(0, 9));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    m.free(a); // tail first: 3 (unhashed) to the front, 2 and 1 (hashed) to the back
    expect(pool.freeQueueOrder()).toEqual([3, 4, 5, 6, 7, 2, 1]);
    // Nothing is allocated to a freed sequence: a commit of its 9 tokens is refused.
    expect(() => {
      m.commitComputed(a, 9);
    }).toThrow(new RangeError("sequence a: 9 computed exceeds the 0 allocated"));
    // Its hit: at most 9 - 1 = 8 tokens, floor(8 / 4) = 2 blocks, both still cached.
    const hit = m.findPrefixHit(a);
    expect(hit.tokens).toBe(8);
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 1, hit })).toBe(true);
    // Blocks 1 and 2 touched again, one fresh block from the front: 3.
    expect(tablesOf(a)).toEqual([[1, 2, 3]]);
    expect(m.heldBlocks(a)).toEqual([3]);
  });

  it("a reserved sequence freed before activation can reserve again", () => {
    const m = manager(8, [FA4]);
    const s = seqOf(m, "s", range(0, 8));
    // cdiv(8, 4) = 2 fresh pages, twice: the free in between returns them.
    expect(m.reserveDestination(s, 8)?.reservedPages).toBe(2);
    m.free(s);
    expect(m.metrics().freePages).toBe(7);
    expect(m.reserveDestination(s, 8)?.reservedPages).toBe(2);
    expect(m.metrics().freePages).toBe(5);
  });
});
