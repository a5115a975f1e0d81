import { describe, expect, it } from "vitest";
import type { KvEvent } from "./contract.js";
import { group, manager, range, seqOf } from "./test-helpers.js";

// The managers' hit, free and cache rules at their edges: duplicate keys in stored runs, hit types,
// steps that need fewer blocks, repeated commits, the Mamba-type quiet horizon. Every expected value
// is derived by hand in the comment beside it, from the rules in docs/rules/grouped-pd.md and
// docs/rules/vllm-scheduling.md §3-4.

type Stored = Extract<KvEvent, { type: "stored" }>;
const storedOf = (events: readonly KvEvent[]): Stored[] => events.filter((e): e is Stored => e.type === "stored");

describe("stored runs: a block whose key is already cached (a duplicate) ends the run", () => {
  it("new, new, duplicate, new: two runs, the second naming the duplicate's key as parent", () => {
    // One window group, B 4, W 4 (a hit needs cdiv(3, 4) = 1 block); 7 pages = 6 usable.
    const m = manager(7, [group("sliding_window", 4, { window_tokens: 4 })], { events: true });
    const a = seqOf(m, "a", range(0, 13));
    // A prefills [0, 12): 3 blocks (untouched pages), then caches keys h0, h1, h2 in one run.
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 12 })).toBe(true);
    m.commitComputed(a, 12);
    const first = storedOf(m.takeEvents());
    expect(first).toHaveLength(1);
    const [h0, h1, h2] = first[0]!.blocks.map((b) => b.blockHash);
    // A's decode step at 12: S(12) = 12 - 4 + 1 = 9 tokens skipped, floor(9 / 4) = 2 blocks below
    // the window: blocks 0 and 1 go back to the free queue, still cached. 13 tokens need a 4th
    // block. A took 4 pages and holds 2 (block 2, key h2, and block 3); free: 2 untouched + 2 cached.
    expect(m.allocateSlots(a, { computedTokens: 12, newTokens: 1 })).toBe(true);
    m.commitComputed(a, 13);
    // E: A's 12 tokens, then 4 others; computed from 0 (no hit taken). Its 4 blocks are all 4 free
    // pages, so keys h0 and h1 are evicted; h2 is still cached (A holds that block).
    const e = seqOf(m, "e", [...range(0, 12), 100, 101, 102, 103]);
    expect(m.allocateSlots(e, { computedTokens: 0, newTokens: 16 })).toBe(true);
    m.takeEvents();
    m.commitComputed(e, 16);
    // Blocks 0, 1: new keys h0, h1 (one run from the start). Block 2: h2 is cached, a duplicate
    // copy: it ends the run. Block 3: a new key, a run of its own whose parent is block 2's key.
    const runs = storedOf(m.takeEvents());
    expect(runs.map((r) => ({ parent: r.parentHash, blocks: r.blocks.map((b) => b.blockHash) }))).toEqual([
      { parent: null, blocks: [h0, h1] },
      { parent: h2, blocks: [runs[1]!.blocks[0]!.blockHash] },
    ]);
    expect([h0, h1, h2]).not.toContain(runs[1]!.blocks[0]!.blockHash);
  });

  it("a Mamba-type state whose key is already cached is a duplicate copy: no stored event", () => {
    // Full attention and a Mamba-type state, B 4. Two sequences with one 8-token prompt are
    // allocated in the same step (neither can hit the other), then committed in turn.
    const m = manager(20, [group("full_attention", 4), group("state", 4)], { events: true });
    const a = seqOf(m, "a", range(0, 8));
    const b = seqOf(m, "b", range(0, 8));
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 8 })).toBe(true);
    expect(m.allocateSlots(b, { computedTokens: 0, newTokens: 8 })).toBe(true);
    m.commitComputed(a, 8);
    // A: full attention stores blocks 0 and 1; the state at 8 = 2 x 4 is stored under block 1's key.
    expect(storedOf(m.takeEvents()).map((e) => e.groupIndex)).toEqual([0, 1]);
    // B: every key it would store is cached already (A's copies): duplicates, no event in either group.
    m.commitComputed(b, 8);
    expect(m.takeEvents()).toEqual([]);
  });
});

describe("hit types: groups are searched together only when their hit rule is the same", () => {
  it("two window groups of one block size but windows 8 and 4 are searched separately", () => {
    // B 4. Group 0: W 8, a hit needs cdiv(7, 4) = 2 blocks; group 1: W 4, needs cdiv(3, 4) = 1.
    // 10 pages = 9 usable.
    const m = manager(10, [group("sliding_window", 4, { window_tokens: 8 }), group("sliding_window", 4, { window_tokens: 4 })]);
    const a = seqOf(m, "a", range(0, 13));
    // A prefills [0, 12): 3 blocks per group (6 pages), keys h0, h1, h2 cached in both groups.
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 12 })).toBe(true);
    m.commitComputed(a, 12);
    // A's decode step at 12: group 0 skips S = 12 - 8 + 1 = 5 tokens, floor(5 / 4) = 1 block
    // (block 0 freed); group 1 skips S = 9, 2 blocks (blocks 0, 1 freed). One new block each: 8 pages
    // taken, 3 of them freed (cached): free 1 untouched + 3 cached.
    expect(m.allocateSlots(a, { computedTokens: 12, newTokens: 1 })).toBe(true);
    m.commitComputed(a, 13);
    // X (5 other tokens) takes cdiv(5, 4) = 2 blocks per group = all 4 free pages: the 3 freed keys
    // are evicted. Left cached: group 0 h1, h2; group 1 h2 (the blocks A holds).
    const x = seqOf(m, "x", range(500, 505));
    expect(m.allocateSlots(x, { computedTokens: 0, newTokens: 5 })).toBe(true);
    // A 13-token prompt with A's first 12: a hit of at most 12 tokens (3 blocks). Group 0: blocks 2
    // and 1 are cached, a run of 2 = its need: 3 blocks. Group 1 (bound 12): block 2, a run of 1:
    // 3 blocks. 12 tokens. (Searched as one type with group 0's rule, block 1 would have to be
    // cached in group 1 too, and the hit would be 0.)
    expect(m.findPrefixHit(seqOf(m, "p", range(0, 13))).tokens).toBe(12);
  });

  it("two Mamba-type groups of block sizes 4 and 8 are searched separately", () => {
    const m = manager(20, [group("state", 4), group("state", 8)]);
    const a = seqOf(m, "a", range(0, 16));
    // A prefills 16 tokens in one chunk: 16 is a multiple of 4 and of 8, so group 0 caches the
    // state under its block 3's key (blocks of 4) and group 1 under its block 1's key (blocks of 8).
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 16 })).toBe(true);
    m.commitComputed(a, 16);
    // A 17-token prompt with A's 16: at most 16 tokens, alignment lcm(4, 8) = 8. Group 0: block 3
    // (16 tokens, 16 % 8 = 0) is cached. Group 1 (bound 16): block 1 (16 tokens) is cached. 16.
    // (Searched as one type with group 0's blocks of 4, group 1 would never hold those keys: 0.)
    expect(m.findPrefixHit(seqOf(m, "p", range(0, 17))).tokens).toBe(16);
  });
});

describe("a step that needs fewer blocks than the sequence holds", () => {
  it("takes none and keeps every held block (vLLM: num_new_blocks <= 0 allocates nothing)", () => {
    // Full attention, B 4, 20 pages = 19 usable; a 12-token sequence.
    const m = manager(20, [group("full_attention", 4)]);
    const s = seqOf(m, "a", range(0, 12));
    // A step for [0, 9): cdiv(9, 4) = 3 blocks. Only 6 tokens are committed (the rest rejected).
    expect(m.allocateSlots(s, { computedTokens: 0, newTokens: 9 })).toBe(true);
    m.commitComputed(s, 6);
    // The next step [6, 7) needs cdiv(7, 4) = 2 blocks; the sequence holds 3: none taken, none given back.
    expect(m.pagesNeeded(s, { computedTokens: 6, newTokens: 1 })).toBe(0);
    expect(m.allocateSlots(s, { computedTokens: 6, newTokens: 1 })).toBe(true);
    expect(m.heldBlocks(s)).toEqual([3]);
    expect(m.metrics()).toMatchObject({ usedPages: 3, freePages: 19 - 3 });
  });
});

describe("caching: a commit of fewer full blocks than already cached changes nothing", () => {
  it("the cached count stays (vLLM: num_cached_blocks >= num_full_blocks returns), so the quiet horizon does", () => {
    // Full attention, B 4; a 9-token prompt: 3 blocks, commit 9 caches floor(9 / 4) = 2 blocks.
    const m = manager(20, [group("full_attention", 4)]);
    const s = seqOf(m, "a", range(0, 9));
    expect(m.allocateSlots(s, { computedTokens: 0, newTokens: 9 })).toBe(true);
    m.commitComputed(s, 9);
    // A commit of 4 tokens: 1 full block, fewer than the 2 cached: nothing changes.
    m.commitComputed(s, 4);
    s.appendToken(7);
    // Decode from 9 (10 tokens): allocation bound 3 x 4 - 9 = 3 steps; caching bound: block 2 fills
    // when 9 + k + 1 = 12, k = 2, so (2 + 1) x 4 - 9 - 1 = 2 quiet steps (with 1 cached block the
    // bound would be 2 x 4 - 9 - 1 < 0: none).
    expect(m.quietDecodeSteps(s, 9)).toBe(2);
    expect(m.metrics()).toMatchObject({ usedPages: 3 });
  });
});

describe("Mamba-type quiet horizon: the previous state block is kept until the step after it was passed", () => {
  it("asked between a step's allocation and its commit: 1 quiet step, then the release", () => {
    // One Mamba-type state, B 4, 20 pages; a 9-token sequence.
    const m = manager(20, [group("state", 4)]);
    const s = seqOf(m, "a", range(0, 9));
    // Prefill [0, 8): cdiv(8, 4) = 2 entries [null, r1]; 8 = 2 x 4, so r1's state is cached.
    expect(m.allocateSlots(s, { computedTokens: 0, newTokens: 8 })).toBe(true);
    m.commitComputed(s, 8);
    // The step [8, 9) is allocated: cdiv(9, 4) = 3 entries, a new running block r2; r1 (index 1)
    // becomes the previous state. Not committed yet.
    expect(m.allocateSlots(s, { computedTokens: 8, newTokens: 1 })).toBe(true);
    // From 8: a new running block once cdiv(8 + k + 1, 4) > 3: 3 x 4 - 8 = 4 steps; the running
    // block is cached when 8 + k + 1 is a multiple of 4: k = 3; the previous state (index 1) is
    // released at the step from 8 + k once cdiv(8 + k, 4) - 1 > 1, i.e. k >= 1: (1 + 1) x 4 - 8 + 1
    // = 1. min(4, 3, 1) = 1.
    expect(m.quietDecodeSteps(s, 8)).toBe(1);
    const held = (): readonly number[] => m.heldBlocks(s);
    // Step 0 (repeats the allocation, commits 9): nothing moves; r1 and r2 held.
    expect(m.allocateSlots(s, { computedTokens: 8, newTokens: 1 })).toBe(true);
    m.commitComputed(s, 9);
    expect(held()).toEqual([2]);
    // Step 1 from 9: cdiv(9, 4) - 1 = 2 > 1: r1 is released.
    s.appendToken(7);
    expect(m.allocateSlots(s, { computedTokens: 9, newTokens: 1 })).toBe(true);
    expect(held()).toEqual([1]);
  });
});
