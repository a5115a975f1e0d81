import { describe, expect, it } from "vitest";
import { admit, group, manager, range, seqOf } from "./test-helpers.js";

// The KvCacheManager's room check and destination reservation at their edges. Every expected value
// is derived by hand in the comment beside it (docs/rules/grouped-pd.md §4,
// docs/rules/vllm-scheduling.md §2).

describe("allocation counts only the skipped blocks that really return to the free queue", () => {
  it("a window block shared with another sequence's hit does not make room", () => {
    // One sliding window, W 4, B 2 (S(C) = max(0, C - 3); a hit needs cdiv(3, 2) = 2 blocks);
    // 5 usable pages.
    const m = manager(6, [group("sliding_window", 2, { window_tokens: 4 })]);
    // a: 8 tokens in one step: cdiv(8, 2) = 4 blocks (C = 0: nothing trimmed), all 4 cached.
    const a = seqOf(m, "a", range(0, 8));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    // b: [0, 1, 2, 3, 99]: a hit is at most 4 tokens = blocks 0 and 1, both cached (a run of 2):
    // 4 tokens; 5 tokens need cdiv(5, 2) = 3 entries: 1 new block. a's blocks 0 and 1 now have 2 users.
    const b = seqOf(m, "b", [0, 1, 2, 3, 99]);
    expect(admit(m, b)).toEqual({ ok: true, hit: 4 });
    expect(m.metrics().freePages).toBe(0); // 5 - 4 (a) - 1 (b's new block)
    // a's decode step at C = 8: 9 tokens need cdiv(9, 2) = 5 entries: 1 new page. S(8) = 5 ->
    // floor(5 / 2) = 2 blocks (0 and 1) fall below the window, but b still holds both: freeing
    // them returns no page. 1 > 0 free + 0 released: refused, nothing changes.
    a.appendToken(50);
    expect(m.pagesNeeded(a, { computedTokens: 8, newTokens: 1 })).toBe(1);
    expect(m.allocateSlots(a, { computedTokens: 8, newTokens: 1 })).toBe(false);
    expect(m.heldBlocks(a)).toEqual([4]);
    // Once b is gone they are a's alone: 1 free page + 2 released >= 1. a holds 4 - 2 + 1 = 3.
    m.free(b);
    expect(m.allocateSlots(a, { computedTokens: 8, newTokens: 1 })).toBe(true);
    expect(m.heldBlocks(a)).toEqual([3]);
  });
});

describe("destination reservation (docs/rules/grouped-pd.md §4): the local hit and the pool's room", () => {
  /** Full attention, B 4: a request of `n` tokens came and went, its n / 4 blocks cached and free (evictable). */
  function warmed(numPages: number, n: number) {
    const m = manager(numPages, [group("full_attention", 4)]);
    const w = seqOf(m, "w", range(0, n));
    expect(admit(m, w)).toEqual({ ok: true, hit: 0 });
    m.free(w);
    return m;
  }

  it("the local hit is at most N - 1 tokens, even when every block of the transfer is cached", () => {
    const m = warmed(10, 16);
    // Attention only: T = N = 16. The local hit is capped at N - 1 = 15 tokens -> floor(15 / 4) = 3
    // blocks = 12 tokens. Missing: cdiv(16, 4) - 3 = 1 block; the reservation holds 4 pages.
    const dst = seqOf(m, "dst", range(0, 16));
    expect(m.reserveDestination(dst, 16)).toEqual({ hitTokens: 12, missingFullAttentionBlocks: 1, reservedPages: 4 });
  });

  it("evictable hit blocks count against the free pages", () => {
    // Tokens 0..7 cached (2 blocks). dst = tokens 0..7 then 8 others, T = N = 16: hit min(15, 16) = 15 -> blocks 0 and 1 (8 tokens;
    // block 2 holds other tokens). Plan: 2 hit blocks (free but cached: each takes a free page) +
    // cdiv(16, 4) - 2 = 2 fresh = 4 pages.
    const prompt = [...range(0, 8), ...range(100, 108)];
    // 3 usable pages: 4 > 3, no reservation, nothing touched.
    const tight = warmed(4, 8);
    expect(tight.reserveDestination(seqOf(tight, "dst", prompt), 16)).toBeUndefined();
    expect(tight.metrics()).toMatchObject({ freePages: 3, cachedEvictablePages: 2 });
    // 4 usable pages: exactly enough.
    const m = warmed(5, 8);
    expect(m.reserveDestination(seqOf(m, "dst", prompt), 16)).toEqual({ hitTokens: 8, missingFullAttentionBlocks: 2, reservedPages: 4 });
    expect(m.metrics().freePages).toBe(0);
  });

  it("a pool without a full-attention group reports no missing full-attention blocks", () => {
    // A sliding window (W 8, B 4) and a ring: T = 10 -> window cdiv(10, 4) - floor((10 - 7) / 4) = 3 - 0
    // = 3 blocks, ring 1: 4 pages; no full-attention group, so 0 missing.
    const m = manager(10, [group("sliding_window", 4, { window_tokens: 8 }), group("state", 4, { prefix_cacheable: false })]);
    expect(m.reserveDestination(seqOf(m, "dst", range(0, 10)), 10)).toEqual({ hitTokens: 0, missingFullAttentionBlocks: 0, reservedPages: 4 });
  });
});
