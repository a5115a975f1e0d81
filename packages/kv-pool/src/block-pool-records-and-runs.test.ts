import { describe, expect, it } from "vitest";
import { BlockPool, NULL_BLOCK } from "./block-pool.js";
import { tableOf } from "./test-helpers.js";

/**
 * Edges of the pool's records, free queue and run links, with hand-derived expected values:
 * the block at the first record boundary, ids outside the pool, a free-queue ring filled past its
 * first 8 slots, and cacheTableRun's skipping and linking rules.
 */

// Keys as (hi, lo) int32 halves.
const K0 = [0x10, 0x20] as const;
const K1 = [0x11, 0x21] as const;
const K2 = [0x12, 0x22] as const;
const K0h = (0x10n << 32n) | 0x20n;
const K1h = (0x11n << 32n) | 0x21n;
/** The keys of a run as cacheTableRun takes them: hi, lo of each in order. */
function keysFor(...ks: (readonly [number, number])[]): Int32Array {
  return Int32Array.from(ks.flat());
}

describe("BlockPool: records past the first 256 blocks", () => {
  it("block 256, the first past the initial records, reads as untaken and then keeps its reference", () => {
    // 300 pages: records exist for blocks 0..255 until a block >= 256 is taken.
    const pool = new BlockPool(300, 1, false);
    expect(pool.refCount(256)).toBe(0);
    expect(pool.isHashed(256)).toBe(false);
    // Taking 256 blocks from the front: 1..256, each with reference 1, 256 included.
    const taken = pool.takeFree(256, 0);
    expect(taken[255]).toBe(256);
    expect(pool.refCount(256)).toBe(1);
    expect(pool.refCount(255)).toBe(1);
    expect(pool.refCount(257)).toBe(0);
    expect(pool.isFree(256)).toBe(false);
    // 299 usable, 256 held: 43 free, 257..299 in id order.
    expect(pool.numFree).toBe(43);
    pool.cacheBlockKey(256, 0, ...K0, NULL_BLOCK);
    expect(pool.cachedBlock(0, K0h)).toBe(256);
  });

  it("a pool of 2^28 + 1 pages (2^28 usable, the most keys its table allows) is made without storing every page", () => {
    // The table is sized for P - 1 = 2^28 keys, its limit; records and table start small.
    const pool = new BlockPool(2 ** 28 + 1, 1, false);
    expect(pool.numFree).toBe(2 ** 28);
    expect(pool.takeFree(2)).toEqual([1, 2]);
  });
});

describe("BlockPool: ids outside the pool", () => {
  it("a negative id is never free", () => {
    const pool = new BlockPool(6, 1, false);
    expect(pool.isFree(-1)).toBe(false);
    pool.takeFree(2); // 1, 2: the untouched range starts at 3
    expect(pool.isFree(-1)).toBe(false);
    expect(pool.isFree(-8)).toBe(false);
  });

  it("freeing an id outside 1..P-1 throws a RangeError naming the range, and changes nothing", () => {
    const pool = new BlockPool(6, 1, false);
    pool.takeFree(1); // 1
    expect(() => pool.free([6])).toThrow(RangeError);
    expect(() => pool.free([6])).toThrow(/block id 6 outside 1\.\.5/);
    expect(() => pool.free([-1])).toThrow(/block id -1 outside 1\.\.5/);
    expect(() => pool.freeTableTailFirst(tableOf([7]), [])).toThrow(/block id 7 outside 1\.\.5/);
    // Still 4 free (2..5), 1 held.
    expect(pool.numFree).toBe(4);
    expect(pool.freeQueueOrder()).toEqual([2, 3, 4, 5]);
  });

  it("freeing a block never taken (past the first records) throws: it is already free", () => {
    // 300 pages: block 280 has no record yet and sits in the untouched range.
    const pool = new BlockPool(300, 1, false);
    expect(() => pool.free([280])).toThrow(/block 280 is already in the free queue/);
    expect(pool.numFree).toBe(299);
  });
});

describe("BlockPool: a hit on the first untouched block", () => {
  it("takes it out of the queue: the untouched range then starts after it", () => {
    const pool = new BlockPool(6, 1, false);
    pool.touch([1]); // queue was [1..5]
    expect(pool.isFree(1)).toBe(false);
    expect(pool.refCount(1)).toBe(1);
    expect(pool.freeQueueOrder()).toEqual([2, 3, 4, 5]);
    expect(pool.takeFree(4)).toEqual([2, 3, 4, 5]);
    // After some takes, the first untouched block again: 3 (1, 2 taken).
    const pool2 = new BlockPool(6, 1, false);
    pool2.takeFree(2);
    pool2.touch([3]);
    expect(pool2.freeQueueOrder()).toEqual([4, 5]);
    expect(pool2.isFree(3)).toBe(false);
  });
});

describe("BlockPool: free-queue rings past their first 8 slots", () => {
  it("the back ring keeps 10 hashed blocks freed in a row in order", () => {
    const pool = new BlockPool(12, 1, false);
    const taken = pool.takeFree(10); // 1..10; queue [11]
    for (const b of taken) pool.cacheBlockKey(b, 0, 0x100 + b, 0x200 + b, NULL_BLOCK);
    // Hashed: each goes to the back, after the untouched 11, in the order freed (10 pushes to a
    // ring of 8 slots: it is rebuilt larger on the 9th).
    pool.free([3, 1, 4, 10, 5, 9, 2, 6, 8, 7]);
    expect(pool.freeQueueOrder()).toEqual([11, 3, 1, 4, 10, 5, 9, 2, 6, 8, 7]);
    expect(pool.numFree).toBe(11);
    expect(pool.takeFree(11)).toEqual([11, 3, 1, 4, 10, 5, 9, 2, 6, 8, 7]);
  });

  it("the front ring keeps 10 unhashed blocks freed in one call in order", () => {
    const pool = new BlockPool(12, 1, false);
    pool.takeFree(10); // 1..10; queue [11]
    // Fresh blocks go to the front, before the untouched 11, in the order given (10 pushes to a
    // ring of 8 slots).
    pool.free([3, 1, 4, 10, 5, 9, 2, 6, 8, 7]);
    expect(pool.freeQueueOrder()).toEqual([3, 1, 4, 10, 5, 9, 2, 6, 8, 7, 11]);
    expect(pool.takeFree(11)).toEqual([3, 1, 4, 10, 5, 9, 2, 6, 8, 7, 11]);
  });

  it("a hit deep in the untouched range moves the 11 ids before it to the front part, in id order", () => {
    const pool = new BlockPool(20, 1, false);
    // Untouched 1..19: 1..11 move to the end of the (empty) front part in id order (11 pushes to a
    // ring of 8 slots), 12 is taken, 13..19 stay untouched after them.
    pool.touch([12]);
    const rest = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19];
    expect(pool.freeQueueOrder()).toEqual(rest);
    expect(pool.numFree).toBe(18);
    expect(pool.takeFree(18)).toEqual(rest);
  });
});

describe("BlockPool: run links", () => {
  it("a linked group refuses a parent block that caches no key", () => {
    const pool = new BlockPool(6, 1, false, [true]);
    pool.takeFree(2); // 1, 2, both unhashed
    expect(() => pool.cacheBlockKey(2, 0, ...K1, 1)).toThrow(/parent block 1 of block 2 has no first copy/);
  });

  it("evicting a block whose run link names a block evicted and retaken since leaves that block unhashed", () => {
    // 1 caches K0, 2 caches K1 after it: 1's CHILD names 2. P = 4: usable 1..3.
    const pool = new BlockPool(4, 1, false, [true]);
    pool.takeFree(2); // 1, 2
    pool.cacheBlockKey(1, 0, ...K0, NULL_BLOCK);
    pool.cacheBlockKey(2, 0, ...K1, 1);
    pool.free([2, 1]); // both hashed, to the back: queue [3, 2, 1]
    expect(pool.takeFree(2)).toEqual([3, 2]); // 2 evicted (K1 gone), held again unhashed
    expect(pool.isHashed(2)).toBe(false);
    pool.free([3]); // queue [3, 1]
    expect(pool.takeFree(2)).toEqual([3, 1]); // 1 evicted: its stale link to 2 is dropped
    expect(pool.isHashed(2)).toBe(false);
    expect(pool.cacheSnapshot()).toEqual([]);
    // 2 can still be cached (it has no hash).
    expect(pool.cacheBlockKey(2, 0, ...K2, NULL_BLOCK)).toBe(true);
  });
});

describe("BlockPool: cacheTableRun", () => {
  it("skips null entries and blocks already cached; links the rest to the entry before", () => {
    const pool = new BlockPool(8, 1, false, [true]);
    pool.takeFree(3); // 1, 2, 3
    pool.cacheBlockKey(2, 0, ...K1, NULL_BLOCK); // already cached: skipped by the run
    // Table [0, 2, 3] (a window that dropped its first block): keys for entries 0..2.
    pool.cacheTableRun(tableOf([NULL_BLOCK, 2, 3]), 0, 3, 0, keysFor(K0, [0x99, 0x98], K2));
    // 2 keeps K1 (not the run's 0x99:0x98); 3 caches K2 after 2.
    expect(pool.holdsKey(2, 0, ...K1)).toBe(true);
    expect(pool.findFirst(0, 2, ...K2)).toBe(3);
    expect(pool.cachedBlock(0, (0x12n << 32n) | 0x22n)).toBe(3);
    expect(pool.findFirst(0, NULL_BLOCK, 0x99, 0x98)).toBe(NULL_BLOCK);
    expect(pool.isHashed(NULL_BLOCK)).toBe(false);
  });

  it("caches a run from `from`, each key in its order", () => {
    const pool = new BlockPool(8, 1, false, [true]);
    pool.takeFree(3); // 1, 2, 3
    pool.cacheBlockKey(1, 0, ...K0, NULL_BLOCK);
    // Entries 1..2 of the table [1, 2, 3]: keys[0..1] for entry 1, keys[2..3] for entry 2.
    pool.cacheTableRun(tableOf([1, 2, 3]), 1, 3, 0, keysFor(K1, K2));
    expect(pool.findFirst(0, 1, ...K1)).toBe(2);
    expect(pool.findFirst(0, 2, ...K2)).toBe(3);
    expect(pool.cacheSnapshot().length).toBe(3);
  });

  it("a second table with the same keys adds copies, found through the first table's run", () => {
    const pool = new BlockPool(8, 1, false, [true]);
    pool.takeFree(4); // 1..4
    // The first table cached block by block: 1 under K0 (first, in the table), 2 under K1 after it
    // (linked from 1, so K1 is not in the table).
    pool.cacheBlockKey(1, 0, ...K0, NULL_BLOCK);
    pool.cacheBlockKey(2, 0, ...K1, 1);
    expect(pool.findFirst(0, NULL_BLOCK, ...K1)).toBe(NULL_BLOCK); // only the link finds it
    // The second table as a run: 3 is K0's second copy; 4's parent entry 3 holds K0, whose first
    // copy 1 links to 2: 4 is K1's second copy (K1 then enters the table).
    pool.cacheTableRun(tableOf([3, 4]), 0, 2, 0, keysFor(K0, K1));
    // Sorted as strings: K0h = 68719476768, K1h = 73014444065.
    expect(pool.cacheSnapshot()).toEqual([`0:${K0h}:1/3`, `0:${K1h}:2/4`]);
    expect(pool.findFirst(0, NULL_BLOCK, ...K1)).toBe(2);
  });

  it("a key already in the table gets a copy, not a second first copy, even right after its parent", () => {
    const pool = new BlockPool(8, 1, false, [true]);
    pool.takeFree(3); // 1, 2, 3
    pool.cacheBlockKey(3, 0, ...K1, NULL_BLOCK); // K1's first copy: 3
    pool.cacheTableRun(tableOf([1, 2]), 0, 2, 0, keysFor(K0, K1)); // 1: K0; 2: K1 again
    expect(pool.cacheSnapshot()).toEqual([`0:${K0h}:1`, `0:${K1h}:3/2`]);
    expect(pool.findFirst(0, 1, ...K1)).toBe(3);
  });

  it("a run branching off a block that already links a child keeps that child reachable", () => {
    const pool = new BlockPool(8, 1, false, [true]);
    pool.takeFree(3); // 1, 2, 3
    pool.cacheBlockKey(1, 0, ...K0, NULL_BLOCK);
    pool.cacheBlockKey(2, 0, ...K1, 1); // 1 links to 2 (K1)
    // Table [1, 3]: entry 1 (block 3, K2) branches off 1, whose link is taken: 3 enters the table.
    pool.cacheTableRun(tableOf([1, 3]), 1, 2, 0, keysFor(K2));
    expect(pool.findFirst(0, 1, ...K1)).toBe(2);
    expect(pool.findFirst(0, 1, ...K2)).toBe(3);
    expect(pool.findFirst(0, NULL_BLOCK, ...K2)).toBe(3);
  });

  it("refuses a free block in the run, as cacheBlockKey does", () => {
    const pool = new BlockPool(8, 1, false, [true]);
    pool.takeFree(2); // 1, 2
    pool.free([2]); // 2 free, unhashed: reference 0
    expect(() => {
      pool.cacheTableRun(tableOf([1, 2]), 0, 2, 0, keysFor(K0, K1));
    }).toThrow(/block 2 cannot be cached/);
  });

  it("in a group that is not linked, every key of the run is in the table", () => {
    const pool = new BlockPool(8, 2, false, [true, false]);
    pool.takeFree(3); // 1, 2, 3
    pool.cacheTableRun(tableOf([1, 2, 3]), 0, 3, 1, keysFor(K0, K1, K2));
    // Not linked: lookups walk no links (prev NULL_BLOCK), the table finds each key.
    expect(pool.findFirst(1, NULL_BLOCK, ...K0)).toBe(1);
    expect(pool.findFirst(1, NULL_BLOCK, ...K1)).toBe(2);
    expect(pool.findFirst(1, NULL_BLOCK, ...K2)).toBe(3);
  });
});
