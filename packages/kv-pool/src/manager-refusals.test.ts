import { describe, expect, it } from "vitest";
import { KvCacheManager } from "./kv-cache-manager.js";
import { group, manager, range, seqOf } from "./test-helpers.js";

// The manager's refusals, each with the message that names what was wrong (checked by the whole
// message, not only by its type). Expected messages are written out.

const FA4 = group("full_attention", 4);

describe("KvCacheManager construction refusals", () => {
  it("needs a group, at least 2 pages and positive integer block sizes", () => {
    const opts = { enablePrefixCaching: true, vllmVersion: "0.31.0" };
    expect(() => new KvCacheManager({ ...opts, numPages: 8, groups: [] })).toThrow(new RangeError("a pool needs at least one cache group"));
    // Page 0 is the null page: 2 pages is the least (1 usable).
    expect(() => new KvCacheManager({ ...opts, numPages: 1, groups: [FA4] })).toThrow(new RangeError("numPages must be an integer >= 2, got 1"));
    expect(() => new KvCacheManager({ ...opts, numPages: 2.5, groups: [FA4] })).toThrow(new RangeError("numPages must be an integer >= 2, got 2.5"));
    expect(new KvCacheManager({ ...opts, numPages: 2, groups: [FA4] }).metrics().usablePages).toBe(1);
    // The second group's block size is named by its index.
    expect(() => new KvCacheManager({ ...opts, numPages: 8, groups: [FA4, group("full_attention", 0)] })).toThrow(
      new RangeError("groups[1].block_size_tokens must be an integer >= 1, got 0"),
    );
    expect(new KvCacheManager({ ...opts, numPages: 8, groups: [group("full_attention", 1)] }).metrics().usablePages).toBe(7);
  });
});

describe("KvCacheManager call refusals", () => {
  it("a step's counts: computed >= 0, new >= 1, and computed + new at most the sequence's tokens", () => {
    const m = manager(8, [FA4]);
    const s = seqOf(m, "s", range(0, 6));
    expect(() => m.allocateSlots(s, { computedTokens: -1, newTokens: 2 })).toThrow(new RangeError("computedTokens must be an integer >= 0, got -1"));
    expect(() => m.allocateSlots(s, { computedTokens: 0, newTokens: 0 })).toThrow(new RangeError("newTokens must be an integer >= 1, got 0"));
    // 2 computed + 5 new = 7 > 6 tokens.
    expect(() => m.allocateSlots(s, { computedTokens: 2, newTokens: 5 })).toThrow(new RangeError("sequence s: 2 computed + 5 new exceeds its 6 tokens"));
    expect(() => m.pagesNeeded(s, { computedTokens: 2, newTokens: 5 })).toThrow(new RangeError("sequence s: 2 computed + 5 new exceeds its 6 tokens"));
    // 6 = 6 is allowed: cdiv(6, 4) = 2 pages.
    expect(m.pagesNeeded(s, { computedTokens: 2, newTokens: 4 })).toBe(2);
    expect(m.metrics().freePages).toBe(7); // nothing taken by the refusals
  });

  it("a hit must be this manager's, and only at first admission", () => {
    const m = manager(16, [FA4]);
    const other = manager(16, [FA4]);
    const a = seqOf(m, "a", range(0, 9));
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 9 })).toBe(true);
    m.commitComputed(a, 9); // blocks 0 and 1 (tokens 0..7) cached
    // b's hit: floor(8 / 4) = 2 blocks, 8 tokens.
    const b = seqOf(m, "b", range(0, 10));
    const hit = m.findPrefixHit(b);
    expect(hit.tokens).toBe(8);
    // The same hit handed to another manager's sequence.
    const ob = seqOf(other, "ob", range(0, 10));
    expect(() => other.allocateSlots(ob, { computedTokens: 0, newTokens: 2, hit })).toThrow(
      new Error("a prefix hit must come from this manager's findPrefixHit"),
    );
    // A look-alike object is refused too.
    expect(() => m.allocateSlots(b, { computedTokens: 0, newTokens: 2, hit: { tokens: 8 } })).toThrow(
      new Error("a prefix hit must come from this manager's findPrefixHit"),
    );
    // a already holds blocks: a hit is refused at its later steps.
    a.appendToken(50);
    expect(() => m.allocateSlots(a, { computedTokens: 9, newTokens: 1, hit })).toThrow(
      new Error("sequence a already holds blocks: a hit is taken only at first admission"),
    );
    // A hit of 0 tokens is no hit, whoever made it.
    expect(m.allocateSlots(b, { computedTokens: 0, newTokens: 10, hit: other.findPrefixHit(ob) })).toBe(true);
  });

  it("commits no more than was allocated", () => {
    const m = manager(8, [FA4]);
    const s = seqOf(m, "s", range(0, 8));
    expect(m.allocateSlots(s, { computedTokens: 0, newTokens: 5 })).toBe(true);
    expect(() => {
      m.commitComputed(s, 6);
    }).toThrow(new RangeError("sequence s: 6 computed exceeds the 5 allocated"));
    expect(() => {
      m.commitComputed(s, -1);
    }).toThrow(new RangeError("computedTokens must be an integer >= 0, got -1"));
    m.commitComputed(s, 5); // 5 = 5 is allowed
  });

  it("a destination reservation: at least one token, at most the sequence's, once, and activated at its size", () => {
    const m = manager(16, [FA4]);
    const s = seqOf(m, "s", range(0, 8));
    expect(() => m.reserveDestination(s, 0)).toThrow(new RangeError("transferredTokens must be an integer >= 1, got 0"));
    expect(() => m.reserveDestination(s, 9)).toThrow(new RangeError("sequence s: 9 transferred exceeds its 8 tokens"));
    // 8 tokens: cdiv(8, 4) = 2 fresh pages.
    expect(m.reserveDestination(s, 8)).toEqual({ hitTokens: 0, missingFullAttentionBlocks: 2, reservedPages: 2 });
    expect(() => m.reserveDestination(s, 8)).toThrow(new Error("sequence s already holds blocks on this rank"));
    expect(() => m.allocateSlots(s, { computedTokens: 8, newTokens: 1 })).toThrow(
      new Error("sequence s has a pending destination reservation: activate it first"),
    );
    expect(() => {
      m.activateDestination(s, 4);
    }).toThrow(new Error("sequence s: no reservation of 4 tokens to activate (reserved: 8)"));
    m.activateDestination(s, 8);
    expect(() => {
      m.activateDestination(s, 8);
    }).toThrow(new Error("sequence s: no reservation of 8 tokens to activate (reserved: -1)"));
    // A running sequence cannot reserve either.
    expect(() => m.reserveDestination(s, 8)).toThrow(new Error("sequence s already holds blocks on this rank"));
  });

  it("release at a source names a bad count", () => {
    const m = manager(8, [FA4]);
    const s = seqOf(m, "s", range(0, 4));
    expect(() => m.releaseSourceSkipped(s, 1.5)).toThrow(new RangeError("computedTokens must be an integer >= 0, got 1.5"));
  });
});
