import { describe, expect, it } from "vitest";
import { BlockPool, NULL_BLOCK } from "./block-pool.js";
import { MambaManager } from "./mamba-manager.js";
import { SingleBlockStateManager } from "./single-block-state-manager.js";
import { WindowManager } from "./window-manager.js";
import { GroupState, type BlockHashView } from "./sequence.js";
import { group, setTable } from "./test-helpers.js";
import { tableEntries } from "./block-table.js";

/** Hash i is i + 1 (any distinct values do: the managers only look keys up). */
const view = (n: number): BlockHashView => ({ length: n, blockHash: (i) => BigInt(i + 1), tokensHash: (i) => BigInt(i + 1) });

/** A window manager (W 4, B 2) over a pool where the blocks marked true in `bitmap` are cached. */
function windowWithCache(bitmap: readonly boolean[]): { m: WindowManager; hashes: BlockHashView } {
  const pool = new BlockPool(64, 1, false);
  bitmap.forEach((cached, i) => {
    if (!cached) return;
    const [b] = pool.takeFree(1);
    pool.cacheBlock(b!, 0, BigInt(i + 1));
  });
  return { m: new WindowManager(pool, 0, group("sliding_window", 2, { window_tokens: 4 }), true), hashes: view(bitmap.length) };
}

describe("T6 sliding-window hit (W 4, B 2: a hit needs cdiv(3,2) = 2 contiguous blocks)", () => {
  const T = true;
  const F = false;
  // [bitmap, expected hit length in blocks], max_length = 2 x bitmap length, alignment = B.
  const cases: [boolean[], number][] = [
    [repeatF(10), 0],
    [[T], 1],
    [[T, F], 1],
    [[T, T], 2],
    [[T, T, F], 2],
    [[T, T, T], 3],
    [[T, T, T, F], 3],
    // From the right: blocks 11 and 10 are cached -> a 2-run ending at block 11 -> 12 blocks.
    [[T, T, F, T, F, F, T, T, F, T, T, T], 12],
    // From the right: 10, 9, 8 miss; 7 and 6 cached -> 8 blocks.
    [[T, T, F, T, F, F, T, T, F, F, F], 8],
    // Block 11 is cached alone (a run of 1), 10 misses, then 7 and 6 -> 8 blocks.
    [[T, T, F, T, F, F, T, T, F, F, F, T], 8],
  ];
  function repeatF(n: number): boolean[] {
    return Array.from({ length: n }, () => F);
  }
  it.each(cases)("bitmap %j -> %i blocks", (bitmap, expected) => {
    const { m, hashes } = windowWithCache(bitmap);
    const [hit] = m.findLongestCacheHit(hashes, bitmap.length * 2, 2, [0]);
    expect(hit).toHaveLength(expected);
    // Every block before the last 2 of the hit is null.
    for (let i = 0; i < Math.max(0, expected - 2); i++) expect(hit![i]).toBe(NULL_BLOCK);
  });
});

describe("T8 sliding-window remove_skipped_blocks (W 4, B 2, table 1000..1010, cumulative)", () => {
  it("nulls blocks below the window and frees them higher index first", () => {
    const pool = new BlockPool(1011, 1, false);
    const ids = Array.from({ length: 11 }, (_, i) => 1000 + i);
    pool.touch(ids);
    const st = new GroupState();
    setTable(st, ids);
    st.real = 11;
    const m = new WindowManager(pool, 0, group("sliding_window", 2, { window_tokens: 4 }), true);
    const step = (c: number): number[] => m.removeSkippedBlocks(st, c);
    // S(C) = max(0, C - 3); blocks below floor(S/2) are nulled.
    expect(step(0)).toEqual([]); // S 0
    expect(step(4)).toEqual([]); // S 1 -> 0 blocks
    expect(tableEntries(st)).toEqual(ids);
    expect(step(5)).toEqual([1000]); // S 2 -> block 0
    expect(tableEntries(st).slice(0, 2)).toEqual([0, 1001]);
    expect(step(6)).toEqual([]); // S 3 -> still 1 block
    expect(step(7)).toEqual([1001]); // S 4 -> 2 blocks
    expect(tableEntries(st).slice(0, 3)).toEqual([0, 0, 1002]);
    expect(step(11)).toEqual([1003, 1002]); // S 8 -> 4 blocks; walk 3, 2, stop at the null at 1
    expect(tableEntries(st).slice(0, 5)).toEqual([0, 0, 0, 0, 1004]);
    expect(st.real).toBe(7);
  });
});

describe("T10 get_num_blocks_to_allocate (W 4, B 2, 40 tokens, total computed 0)", () => {
  it("counts evictable hit blocks against free capacity", () => {
    const pool = new BlockPool(100, 1, false);
    const m = new WindowManager(pool, 0, group("sliding_window", 2, { window_tokens: 4 }), true);
    // Blocks 1..10 are free (ref 0), so evictable. cdiv(40,2) = 20 required.
    const ten = Array.from({ length: 10 }, (_, i) => i + 1);
    // 20 - 10 hits = 10 new + 10 evictable = 20.
    expect(m.numBlocksToAllocate(new GroupState(), false, 40, ten, 0)).toBe(20);
    // 5 nulls + 5 evictable: 20 - 10 = 10 new + 5 evictable = 15.
    expect(m.numBlocksToAllocate(new GroupState(), false, 40, [0, 0, 0, 0, 0, 1, 2, 3, 4, 5], 0)).toBe(15);
  });
});

describe("T11 an evictable hit is not allocated twice (W 4, B 2)", () => {
  it("needs 2 (1 new + 1 evictable) but pops only 1 new block", () => {
    const pool = new BlockPool(100, 1, false);
    const m = new WindowManager(pool, 0, group("sliding_window", 2, { window_tokens: 4 }), true);
    const st = new GroupState();
    // 4 tokens -> 2 blocks; total computed 2 -> S = max(0, 2 - 3) = 0; 1 hit -> 1 new + 1 evictable.
    expect(m.numBlocksToAllocate(st, false, 4, [1], 2)).toBe(2);
    m.allocateNewComputedBlocks(st, [1], 2);
    const freeBefore = pool.numFree;
    m.allocateNewBlocks(st, 4);
    expect(freeBefore - pool.numFree).toBe(1);
    expect(st.numBlocks).toBe(2);
    // 99 usable - 1 touched - 1 new = 97.
    expect(pool.numFree).toBe(97);
  });
});

describe("T12 Mamba-type state", () => {
  it("align mode, B 2: 6 tokens -> a table of 3 entries with 1 real block; free returns it", () => {
    const pool = new BlockPool(100, 1, false);
    const m = new MambaManager(pool, 0, group("state", 2), 0);
    const st = new GroupState();
    expect(m.numBlocksToAllocate(st, false, 6, [])).toBe(1);
    m.allocateNewBlocks(st, 6);
    // cdiv(6,2) = 3 entries; running block at index 2 is the first free block, 1.
    expect(tableEntries(st)).toEqual([0, 0, 1]);
    expect(pool.numFree).toBe(98);
    pool.free(m.freeOrder(st));
    expect(pool.numFree).toBe(99);
  });

  it("align mode keeps the previous state block until the computed prefix passes it", () => {
    const pool = new BlockPool(100, 1, false);
    const m = new MambaManager(pool, 0, group("state", 2), 0);
    const st = new GroupState();
    m.allocateNewBlocks(st, 4); // [0, 1]
    expect(m.removeSkippedBlocks(st, 4)).toEqual([]);
    m.allocateNewBlocks(st, 10); // running at cdiv(10,2)-1 = 4; previous (block 1) at index 1
    expect(tableEntries(st)).toEqual([0, 1, 0, 0, 2]);
    // Next step at C = 10: 1 < cdiv(10,2) - 1 = 4 -> the previous state block goes.
    expect(m.removeSkippedBlocks(st, 10)).toEqual([1]);
    expect(tableEntries(st)).toEqual([0, 0, 0, 0, 2]);
  });

  it("none mode (caching off), no speculative blocks: 1 block at 100 tokens, 0 more at 200, nothing skipped", () => {
    const pool = new BlockPool(100, 1, false);
    const m = new SingleBlockStateManager(pool, 0, group("state", 2));
    const st = new GroupState();
    expect(m.numBlocksToAllocate(st, false)).toBe(1);
    m.allocateNewBlocks(st);
    expect(m.numBlocksToAllocate(st, true)).toBe(0);
    expect(m.removeSkippedBlocks()).toEqual([]);
    expect(tableEntries(st)).toEqual([1]);
  });
});
