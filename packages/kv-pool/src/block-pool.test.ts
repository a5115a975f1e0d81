import { describe, expect, it } from "vitest";
import { BlockPool, NULL_BLOCK } from "./block-pool.js";

describe("BlockPool runs", () => {
  // Keys as (hi, lo) pairs; any distinct values do.
  const K = [0, 1, 2, 3].map((i) => [0x1000 + i, 0x2000 + i] as const);

  it("a block cached after the first copy of its parent key is found through the parent, not the table", () => {
    const pool = new BlockPool(8, 1, false, [true]);
    pool.takeFree(3); // 1, 2, 3
    expect(pool.cacheBlockKey(1, 0, ...K[0]!, NULL_BLOCK)).toBe(true);
    expect(pool.cacheBlockKey(2, 0, ...K[1]!, 1)).toBe(true);
    // A branch from the same parent: the link is taken, so this key goes to the table.
    expect(pool.cacheBlockKey(3, 0, ...K[2]!, 1)).toBe(true);
    expect(pool.findFirst(0, 1, ...K[1]!)).toBe(2);
    expect(pool.findFirst(0, 1, ...K[2]!)).toBe(3);
    // Without the parent the linked key is not in the table; the branch is.
    expect(pool.findFirst(0, NULL_BLOCK, ...K[1]!)).toBe(NULL_BLOCK);
    expect(pool.findFirst(0, NULL_BLOCK, ...K[2]!)).toBe(3);
    // Diagnostics find every key.
    expect(pool.cachedBlock(0, (0x1001n << 32n) | 0x2001n)).toBe(2);
  });

  it("evicting a run's parent moves its linked child into the table", () => {
    const pool = new BlockPool(4, 1, false, [true]);
    pool.takeFree(2); // 1, 2
    pool.cacheBlockKey(1, 0, ...K[0]!, NULL_BLOCK);
    pool.cacheBlockKey(2, 0, ...K[1]!, 1);
    pool.free([1]); // hashed: to the back; queue [3, 1]
    pool.takeFree(2); // 3, then 1 is evicted
    expect(pool.isHashed(1)).toBe(false);
    expect(pool.findFirst(0, NULL_BLOCK, ...K[1]!)).toBe(2);
  });

  it("a stale link to a block re-cached in another group puts that block's own key in the table", () => {
    const pool = new BlockPool(4, 2, false, [true, true]);
    pool.takeFree(2); // 1, 2
    pool.cacheBlockKey(1, 0, ...K[0]!, NULL_BLOCK);
    pool.cacheBlockKey(2, 0, ...K[1]!, 1); // 1 links to 2
    pool.free([2, 1]); // queue [3, 2, 1]
    pool.takeFree(2); // 3, then 2 (evicted: 1's link to it is now stale)
    pool.cacheBlockKey(3, 1, ...K[2]!, NULL_BLOCK);
    pool.cacheBlockKey(2, 1, ...K[3]!, 3); // group 1: 3 links to 2
    pool.takeFree(1); // evicts 1, whose stale link still names 2
    expect(pool.findFirst(1, NULL_BLOCK, ...K[3]!)).toBe(2);
    expect(pool.findFirst(0, NULL_BLOCK, ...K[3]!)).toBe(NULL_BLOCK);
    expect(pool.findFirst(1, 3, ...K[3]!)).toBe(2);
  });
});
