import { describe, expect, it } from "vitest";
import { BlockPool, NULL_BLOCK } from "./block-pool.js";
import { blockHashHi, blockHashLo, type BlockHashView } from "./hashing.js";
import { poolOf } from "./kv-cache-manager.js";
import { createPromptTokens } from "./prompt-tokens.js";
import { FullAttentionManager } from "./full-attention-manager.js";
import { MambaManager } from "./mamba-manager.js";
import { SingleBlockStateManager } from "./single-block-state-manager.js";
import { WindowManager } from "./window-manager.js";
import { GroupState, Sequence } from "./sequence.js";
import { admit, group, manager, range, seqOf, setTable } from "./test-helpers.js";
import { tableEntries } from "./block-table.js";

// The managers' hit and free rules at their exact edges. Each expected value is derived by hand
// in the comment beside it.

/** Hash i is i + 1 (the managers only look keys up; distinct values are all that matters). */
const view = (n: number): BlockHashView => ({ length: n, blockHash: (i) => BigInt(i + 1), tokensHash: (i) => BigInt(i + 1) });

/** A pool whose group 0 holds the blocks at the given table indexes, cached under `view`'s hashes. */
function cachedAt(indexes: readonly number[]): BlockPool {
  const pool = new BlockPool(64, 1, false);
  for (const i of indexes) {
    const [b] = pool.takeFree(1);
    pool.cacheBlock(b!, 0, BigInt(i + 1));
    pool.free([b!]);
  }
  return pool;
}

/** A group state holding `blocks` (NULL_BLOCK where skipped). */
function stateOf(blocks: readonly number[]): GroupState {
  const st = new GroupState();
  setTable(st, blocks);
  st.real = blocks.filter((b) => b !== NULL_BLOCK).length;
  return st;
}

describe("window hit: the run must end on the alignment, not merely on a block", () => {
  // W 4, B 2: a hit needs cdiv(W - 1, B) = cdiv(3, 2) = 2 cached blocks before its end. Blocks 0..3
  // are cached and the hit may be 8 tokens long, but the alignment is 6 (the lcm of blocks of 2 and 3
  // tokens): a run may end only after a block i with (i + 1) x 2 a multiple of 6, i.e. i = 2 (6
  // tokens). Block 3 (8 tokens) cannot end it; blocks 2 and 1 form the 2-block run: 3 blocks.
  it("blocks 0..3 cached, alignment 6: a 3-block hit (6 tokens)", () => {
    const m = new WindowManager(cachedAt([0, 1, 2, 3]), 0, group("sliding_window", 2, { window_tokens: 4 }), true);
    const lists = m.findLongestCacheHit(view(4), 8, 6, [0]);
    // One list per group asked for.
    expect(lists).toHaveLength(1);
    const [hit] = lists;
    expect(hit).toHaveLength(3);
    // Block 0 lies below the window of the hit's end: a null entry; blocks 1 and 2 are the run.
    expect(hit![0]).toBe(NULL_BLOCK);
    expect(hit!.slice(1).every((b) => b !== NULL_BLOCK)).toBe(true);
  });

  it("needs window_tokens", () => {
    expect(() => new WindowManager(new BlockPool(8, 1, false), 0, group("sliding_window", 2, { name: "swa" }), true)).toThrow(
      "group swa (sliding_window) needs window_tokens",
    );
  });
});

describe("Mamba-type hit: the latest cached state on the alignment, within maxLength", () => {
  const mamba = (pool: BlockPool) => new MambaManager(pool, 0, group("state", 2), 0);

  it("blocks 0..3 cached, alignment 6: the state at 6 tokens (block 2)", () => {
    // (i + 1) x 2 must be a multiple of 6: i = 2 (6 tokens); block 3 (8 tokens) is not aligned.
    const [hit] = mamba(cachedAt([0, 1, 2, 3])).findLongestCacheHit(view(4), 8, 6, [0]);
    expect(hit).toHaveLength(3);
    expect(hit!.slice(0, 2)).toEqual([NULL_BLOCK, NULL_BLOCK]);
    expect(hit![2]).not.toBe(NULL_BLOCK);
  });

  it("never past maxLength, even when more hashes are given", () => {
    // maxLength 4 tokens = 2 blocks: the latest candidate is block 1, though blocks up to 3 are cached.
    expect(mamba(cachedAt([0, 1, 2, 3])).findLongestCacheHit(view(4), 4, 2, [0])[0]).toHaveLength(2);
  });

  it("a state cached only at block 0 is a 1-block hit", () => {
    const [hit] = mamba(cachedAt([0])).findLongestCacheHit(view(4), 8, 2, [0]);
    expect(hit).toHaveLength(1);
    expect(hit![0]).not.toBe(NULL_BLOCK);
  });

  it("skips every computed token but the last one (vLLM's get_num_skipped_tokens: C - 1)", () => {
    const m = mamba(new BlockPool(8, 1, false));
    expect([0, 1, 2, 10].map((c) => m.skippedTokens(c))).toEqual([0, 0, 1, 9]);
  });
});

describe("free order: every real block, the table's tail first", () => {
  it("attention and ring tables skip nulls and include block 0 of the table", () => {
    const pool = new BlockPool(16, 1, false);
    const fa = new FullAttentionManager(pool, 0, group("full_attention", 2), true);
    // Table [4, null, 6]: tail first, nulls skipped -> [6, 4].
    expect(fa.freeOrder(stateOf([4, NULL_BLOCK, 6]))).toEqual([6, 4]);
    expect(new SingleBlockStateManager(pool, 0, group("state", 2)).freeOrder(stateOf([3]))).toEqual([3]);
  });

  it("a Mamba-type table, then its checkpoint blocks", () => {
    const m = new MambaManager(new BlockPool(16, 1, false), 0, group("state", 2), 2);
    const st = stateOf([5, NULL_BLOCK, 7]);
    st.checkpoints = [9, 8];
    // Table tail first [7, 5], then the checkpoints as held (latest boundary first): [7, 5, 9, 8].
    expect(m.freeOrder(st)).toEqual([7, 5, 9, 8]);
  });
});

describe("Mamba-type remove_skipped_blocks: the previous state goes once the computed prefix passes it", () => {
  it("a previous state at table index 0 is freed at the next step, and the state forgets it", () => {
    const pool = new BlockPool(16, 1, false);
    const m = new MambaManager(pool, 0, group("state", 2), 0);
    const st = new GroupState();
    m.allocateNewBlocks(st, 2); // cdiv(2, 2) = 1 entry: the running block, 1.
    m.allocateNewBlocks(st, 6); // cdiv(6, 2) = 3 entries: block 1 (index 0) becomes the previous state.
    expect(tableEntries(st)).toEqual([1, NULL_BLOCK, 2]);
    expect(st.real).toBe(2);
    // C = 6: 0 < cdiv(6, 2) - 1 = 2, so the previous state at index 0 is passed and goes.
    expect(m.removeSkippedBlocks(st, 6)).toEqual([1]);
    expect(tableEntries(st)).toEqual([NULL_BLOCK, NULL_BLOCK, 2]);
    expect(st.real).toBe(1);
    expect(st.prevStateIdx).toBe(-1);
  });

  it("keeps the previous state while the computed prefix has not passed it", () => {
    const pool = new BlockPool(16, 1, false);
    const m = new MambaManager(pool, 0, group("state", 2), 0);
    const st = new GroupState();
    m.allocateNewBlocks(st, 4); // [null, 1]
    m.allocateNewBlocks(st, 10); // [null, 1, null, null, 2]: the previous state at index 1
    // C = 4: 1 < cdiv(4, 2) - 1 = 1 is false: the next chunk still starts from that state.
    expect(m.skippedBlocks(st, 4)).toEqual([]);
    expect(m.removeSkippedBlocks(st, 4)).toEqual([]);
    // C = 6: 1 < cdiv(6, 2) - 1 = 2: passed.
    expect(m.removeSkippedBlocks(st, 6)).toEqual([1]);
  });

  it("a previous-state index over a null entry frees nothing", () => {
    const m = new MambaManager(new BlockPool(16, 1, false), 0, group("state", 2), 0);
    const st = stateOf([NULL_BLOCK, NULL_BLOCK, 3]);
    st.prevStateIdx = 0;
    // Index 0 is passed at C = 6 (0 < 2), but it holds no block: nothing to free.
    expect(m.removeSkippedBlocks(st, 6)).toEqual([]);
    expect(st.real).toBe(1);
  });

  it("a chunk's checkpoint blocks go at the next step even without a previous state", () => {
    const m = new MambaManager(new BlockPool(16, 1, false), 0, group("state", 2), 2);
    const st = stateOf([NULL_BLOCK, NULL_BLOCK, 3]);
    st.checkpoints = [4, 5];
    st.checkpointHashIdx = [1, 0];
    // No previous state (prevStateIdx -1): only the checkpoints, latest boundary first.
    expect(m.removeSkippedBlocks(st, 6)).toEqual([4, 5]);
    expect(st.checkpoints).toEqual([]);
    expect(tableEntries(st)).toEqual([NULL_BLOCK, NULL_BLOCK, 3]);
  });
});

describe("Mamba-type source release keeps only the running block", () => {
  it("frees every earlier real block, table index 0 included, and the checkpoints", () => {
    const m = new MambaManager(new BlockPool(16, 1, false), 0, group("state", 2), 1);
    const st = stateOf([3, NULL_BLOCK, 5, 6]);
    st.prevStateIdx = 2;
    st.checkpoints = [7];
    st.checkpointHashIdx = [2];
    // Below the running block (index 3), from the tail: 5 (index 2), then 3 (index 0); then checkpoint 7.
    expect(m.releaseForSource(st)).toEqual([5, 3, 7]);
    expect(tableEntries(st)).toEqual([NULL_BLOCK, NULL_BLOCK, NULL_BLOCK, 6]);
    expect(st.real).toBe(1);
    expect(st.prevStateIdx).toBe(-1);
    expect(st.checkpoints).toEqual([]);
  });
});

describe("Mamba-type caching: a state is cached only once computed, under a hash it is given", () => {
  const setup = () => {
    const pool = new BlockPool(16, 1, false);
    const m = new MambaManager(pool, 0, group("state", 2), 2);
    return { pool, m };
  };

  it("the running state at a block boundary; nothing at a null entry or past the hashes", () => {
    const { pool, m } = setup();
    const [run] = pool.takeFree(1);
    // Table of 3 entries (6 tokens), running block at index 2.
    const st = stateOf([NULL_BLOCK, NULL_BLOCK, run!]);
    // C = 4 ends block 1, which holds no state (null): nothing to cache, and no error.
    m.cacheBlocks(st, view(2), 4);
    expect(pool.isHashed(run!)).toBe(false);
    // C = 6 ends block 2, but only 2 hashes are given (blocks 0 and 1): not cached.
    m.cacheBlocks(st, view(2), 6);
    expect(pool.isHashed(run!)).toBe(false);
    // With 3 hashes it is cached under block 2's hash.
    m.cacheBlocks(st, view(3), 6);
    expect(pool.holds(run!, 0, 3n)).toBe(true);
  });

  it("a checkpoint once its boundary is computed; one without a boundary (-1) never", () => {
    const { pool, m } = setup();
    const [c1, c0, none] = pool.takeFree(3);
    const st = stateOf([NULL_BLOCK, NULL_BLOCK, NULL_BLOCK, NULL_BLOCK]);
    // Checkpoints for blocks 1 (boundary at (1 + 1) x 2 = 4 tokens) and 0 (at 2 tokens); a third
    // slot whose boundary was not inside the chunk (-1).
    st.checkpoints = [c1!, c0!, none!];
    st.checkpointHashIdx = [1, 0, -1];
    // C = 3: block 0's boundary (2) is computed, block 1's (4) is not.
    m.cacheBlocks(st, view(4), 3);
    expect([pool.isHashed(c1!), pool.holds(c0!, 0, 1n), pool.isHashed(none!)]).toEqual([false, true, false]);
    // C = 4: block 1's boundary is reached exactly.
    m.cacheBlocks(st, view(4), 4);
    expect([pool.holds(c1!, 0, 2n), pool.isHashed(none!)]).toEqual([true, false]);
  });

  it("a checkpoint past the hashes it is given is not cached", () => {
    const { pool, m } = setup();
    const [c] = pool.takeFree(1);
    const st = stateOf([NULL_BLOCK, NULL_BLOCK, NULL_BLOCK, NULL_BLOCK]);
    st.checkpoints = [c!];
    st.checkpointHashIdx = [2];
    // Block 2's boundary (6 tokens) is computed at C = 8, but only hashes 0 and 1 are given.
    m.cacheBlocks(st, view(2), 8);
    expect(pool.isHashed(c!)).toBe(false);
  });

  it("an attention group that does not cache leaves its blocks unhashed", () => {
    const pool = new BlockPool(16, 1, false);
    const fa = new FullAttentionManager(pool, 0, group("full_attention", 2), false);
    const blocks = pool.takeFree(2);
    fa.cacheBlocks(stateOf(blocks), view(2), 4);
    expect(blocks.map((b) => pool.isHashed(b))).toEqual([false, false]);
  });
});

describe("hits through the pool", () => {
  it("a pool whose only group is a non-cacheable state never hits", () => {
    // A ring constrains no hit and offers none: with no hit type there is nothing to reuse.
    const m = manager(8, [group("state", 4, { prefix_cacheable: false })]);
    const a = seqOf(m, "a", range(0, 12));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    m.free(a);
    const b = seqOf(m, "b", range(0, 12));
    expect(m.findPrefixHit(b).tokens).toBe(0);
    expect(m.peekPrefixHitTokens(createPromptTokens(Uint32Array.from(range(0, 12))))).toBe(0);
  });

  it("the hybrid fixed point searches again after a later group shortens the hit", () => {
    // Full attention, a sliding window (W 5, B 4: a hit needs cdiv(4, 4) = 1 cached block before
    // its end) and a Mamba-type state, all B 4 (alignment 4); a 29-token prompt: a hit is at most
    // 28 tokens, 7 blocks. Cached by hand: full attention blocks 0..6, the window block 4 alone,
    // the Mamba state at block 2.
    //   Round 1: full attention 7 blocks (28); the window, up to 28, finds block 4 (a run of 1):
    //   20 tokens; the state, up to 20, finds block 2: 12 tokens. 12 < 28: again.
    //   Round 2: full attention cut to 3 blocks (12); the window, up to 12, finds none of blocks
    //   0..2: 0 tokens. The hit is 0 (not 12, whose window blocks before 12 are not cached).
    const m = manager(64, [group("full_attention", 4), group("sliding_window", 4, { window_tokens: 5 }), group("state", 4)]);
    const seq = seqOf(m, "r", range(0, 29));
    if (!(seq instanceof Sequence)) throw new Error("not a pool sequence");
    const chain = seq.chain(4).ensure(7);
    const pool = poolOf(m);
    const cache = (g: number, i: number) => {
      const [b] = pool.takeFree(1);
      pool.cacheBlockKey(b!, g, blockHashHi(chain, i), blockHashLo(chain, i), NULL_BLOCK);
      pool.free([b!]);
    };
    for (let i = 0; i < 7; i++) cache(0, i);
    cache(1, 4);
    cache(2, 2);
    expect(m.findPrefixHit(seq).tokens).toBe(0);
    // With the window block 2 cached as well, round 2's window finds it: 12 tokens, and the state
    // at 12 confirms it.
    cache(1, 2);
    expect(m.findPrefixHit(seq).tokens).toBe(12);
  });
});

describe("vLLM 0.32.0 checkpoint blocks through the pool", () => {
  it("a one-chunk prefill's checkpoints go at the first decode step", () => {
    // Full attention and a Mamba-type state with 2 checkpoint blocks, B 16; a 40-token prompt in one
    // chunk: full attention cdiv(40, 16) = 3 blocks; the state 1 running block plus checkpoints for
    // the last 2 boundaries inside the chunk, 32 and 16 tokens: 3 + 1 + 2 = 6 pages.
    const m = manager(20, [group("full_attention", 16), group("state", 16, { prefill_checkpoint_blocks: 2 })], { version: "0.32.0" });
    const seq = seqOf(m, "r", range(0, 40));
    expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: 40 })).toBe(true);
    m.commitComputed(seq, 40);
    expect(m.metrics().usedPages).toBe(6);
    seq.appendToken(1000);
    // Decode at C = 40: 41 tokens need no new block (cdiv(41, 16) = 3 in both tables); there was no
    // previous state (the chunk started from nothing), and the 2 checkpoints go: 6 - 2 = 4.
    expect(m.allocateSlots(seq, { computedTokens: 40, newTokens: 1 })).toBe(true);
    expect(m.metrics().usedPages).toBe(4);
  });

  it("releaseSourceSkipped names a bad computed count", () => {
    const m = manager(8, [group("full_attention", 4)]);
    const seq = seqOf(m, "r", range(0, 8));
    expect(() => m.releaseSourceSkipped(seq, -1)).toThrow("computedTokens must be an integer >= 0, got -1");
  });
});
