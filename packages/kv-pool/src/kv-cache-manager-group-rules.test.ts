import { describe, expect, it } from "vitest";
import { createPromptTokens } from "./prompt-tokens.js";
import { admit, group, manager, range, seqOf } from "./test-helpers.js";

// KvCacheManager rules across cache groups: the hybrid hit, groups that cannot be prefix-cached,
// Mamba-type chunking, destination reservation, long hits and quiet decodes. Expected values are
// derived by hand in the comments (docs/rules/grouped-pd.md; docs/rules/vllm-scheduling.md §4.4
// for the hybrid hit).

describe("a hybrid hit ends on the least common multiple of the hit types' block sizes", () => {
  it("a window hit below an evicted block stops at a multiple of lcm(2, 3) = 6, not of its own block size 3", () => {
    // Groups: sliding window B 3, W 4 (a hit needs cdiv(3, 3) = 1 cached block before its end), and
    // full attention B 2. 13 pages: 12 usable.
    const m = manager(13, [group("sliding_window", 3, { window_tokens: 4 }), group("full_attention", 2)]);
    // a: 12 tokens in one step: window cdiv(12, 3) = 4 pages, attention cdiv(12, 2) = 6 pages;
    // 10 taken, 2 never used. The commit caches all 4 + 6 full blocks.
    const a = seqOf(m, "a", range(0, 12));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    // Freed in group order, each table tail first: the free queue is
    // [2 never-used pages, W3, W2, W1, W0, A5, ..., A0].
    m.free(a);
    // e: 3 other tokens, no hit: window 1 page + attention cdiv(3, 2) = 2 pages = 3 pages from the
    // queue's head: the 2 never-used pages and W3 (window block 3, tokens 9..11, evicted).
    const e = seqOf(m, "e", [500, 501, 502]);
    expect(admit(m, e)).toEqual({ ok: true, hit: 0 });
    // q: a's 12 tokens and one more; a hit is at most 12 tokens. Alignment lcm(3, 2) = 6.
    // Attention first: its 6 cached blocks = 12 tokens, 12 % 6 = 0 -> 12.
    // Window within 12: floor(12 / 3) = 4 blocks; block 3 is gone; block 2 ends at 9, and 9 % 6 != 0,
    // so no hit may end there; block 1 ends at 6 (6 % 6 = 0) and is cached: a run of 1 >= 1 -> 6 tokens.
    // Full attention plus one other type: the hit is 6 tokens.
    const q = seqOf(m, "q", [...range(0, 12), 77]);
    expect(m.findPrefixHit(q).tokens).toBe(6);
  });
});

describe("a window group that is not prefix-cacheable makes every hit 0", () => {
  it("the attention group's cached blocks alone give no hit", () => {
    // Full attention B 2 (cacheable) and a sliding window B 2, W 4 that is not: the window never caches,
    // and a hit needs the window's cdiv(3, 2) = 2 cached blocks before its end, so no hit exists.
    const m = manager(12, [group("full_attention", 2), group("sliding_window", 2, { window_tokens: 4, prefix_cacheable: false })]);
    // a: 8 tokens: attention 4 blocks (cached), window 4 blocks (not cached). Freed.
    const a = seqOf(m, "a", range(0, 8));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    m.free(a);
    // b: the same 8 tokens and one more: attention alone would hit 8 tokens; the window holds none.
    const b = seqOf(m, "b", [...range(0, 8), 9]);
    expect(m.findPrefixHit(b).tokens).toBe(0);
    expect(m.peekPrefixHitTokens(createPromptTokens(Uint32Array.from([...range(0, 8), 9])))).toBe(0);
  });
});

describe("prefill chunks run unchanged to the prompt's end only when every Mamba-type group takes checkpoint blocks", () => {
  it("one Mamba-type group with checkpoint blocks and one without: align_split", () => {
    // vLLM 0.32.0, caching on: group m1 takes 1 checkpoint block, m2 none. m2's state can be cached only at a
    // chunk end on a block boundary, so every chunk is still cut (align_split), not just the earlier ones.
    const m = manager(10, [group("full_attention", 16), group("state", 16, { name: "m1", prefill_checkpoint_blocks: 1 }), group("state", 16, { name: "m2" })], {
      version: "0.32.0",
    });
    expect(m.prefillChunking).toBe("align_split");
  });
});

describe("destination reservation counts only fresh and evictable blocks against the free pages", () => {
  it("hit blocks another sequence holds take no free page", () => {
    // Full attention B 4, 6 pages: 5 usable. w holds tokens 0..15: 4 pages (refcount 1, not evictable); 1 free.
    const m = manager(6, [group("full_attention", 4)]);
    const w = seqOf(m, "w", range(0, 16));
    expect(admit(m, w)).toEqual({ ok: true, hit: 0 });
    expect(m.metrics().freePages).toBe(1);
    // dst: the same 16 tokens, T = 16: the local hit is at most min(15, 16) = 15 tokens -> 3 blocks = 12,
    // all held by w. Plan: 3 hit blocks (not evictable: 0 pages) + cdiv(16, 4) - 3 = 1 fresh -> 1 page <= 1 free.
    // Missing 4 - 3 = 1 block; reserved pages: 4 real entries.
    const dst = seqOf(m, "dst", range(0, 16));
    expect(m.reserveDestination(dst, 16)).toEqual({ hitTokens: 12, missingFullAttentionBlocks: 1, reservedPages: 4 });
    expect(m.metrics().freePages).toBe(0);
  });
});

describe("a prefix hit longer than one validation batch (1,024 blocks) is checked block by block", () => {
  it("a hit of 1,099 blocks is taken", () => {
    // Full attention B 1, 1,102 pages: 1,101 usable. a: 1,100 tokens = 1,100 pages, all cached; freed (evictable).
    const m = manager(1102, [group("full_attention", 1)]);
    const a = seqOf(m, "a", range(0, 1100));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    m.free(a);
    // b: the same 1,100 tokens: the hit is at most 1,099 tokens = 1,099 blocks, still holding their keys
    // (1,024 checked in the first batch, 75 in the second). Then 1 new token: 1 fresh page; 1,099
    // evictable hit pages + 1 fresh = 1,100 <= 1,101 free.
    const b = seqOf(m, "b", range(0, 1100));
    expect(admit(m, b)).toEqual({ ok: true, hit: 1099 });
    expect(m.metrics().freePages).toBe(1);
  });
});

describe("without prefix caching a window group caches nothing, so only its table bounds a quiet decode", () => {
  it("a window of 64 tokens, B 4, 6 tokens held: 2 quiet steps", () => {
    // Caching off: one sliding window B 4, W 64. a: 6 prompt tokens in one step: cdiv(6, 4) = 2 blocks.
    const m = manager(10, [group("sliding_window", 4, { window_tokens: 64 })], { caching: false });
    const a = seqOf(m, "a", range(0, 6));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    // Decode from computed 6 (7 tokens): step k needs cdiv(6 + k + 1, 4) blocks: k = 0 -> 2, k = 1 -> 2,
    // k = 2 -> 3 > 2. Nothing is cached (caching off), and S(6 + k) = max(0, 6 + k - 63) = 0 moves no
    // block out of the window for 57 more steps: 2 quiet steps.
    a.appendToken(50);
    expect(m.quietDecodeSteps(a, 6)).toBe(2);
  });
});
