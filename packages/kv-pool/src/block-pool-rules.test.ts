import { describe, expect, it } from "vitest";
import { BlockPool, NULL_BLOCK } from "./block-pool.js";
import { tableEntries } from "./block-table.js";
import { tableOf } from "./test-helpers.js";

/**
 * The pool's hit and free rules on the pool itself, with hand-derived expected values (vLLM v1's
 * BlockPool: the free queue evicts from the front; a block freed without a hash goes to the front,
 * a hashed one to the back where it stays cached; a hit takes free blocks out of the queue).
 */

// Keys as (hi, lo) int32 halves; A's high half has its top bit set (a negative int32).
const A = [0x8000_0001 | 0, 0x0000_00a1] as const;
const B = [0x0000_0002, 0x0000_00b2] as const;
const C = [0x0000_0003, 0x0000_00c3] as const;
// The same keys as 64-bit hashes: hi x 2^32 + lo with hi read as unsigned.
const hA = (0x8000_0001n << 32n) | 0xa1n;
const hB = (2n << 32n) | 0xb2n;
const hC = (3n << 32n) | 0xc3n;

describe("BlockPool: a fresh pool", () => {
  it("has every usable page free, in id order, none used or cached", () => {
    // P = 6: page 0 is the null page, 5 usable pages 1..5.
    const pool = new BlockPool(6, 1, false);
    expect(pool.numFree).toBe(5);
    expect(pool.freeQueueOrder()).toEqual([1, 2, 3, 4, 5]);
    expect(pool.metrics()).toEqual({ usablePages: 5, usedPages: 0, cachedEvictablePages: 0, freePages: 5, usage: 0 });
    expect(pool.refCount(1)).toBe(0);
    expect(pool.isFree(1)).toBe(true);
    expect(pool.isFree(5)).toBe(true);
    // The null page and ids past the pool are never free.
    expect(pool.isFree(NULL_BLOCK)).toBe(false);
    expect(pool.isFree(6)).toBe(false);
    expect(pool.isEvictable(NULL_BLOCK)).toBe(false);
    expect(pool.isEvictable(1)).toBe(true);
    expect(pool.collectsEvents).toBe(false);
    expect(pool.takeEvents()).toEqual([]);
  });

  it("refuses fewer than 2 pages, a fractional count, or no group", () => {
    expect(() => new BlockPool(1, 1, false)).toThrow(/numPages must be an integer >= 2 \(page 0 is the null page\), got 1/);
    expect(() => new BlockPool(2.5, 1, false)).toThrow(RangeError);
    expect(() => new BlockPool(0, 1, false)).toThrow(RangeError);
    expect(() => new BlockPool(4, 0, false)).toThrow(/numGroups must be a positive integer, got 0/);
    expect(() => new BlockPool(4, 1.5, false)).toThrow(RangeError);
    // The smallest pool: one usable page.
    expect(new BlockPool(2, 1, false).freeQueueOrder()).toEqual([1]);
    // Group indices must fit the 24-bit field: 2^24 - 2 groups is the most.
    expect(() => new BlockPool(4, 0xff_ffff, false)).toThrow(/numGroups/);
  });
});

describe("BlockPool: takeFree", () => {
  it("takes from the front with reference count 1 and counts the taking group's pages", () => {
    const pool = new BlockPool(6, 2, false);
    expect(pool.takeFree(2, 1)).toEqual([1, 2]);
    expect(pool.takeFree(1)).toEqual([3]); // no group: counted for none
    expect(pool.refCount(1)).toBe(1);
    expect(pool.refCount(3)).toBe(1);
    expect(pool.isFree(1)).toBe(false);
    expect(pool.freeQueueOrder()).toEqual([4, 5]);
    expect([...pool.groupPages().used]).toEqual([0, 2]);
    // 5 usable, 2 free: used 3, usage 1 - 2/5 = 0.6.
    const m = pool.metrics();
    expect(m).toMatchObject({ usablePages: 5, usedPages: 3, freePages: 2, cachedEvictablePages: 0 });
    expect(m.usage).toBeCloseTo(0.6, 12);
    expect(() => pool.takeFree(3)).toThrow(/3 blocks asked, 2 free/);
    // Exactly the free count is fine.
    expect(pool.takeFree(2, 0)).toEqual([4, 5]);
    expect(pool.numFree).toBe(0);
    expect([...pool.groupPages().used]).toEqual([2, 2]);
    expect(() => pool.takeFree(1)).toThrow(/1 blocks asked, 0 free/);
  });

  it("takeFreeInto appends to the table given; without a group it counts no group's pages", () => {
    const pool = new BlockPool(6, 2, false);
    const out = tableOf([9]);
    pool.takeFreeInto(2, out);
    expect(tableEntries(out)).toEqual([9, 1, 2]);
    expect([...pool.groupPages().used]).toEqual([0, 0]);
    pool.free([1, 2]);
    expect([...pool.groupPages().used]).toEqual([0, 0]);
  });
});

describe("BlockPool: free", () => {
  it("puts unhashed blocks at the front in the order given and hashed ones at the back", () => {
    const pool = new BlockPool(8, 1, false);
    pool.takeFree(5, 0); // 1..5; queue [6, 7]
    expect(pool.cacheBlockKey(2, 0, ...A, NULL_BLOCK)).toBe(true);
    expect(pool.cacheBlockKey(4, 0, ...B, NULL_BLOCK)).toBe(true);
    // Tail first, as a request frees: 5 3 1 are fresh (front, in this order), 4 2 hashed (back).
    expect(pool.free([5, 4, 3, 2, 1])).toBe(5);
    expect(pool.freeQueueOrder()).toEqual([5, 3, 1, 6, 7, 4, 2]);
    expect(pool.metrics()).toMatchObject({ usedPages: 0, freePages: 7, cachedEvictablePages: 2 });
    expect([...pool.groupPages().used]).toEqual([0]);
    expect([...pool.groupPages().cached]).toEqual([2]);
    // Eviction from the front: the 5 unhashed blocks, then 4 loses its key B.
    expect(pool.takeFree(5, 0)).toEqual([5, 3, 1, 6, 7]);
    expect(pool.isHashed(4)).toBe(true);
    expect(pool.takeFree(1, 0)).toEqual([4]);
    expect(pool.isHashed(4)).toBe(false);
    expect(pool.findFirst(0, NULL_BLOCK, ...B)).toBe(NULL_BLOCK);
    expect(pool.findFirst(0, NULL_BLOCK, ...A)).toBe(2);
    expect(pool.metrics().cachedEvictablePages).toBe(1);
    expect([...pool.groupPages().cached]).toEqual([1]);
  });

  it("a second free call's fresh blocks go before the first call's", () => {
    const pool = new BlockPool(6, 1, false);
    pool.takeFree(4); // 1..4; queue [5]
    pool.free([1, 2]); // [1, 2, 5]
    pool.free([4, 3]); // [4, 3, 1, 2, 5]
    expect(pool.freeQueueOrder()).toEqual([4, 3, 1, 2, 5]);
    expect(pool.takeFree(4)).toEqual([4, 3, 1, 2]);
  });

  it("drops one reference per free; only a block reaching 0 is released", () => {
    const pool = new BlockPool(4, 1, false);
    pool.takeFree(1, 0); // block 1, ref 1
    pool.cacheBlockKey(1, 0, ...A, NULL_BLOCK);
    pool.touch([1]); // a second holder: ref 2
    expect(pool.refCount(1)).toBe(2);
    expect(pool.free([1])).toBe(0);
    expect(pool.refCount(1)).toBe(1);
    expect(pool.isFree(1)).toBe(false);
    expect([...pool.groupPages().used]).toEqual([1]);
    // The null block is skipped, not released.
    expect(pool.free([NULL_BLOCK, 1])).toBe(1);
    expect(pool.freeQueueOrder()).toEqual([2, 3, 1]);
    expect([...pool.groupPages().used]).toEqual([0]);
    expect(() => pool.free([1])).toThrow(/block 1 freed more often than taken/);
  });

  it("freeTableTailFirst frees the table from its tail, skipping null entries, then `then` in order", () => {
    const pool = new BlockPool(9, 1, false);
    pool.takeFree(6); // 1..6; queue [7, 8]
    pool.cacheBlockKey(3, 0, ...A, NULL_BLOCK);
    // As free([5, 2, 1, 6, 4, 3]): null entries skipped in both; the table [1, 0, 2, 5] tail first is 5, 2, 1 (0 is the null entry), then 6, 4, 3.
    expect(pool.freeTableTailFirst(tableOf([1, NULL_BLOCK, 2, 5]), [6, NULL_BLOCK, 4, 3])).toBe(6);
    // Fresh 5 2 1 6 4 at the front in that order; 3 is hashed: the back.
    expect(pool.freeQueueOrder()).toEqual([5, 2, 1, 6, 4, 7, 8, 3]);
    expect(pool.freeTableTailFirst(tableOf([]), [])).toBe(0);
  });

  it("many fresh blocks in one call, and far more pages than the first records, keep their order", () => {
    // 600 pages: records grow past the first 256, one free call releases 598 fresh blocks
    // (the batch starts with room for 64) and the front ring grows from 8 slots.
    const pool = new BlockPool(600, 1, false);
    const taken = pool.takeFree(599, 0);
    expect(taken[0]).toBe(1);
    expect(taken[598]).toBe(599);
    expect(pool.refCount(599)).toBe(1);
    expect(pool.refCount(300)).toBe(1);
    pool.cacheBlockKey(599, 0, ...A, NULL_BLOCK);
    const tailFirst = [...taken].reverse(); // 599, 598, ..., 1
    expect(pool.free(tailFirst)).toBe(599);
    // The fresh ones 598..1 in that order, then the hashed 599 at the back.
    expect(pool.freeQueueOrder()).toEqual([...tailFirst.slice(1), 599]);
    expect(pool.takeFree(3)).toEqual([598, 597, 596]);
  });
});

describe("BlockPool: touch (a prefix hit takes its blocks)", () => {
  it("takes a free hashed block out of the queue with ref 1, and adds a reference to a held one", () => {
    const pool = new BlockPool(8, 2, false);
    pool.takeFree(3, 1); // 1, 2, 3 for group 1
    pool.cacheBlockKey(1, 1, ...A, NULL_BLOCK);
    pool.cacheBlockKey(2, 1, ...B, NULL_BLOCK);
    pool.free([2, 1, 3]); // queue [3, 4, 5, 6, 7, 2, 1]
    expect(pool.freeQueueOrder()).toEqual([3, 4, 5, 6, 7, 2, 1]);
    expect(pool.metrics().cachedEvictablePages).toBe(2);
    expect([...pool.groupPages().cached]).toEqual([0, 2]);
    expect([...pool.groupPages().used]).toEqual([0, 0]);
    pool.touch([NULL_BLOCK, 2]);
    expect(pool.refCount(2)).toBe(1);
    expect(pool.isFree(2)).toBe(false);
    expect(pool.isEvictable(2)).toBe(false);
    expect(pool.isEvictable(1)).toBe(true);
    expect(pool.freeQueueOrder()).toEqual([3, 4, 5, 6, 7, 1]);
    // 7 usable, 6 free; 1 cached free page left; group 1's table holds block 2 again.
    expect(pool.metrics()).toMatchObject({ usedPages: 1, freePages: 6, cachedEvictablePages: 1 });
    expect([...pool.groupPages().cached]).toEqual([0, 1]);
    expect([...pool.groupPages().used]).toEqual([0, 1]);
    pool.touch([2]);
    expect(pool.refCount(2)).toBe(2);
    expect([...pool.groupPages().used]).toEqual([0, 1]);
    expect(pool.freeQueueOrder()).toEqual([3, 4, 5, 6, 7, 1]);
    // The hit blocks stay cached: freeing both references puts 2 back at the end.
    expect(pool.free([2, 2])).toBe(1);
    expect(pool.freeQueueOrder()).toEqual([3, 4, 5, 6, 7, 1, 2]);
    expect(pool.isHashed(2)).toBe(true);
  });

  it("takes a block from the front ring, the untouched middle or the back ring", () => {
    const pool = new BlockPool(8, 1, false);
    // Never taken yet: 4 leaves the untouched range 1..7, the ids before it keep their place.
    pool.touch([4]);
    expect(pool.refCount(4)).toBe(1);
    expect(pool.freeQueueOrder()).toEqual([1, 2, 3, 5, 6, 7]);
    expect(pool.numFree).toBe(6);
    pool.free([4]); // fresh: to the very front
    expect(pool.freeQueueOrder()).toEqual([4, 1, 2, 3, 5, 6, 7]);
    // 2 is now in the front part, 4 too; take 2 from the middle of it.
    pool.touch([2]);
    expect(pool.freeQueueOrder()).toEqual([4, 1, 3, 5, 6, 7]);
    expect(pool.numFree).toBe(6); // 7 usable, 2 held
    // Take 4, 1, 3, 5 (front part, then the untouched 5), cache 5 and free it to the back.
    expect(pool.takeFree(4)).toEqual([4, 1, 3, 5]);
    pool.cacheBlockKey(5, 0, ...C, NULL_BLOCK);
    pool.free([5]);
    expect(pool.freeQueueOrder()).toEqual([6, 7, 5]);
    pool.touch([5]);
    expect(pool.freeQueueOrder()).toEqual([6, 7]);
    expect(pool.numFree).toBe(2);
    // Popping past a removed entry: the queue is [6, 7] and then empty.
    expect(pool.takeFree(2)).toEqual([6, 7]);
    expect(pool.numFree).toBe(0);
  });
});

describe("BlockPool: the prefix cache (first copies, duplicates, eviction)", () => {
  it("keeps duplicates in caching order; hits use the first; evicting it promotes the next", () => {
    const pool = new BlockPool(8, 1, true);
    pool.takeFree(3, 0); // 1, 2, 3
    expect(pool.cacheBlockKey(1, 0, ...A, NULL_BLOCK)).toBe(true);
    expect(pool.cacheBlock(2, 0, hA)).toBe(false);
    expect(pool.cacheBlockKey(3, 0, ...A, NULL_BLOCK)).toBe(false);
    expect(pool.cacheSnapshot()).toEqual([`0:${hA}:1/2/3`]);
    expect(pool.findFirst(0, NULL_BLOCK, ...A)).toBe(1);
    expect(pool.cachedBlock(0, hA)).toBe(1);
    expect(pool.holds(2, 0, hA)).toBe(true);
    expect(pool.holds(2, 0, hB)).toBe(false);
    expect(pool.holdsKey(2, 0, ...A)).toBe(true);
    // Same hash, another group: not held.
    expect(pool.holdsKey(2, 1, ...A)).toBe(false);
    // Both halves must match.
    expect(pool.holdsKey(2, 0, A[0], B[1])).toBe(false);
    expect(pool.holdsKey(2, 0, B[0], A[1])).toBe(false);
    pool.free([1, 2, 3]); // queue [4, 5, 6, 7, 1, 2, 3]
    expect(pool.takeFree(5)).toEqual([4, 5, 6, 7, 1]);
    // 1 evicted: 2 is the first copy now; no event (copies remain).
    expect(pool.findFirst(0, NULL_BLOCK, ...A)).toBe(2);
    expect(pool.cacheSnapshot()).toEqual([`0:${hA}:2/3`]);
    expect(pool.takeEvents()).toEqual([]);
    expect(pool.takeFree(1)).toEqual([2]);
    expect(pool.findFirst(0, NULL_BLOCK, ...A)).toBe(3);
    expect(pool.cacheSnapshot()).toEqual([`0:${hA}:3`]);
    expect(pool.takeFree(1)).toEqual([3]);
    // The last copy gone: the key is removed.
    expect(pool.findFirst(0, NULL_BLOCK, ...A)).toBe(NULL_BLOCK);
    expect(pool.cachedBlock(0, hA)).toBe(NULL_BLOCK);
    expect(pool.cacheSnapshot()).toEqual([]);
    expect(pool.takeEvents()).toEqual([{ type: "removed", groupIndex: 0, blockHashes: [hA] }]);
    expect(pool.takeEvents()).toEqual([]);
  });

  it("evicting a later copy unlinks it from the copy chain", () => {
    const pool = new BlockPool(6, 1, true);
    pool.takeFree(4); // 1..4
    for (const b of [1, 2, 3, 4]) pool.cacheBlockKey(b, 0, ...A, NULL_BLOCK);
    pool.free([3, 2, 4, 1]); // queue [5, 3, 2, 4, 1]
    expect(pool.takeFree(2)).toEqual([5, 3]); // 3 leaves 1/2/3/4
    expect(pool.cacheSnapshot()).toEqual([`0:${hA}:1/2/4`]);
    expect(pool.takeFree(1)).toEqual([2]);
    expect(pool.cacheSnapshot()).toEqual([`0:${hA}:1/4`]);
    expect(pool.takeFree(1)).toEqual([4]);
    expect(pool.cacheSnapshot()).toEqual([`0:${hA}:1`]);
    expect(pool.findFirst(0, NULL_BLOCK, ...A)).toBe(1);
    expect(pool.takeEvents()).toEqual([]);
  });

  it("merges consecutive removals of one group into one event, and starts a new one per group change", () => {
    const pool = new BlockPool(6, 2, true);
    expect(pool.collectsEvents).toBe(true);
    pool.takeFree(4); // 1..4
    pool.cacheBlockKey(1, 0, ...A, NULL_BLOCK);
    pool.cacheBlockKey(2, 0, ...B, NULL_BLOCK);
    pool.cacheBlockKey(3, 1, ...A, NULL_BLOCK); // the same hash in group 1: another key
    pool.cacheBlockKey(4, 0, ...C, NULL_BLOCK);
    // Sorted as strings: hC = 12884902083, hB = 8589934770, hA = 9223372041149743265 in decimal.
    expect(pool.cacheSnapshot()).toEqual([`0:${hC}:4`, `0:${hB}:2`, `0:${hA}:1`, `1:${hA}:3`]);
    pool.free([1, 2, 3, 4]); // queue [5, 1, 2, 3, 4]
    pool.takeFree(5);
    expect(pool.takeEvents()).toEqual([
      { type: "removed", groupIndex: 0, blockHashes: [hA, hB] },
      { type: "removed", groupIndex: 1, blockHashes: [hA] },
      { type: "removed", groupIndex: 0, blockHashes: [hC] },
    ]);
    pool.emitStored(1, hA, [{ blockHash: hB, tokensHash: hC }]);
    expect(pool.takeEvents()).toEqual([{ type: "stored", groupIndex: 1, parentHash: hA, blocks: [{ blockHash: hB, tokensHash: hC }] }]);
  });

  it("a pool without events records none", () => {
    const pool = new BlockPool(3, 1, false);
    pool.takeFree(1);
    pool.cacheBlockKey(1, 0, ...A, NULL_BLOCK);
    pool.free([1]);
    pool.takeFree(2); // evicts 1
    pool.emitStored(0, null, []);
    expect(pool.takeEvents()).toEqual([]);
  });

  it("caches only a referenced, unhashed, real block", () => {
    const pool = new BlockPool(6, 1, false);
    pool.takeFree(1); // 1
    expect(() => pool.cacheBlockKey(NULL_BLOCK, 0, ...A, NULL_BLOCK)).toThrow(/block 0 cannot be cached/);
    // 2 was never taken: reference count 0.
    expect(() => pool.cacheBlockKey(2, 0, ...A, NULL_BLOCK)).toThrow(/block 2 cannot be cached/);
    pool.cacheBlockKey(1, 0, ...A, NULL_BLOCK);
    expect(() => pool.cacheBlockKey(1, 0, ...B, NULL_BLOCK)).toThrow(/block 1 cannot be cached/);
    pool.free([1]); // free and hashed
    pool.takeFree(4); // 2..5, leaving 1 cached at the back
    pool.free([2]);
    // 2 is free again (reference count 0): refused.
    expect(() => pool.cacheBlockKey(2, 0, ...B, NULL_BLOCK)).toThrow(/block 2 cannot be cached/);
  });

  it("answers 0 and false for blocks past the records it holds", () => {
    // 300 pages: records for the first 256 only until a block beyond them is taken.
    const pool = new BlockPool(300, 1, false);
    expect(pool.refCount(299)).toBe(0);
    expect(pool.isHashed(299)).toBe(false);
    expect(pool.holdsKey(299, 0, 0, 0)).toBe(false);
    expect(pool.isEvictable(299)).toBe(true);
    expect(pool.isFree(299)).toBe(true);
  });

  it("uncache hides every copy of a key, free or held", () => {
    const pool = new BlockPool(6, 1, true);
    pool.takeFree(3, 0); // 1, 2, 3
    for (const b of [1, 2]) pool.cacheBlockKey(b, 0, ...A, NULL_BLOCK);
    pool.cacheBlockKey(3, 0, ...B, NULL_BLOCK);
    pool.free([1]); // 1 free and cached; 2 held
    expect(pool.metrics().cachedEvictablePages).toBe(1);
    pool.uncache(0, hA);
    expect(pool.isHashed(1)).toBe(false);
    expect(pool.isHashed(2)).toBe(false);
    expect(pool.findFirst(0, NULL_BLOCK, ...A)).toBe(NULL_BLOCK);
    expect(pool.findFirst(0, NULL_BLOCK, ...B)).toBe(3);
    expect(pool.metrics().cachedEvictablePages).toBe(0);
    expect([...pool.groupPages().cached]).toEqual([0]);
    expect(pool.takeEvents()).toEqual([{ type: "removed", groupIndex: 0, blockHashes: [hA] }]);
    // A key not cached: nothing happens.
    pool.uncache(0, hC);
    expect(pool.cacheSnapshot()).toEqual([`0:${hB}:3`]);
  });
});

describe("BlockPool: findFirst through a run link that went stale", () => {
  // Linked group 0. Block 1 caches K0; block 2 caches K1 right after it, so 1's CHILD link names 2
  // and K1 stays out of the table. Evicting 2 does not clear 1's link (only 2's own).
  const K0 = [0x10, 0x20] as const;
  const K1 = [0x11, 0x21] as const;
  function staleLink(): BlockPool {
    const pool = new BlockPool(6, 1, false, [true]);
    pool.takeFree(2); // 1, 2
    pool.cacheBlockKey(1, 0, ...K0, NULL_BLOCK);
    pool.cacheBlockKey(2, 0, ...K1, 1);
    pool.free([2]); // queue [3, 4, 5, 2]
    expect(pool.takeFree(4)).toEqual([3, 4, 5, 2]); // 2 evicted: K1 gone
    expect(pool.findFirst(0, 1, ...K1)).toBe(NULL_BLOCK);
    return pool;
  }

  it("the linked block re-cached under a key with K1's high half but another low half is not K1", () => {
    const pool = staleLink();
    pool.cacheBlockKey(2, 0, K1[0], 0x99, NULL_BLOCK);
    expect(pool.findFirst(0, 1, ...K1)).toBe(NULL_BLOCK);
    expect(pool.findFirst(0, NULL_BLOCK, K1[0], 0x99)).toBe(2);
  });

  it("... nor under a key with K1's low half and another high half", () => {
    const pool = staleLink();
    pool.cacheBlockKey(2, 0, 0x99, K1[1], NULL_BLOCK);
    expect(pool.findFirst(0, 1, ...K1)).toBe(NULL_BLOCK);
  });

  it("re-cached as a later copy of K1, the link's block is not the one hits use: the table's first copy is", () => {
    const pool = staleLink();
    pool.cacheBlockKey(3, 0, ...K1, NULL_BLOCK); // K1's first copy, in the table
    expect(pool.cacheBlockKey(2, 0, ...K1, NULL_BLOCK)).toBe(false); // a second copy
    expect(pool.findFirst(0, 1, ...K1)).toBe(3);
  });

  it("the linked block re-cached under K1 in another group is not group 0's K1", () => {
    const pool = new BlockPool(6, 2, false, [true, true]);
    pool.takeFree(2); // 1, 2
    pool.cacheBlockKey(1, 0, ...K0, NULL_BLOCK);
    pool.cacheBlockKey(2, 0, ...K1, 1);
    pool.free([2]);
    pool.takeFree(4); // 3, 4, 5, then 2 (evicted)
    pool.cacheBlockKey(2, 1, ...K1, NULL_BLOCK);
    expect(pool.findFirst(0, 1, ...K1)).toBe(NULL_BLOCK);
    expect(pool.findFirst(1, NULL_BLOCK, ...K1)).toBe(2);
  });

  it("a hit on a never-taken block counts no cached page", () => {
    const pool = new BlockPool(4, 1, false);
    pool.touch([2]);
    expect(pool.metrics()).toEqual({ usablePages: 3, usedPages: 1, cachedEvictablePages: 0, freePages: 2, usage: 1 - 2 / 3 });
    expect([...pool.groupPages().cached]).toEqual([0]);
  });
});
