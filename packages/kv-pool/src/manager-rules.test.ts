import { describe, expect, it } from "vitest";
import { BlockPool } from "./block-pool.js";
import { FullAttentionManager } from "./full-attention-manager.js";
import { GroupState } from "./sequence.js";
import { admit, group, manager, range, seqOf, setTable } from "./test-helpers.js";

// The managers' rules, one behaviour per test: each expected value comes from the rules in
// docs/rules/grouped-pd.md and docs/rules/vllm-scheduling.md, with the arithmetic beside it.

// docs/rules/dynamo.md §8.6 (XXH3-64, seed 1337): tokens [11..88] in blocks of 4.
const H0 = 4117275816416024698n; // block 0: block hash = tokens hash, parent none
const T1 = 6081346995852963768n; // block 1's tokens hash
const H1 = 5947898228081096063n; // block 1's block hash, parent H0
const TOKENS = [11, 22, 33, 44, 55, 66, 77, 88];

describe("KV events of a Mamba-type state: a cached state names the block before it as parent", () => {
  it("the running state at block 1 has parent H0; a checkpoint at block 0 has none", () => {
    // Full attention and a Mamba-type state (0.32.0, 1 checkpoint block), B 4, 8 tokens in one chunk.
    const m = manager(16, [group("full_attention", 4), group("state", 4, { prefill_checkpoint_blocks: 1 })], { version: "0.32.0", events: true });
    const seq = seqOf(m, "a", TOKENS);
    // Full: cdiv(8, 4) = 2 blocks. State: cdiv(8, 4) = 2 entries [null, running]; the chunk [0, 8)
    // reaches the end of the prompt, so 1 checkpoint for the last boundary inside it: 4 tokens
    // (the state at the end of block 0). 2 + 1 + 1 = 4 pages.
    expect(m.pagesNeeded(seq, { computedTokens: 0, newTokens: 8 })).toBe(4);
    expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: 8 })).toBe(true);
    m.commitComputed(seq, 8);
    expect(m.takeEvents()).toEqual([
      // Full attention: blocks 0 and 1 in one run from the start of the sequence.
      {
        type: "stored",
        groupIndex: 0,
        parentHash: null,
        blocks: [
          { blockHash: H0, tokensHash: H0 },
          { blockHash: H1, tokensHash: T1 },
        ],
      },
      // State: 8 = 2 x 4 ends block 1, so the running state is cached under block 1's hash; the
      // block before it is block 0 (H0).
      { type: "stored", groupIndex: 1, parentHash: H0, blocks: [{ blockHash: H1, tokensHash: T1 }] },
      // The checkpoint holds the state at 4 tokens: block 0's hash, at the start of the sequence.
      { type: "stored", groupIndex: 1, parentHash: null, blocks: [{ blockHash: H0, tokensHash: H0 }] },
    ]);
  });

  it("0.31.0: a prompt of one block caches its state at block 0 with no parent", () => {
    const m = manager(16, [group("full_attention", 4), group("state", 4)], { events: true });
    // 4 tokens: one full block; the state at 4 tokens is block 0's state.
    expect(admit(m, seqOf(m, "a", TOKENS.slice(0, 4)))).toEqual({ ok: true, hit: 0 });
    expect(m.takeEvents()).toEqual([
      { type: "stored", groupIndex: 0, parentHash: null, blocks: [{ blockHash: H0, tokensHash: H0 }] },
      { type: "stored", groupIndex: 1, parentHash: null, blocks: [{ blockHash: H0, tokensHash: H0 }] },
    ]);
  });
});

describe("vLLM 0.32.0 checkpoint blocks: only boundaries strictly inside the chunk are cached", () => {
  it("a chunk starting on a boundary gives that boundary no checkpoint (its state is already held)", () => {
    // One Mamba-type state, B 4, 2 checkpoint blocks; 19 usable pages; a 12-token prompt in two
    // chunks: [0, 4) (whole blocks, not the end of the prompt) and [4, 12) (the end).
    const m = manager(20, [group("state", 4, { prefill_checkpoint_blocks: 2 })], { version: "0.32.0" });
    const seq = seqOf(m, "a", range(0, 12));
    // Chunk 1 ends before the prompt does: no checkpoints; cdiv(4, 4) = 1 entry, the running block.
    expect(m.pagesNeeded(seq, { computedTokens: 0, newTokens: 4 })).toBe(1);
    expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: 4 })).toBe(true);
    m.commitComputed(seq, 4); // 4 = 1 x 4: the state at 4 is cached (block 0's hash)
    // Chunk 2, [4, 12): cdiv(12, 4) = 3 entries, one new running block. The last 2 boundaries at or
    // below the chunk's last block: 8 (block 1's end) is inside (8 > 4): a checkpoint; 4 is the
    // chunk's start, not inside: its slot caches nothing (the state at 4 is the previous state,
    // already cached). 1 + 2 = 3 pages.
    expect(m.pagesNeeded(seq, { computedTokens: 4, newTokens: 8 })).toBe(3);
    expect(m.allocateSlots(seq, { computedTokens: 4, newTokens: 8 })).toBe(true);
    m.commitComputed(seq, 12); // 12 = 3 x 4: the running state is cached (block 2's hash)
    // Held: the previous state (4), the running block (12), 2 checkpoint blocks = 4 pages.
    expect(m.heldBlocks(seq)).toEqual([4]);
    m.free(seq);
    // Cached among the 19 free pages: the states at 4, 8 (checkpoint) and 12; the second checkpoint
    // block holds none: 3.
    expect(m.metrics()).toMatchObject({ freePages: 19, cachedEvictablePages: 3 });
  });
});

describe("Mamba-type hit: the skipped entries before the state block are nulls, not held pages", () => {
  it("a 12-token hit holds 1 state page, then 1 running page", () => {
    // Full attention and a Mamba-type state, B 4 (0.31.0 align mode).
    const m = manager(20, [group("full_attention", 4), group("state", 4)]);
    const a = seqOf(m, "a", range(0, 13));
    // Block-aligned chunks: [0, 12) caches the state at 12 (block 2); [12, 13) ends mid-block.
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 12 })).toBe(true);
    m.commitComputed(a, 12);
    expect(m.allocateSlots(a, { computedTokens: 12, newTokens: 1 })).toBe(true);
    m.commitComputed(a, 13);
    const b = seqOf(m, "b", range(0, 13));
    // A hit is at most 13 - 1 = 12 tokens: full attention blocks 0..2 and the state at 12 agree.
    const hit = m.findPrefixHit(b);
    expect(hit.tokens).toBe(12);
    expect(m.allocateSlots(b, { computedTokens: 0, newTokens: 1, hit })).toBe(true);
    // Full: 3 hit blocks + cdiv(13, 4) - 3 = 1 new = 4. State: the hit table [null, null, s12]
    // holds 1 page, and 13 tokens need cdiv(13, 4) = 4 entries: 1 new running block: 2.
    expect(m.heldBlocks(b)).toEqual([4, 2]);
  });
});

describe("caching more than 1,024 blocks in one call (the key scratch grows)", () => {
  it("a 2,100-block prompt is cached whole: a second request hits 2,099 blocks", () => {
    // Full attention, B 1, no KV events (the batched caching path); 2,199 usable pages.
    const m = manager(2200, [group("full_attention", 1)]);
    const prompt = range(0, 2100);
    expect(admit(m, seqOf(m, "a", prompt))).toEqual({ ok: true, hit: 0 });
    // All floor(2100 / 1) = 2,100 blocks are cached in one commit; a hit is at most 2100 - 1 tokens.
    expect(m.findPrefixHit(seqOf(m, "b", prompt)).tokens).toBe(2099);
  });
});

describe("full-attention caching through any hash view (not only a sequence's packed chain)", () => {
  it("caches the computed full blocks under the view's hashes, without KV events", () => {
    const pool = new BlockPool(16, 1, false);
    const fa = new FullAttentionManager(pool, 0, group("full_attention", 2), true);
    const st = new GroupState();
    setTable(st, pool.takeFree(3));
    st.real = 3;
    // Hash i is i + 1. C = 5 tokens, B 2: floor(5 / 2) = 2 full blocks (0 and 1) are cached, the
    // third (tokens 4..5) is not full.
    fa.cacheBlocks(st, { length: 3, blockHash: (i) => BigInt(i + 1), tokensHash: (i) => BigInt(i + 1) }, 5);
    expect([pool.holds(st.blocks[0]!, 0, 1n), pool.holds(st.blocks[1]!, 0, 2n), pool.isHashed(st.blocks[2]!)]).toEqual([true, true, false]);
    expect(st.numCached).toBe(2);
  });
});
