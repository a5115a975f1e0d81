import { describe, expect, it } from "vitest";
import { BlockRecords, CHILD, COPY, FIRST, IN_TABLE, META, REF, STRIDE } from "./block-records.js";
import { NULL_BLOCK, PrefixIndex } from "./prefix-index.js";

// Keys as (hi, lo) pairs; any distinct values do.
const K = [0, 1, 2, 3].map((i) => [0x1000 + i, 0x2000 + i] as const);

/** An index over `pages` records whose blocks 1..pages - 1 are referenced (cacheable). */
function indexOf(pages: number, linked: readonly boolean[]): { rec: BlockRecords; index: PrefixIndex } {
  const rec = new BlockRecords(pages);
  for (let id = 1; id < pages; id++) rec.words[id * STRIDE + REF] = 1;
  return { rec, index: new PrefixIndex(rec, linked.length, linked) };
}

const meta = (rec: BlockRecords, id: number): number => rec.word(id, META);

describe("PrefixIndex", () => {
  it("links a run of first copies in a linked group, keeping only its head in the table", () => {
    const { rec, index } = indexOf(8, [true]);
    expect(index.cache(1, 0, ...K[0]!, NULL_BLOCK)).toBe(true);
    expect(index.cache(2, 0, ...K[1]!, 1)).toBe(true);
    expect(index.cache(3, 0, ...K[2]!, 2)).toBe(true);
    expect([meta(rec, 1), meta(rec, 2), meta(rec, 3)]).toEqual([1 | FIRST | IN_TABLE, 1 | FIRST, 1 | FIRST]);
    expect([rec.word(1, CHILD), rec.word(2, CHILD), rec.word(3, CHILD)]).toEqual([2, 3, 0]);
    // The walk finds each block from its parent's first copy; without the parent only the head.
    expect(index.findFirst(0, NULL_BLOCK, ...K[0]!)).toBe(1);
    expect(index.findFirst(0, 1, ...K[1]!)).toBe(2);
    expect(index.findFirst(0, 2, ...K[2]!)).toBe(3);
    expect(index.findFirst(0, NULL_BLOCK, ...K[2]!)).toBe(NULL_BLOCK);
    // The link names a block of another key: the table is asked (and misses).
    expect(index.findFirst(0, 1, ...K[3]!)).toBe(NULL_BLOCK);
    // Diagnostics scan for a key only linked.
    expect(index.cachedBlock(0, ...K[2]!)).toBe(3);
    expect(index.cachedBlock(0, ...K[3]!)).toBe(NULL_BLOCK);
  });

  it("puts every key in the table in a group that is not linked", () => {
    const { rec, index } = indexOf(8, [true, false]);
    index.cache(1, 1, ...K[0]!, NULL_BLOCK);
    index.cache(2, 1, ...K[1]!, 1);
    expect(meta(rec, 2)).toBe(2 | FIRST | IN_TABLE);
    expect(rec.word(1, CHILD)).toBe(0);
    expect(index.findFirst(1, NULL_BLOCK, ...K[1]!)).toBe(2);
    // The same key in group 0 is another key.
    expect(index.findFirst(0, NULL_BLOCK, ...K[1]!)).toBe(NULL_BLOCK);
    expect(index.holdsKey(2, 1, ...K[1]!)).toBe(true);
    expect(index.holdsKey(2, 0, ...K[1]!)).toBe(false);
    expect(index.holdsKey(2, 1, ...K[0]!)).toBe(false);
  });

  it("chains duplicate copies after the first, moving a linked key into the table", () => {
    const { rec, index } = indexOf(8, [true]);
    index.cache(1, 0, ...K[0]!, NULL_BLOCK);
    index.cache(2, 0, ...K[1]!, 1);
    expect(index.cache(3, 0, ...K[1]!, 1)).toBe(false);
    expect(index.cache(4, 0, ...K[1]!, NULL_BLOCK)).toBe(false);
    expect([meta(rec, 2), meta(rec, 3), meta(rec, 4)]).toEqual([1 | FIRST | IN_TABLE, 1, 1]);
    expect([rec.word(2, COPY), rec.word(3, COPY), rec.word(4, COPY)]).toEqual([3, 4, 0]);
    expect(index.findFirst(0, NULL_BLOCK, ...K[1]!)).toBe(2);
    expect(index.snapshot()).toEqual([`0:${(0x1000n << 32n) | 0x2000n}:1`, `0:${(0x1001n << 32n) | 0x2001n}:2/3/4`]);
  });

  it("a branch off a run goes to the table; a parent key with copies is found through the table", () => {
    const { rec, index } = indexOf(8, [true]);
    index.cache(1, 0, ...K[0]!, NULL_BLOCK);
    index.cache(2, 0, ...K[1]!, 1);
    index.cache(3, 0, ...K[2]!, 1);
    expect(meta(rec, 3)).toBe(1 | FIRST | IN_TABLE);
    // Block 4 copies key 0; a block cached after it links from the key's first copy, block 1... whose link is taken.
    index.cache(4, 0, ...K[0]!, NULL_BLOCK);
    index.cache(5, 0, ...K[3]!, 4);
    expect(meta(rec, 5)).toBe(1 | FIRST | IN_TABLE);
    expect(index.findFirst(0, 1, ...K[3]!)).toBe(5);
  });

  it("evicting a first copy whose key has copies promotes the next one; the last copy says so", () => {
    const { rec, index } = indexOf(8, [false]);
    index.cache(1, 0, ...K[0]!, NULL_BLOCK);
    index.cache(2, 0, ...K[0]!, NULL_BLOCK);
    index.cache(3, 0, ...K[0]!, NULL_BLOCK);
    expect(index.evict(2)).toBe(false); // a later copy: unlinked from the chain
    expect(rec.word(1, COPY)).toBe(3);
    expect(index.evict(1)).toBe(false);
    expect(meta(rec, 3)).toBe(1 | FIRST | IN_TABLE);
    expect(index.findFirst(0, NULL_BLOCK, ...K[0]!)).toBe(3);
    expect(index.evict(3)).toBe(true);
    expect(index.findFirst(0, NULL_BLOCK, ...K[0]!)).toBe(NULL_BLOCK);
    expect([meta(rec, 1), meta(rec, 2), meta(rec, 3), rec.word(1, COPY)]).toEqual([0, 0, 0, 0]);
    expect(index.snapshot()).toEqual([]);
  });

  it("evicting a run block moves the block linked after it into the table", () => {
    const { rec, index } = indexOf(8, [true]);
    index.cache(1, 0, ...K[0]!, NULL_BLOCK);
    index.cache(2, 0, ...K[1]!, 1);
    index.cache(3, 0, ...K[2]!, 2);
    // Block 2 is its key's only copy, linked: no table slot; its child 3 enters the table.
    expect(index.evict(2)).toBe(true);
    expect(rec.word(2, CHILD)).toBe(0);
    expect(meta(rec, 3)).toBe(1 | FIRST | IN_TABLE);
    expect(index.findFirst(0, NULL_BLOCK, ...K[2]!)).toBe(3);
    expect(index.findFirst(0, 1, ...K[1]!)).toBe(NULL_BLOCK);
    // The head leaves the table.
    expect(index.evict(1)).toBe(true);
    expect(index.findFirst(0, NULL_BLOCK, ...K[0]!)).toBe(NULL_BLOCK);
  });

  it("caches a table run as cache() on each real, unhashed block with its parent", () => {
    const { rec, index } = indexOf(16, [true]);
    const keys = Int32Array.from(K.flat());
    index.cache(3, 0, ...K[1]!, NULL_BLOCK); // already hashed: skipped
    index.cacheRun(Int32Array.of(2, 3, NULL_BLOCK, 4), 0, 4, 0, keys);
    expect([meta(rec, 2), meta(rec, 4)]).toEqual([1 | FIRST | IN_TABLE, 1 | FIRST | IN_TABLE]);
    // Keys read from `from` on: entries [1, 4) of a table take keys 0..2.
    const { rec: rec2, index: index2 } = indexOf(16, [true]);
    index2.cache(5, 0, ...K[3]!, NULL_BLOCK);
    index2.cacheRun(Int32Array.of(5, 6, 7), 1, 3, 0, keys);
    expect(rec2.word(5, CHILD)).toBe(6);
    expect(rec2.word(6, CHILD)).toBe(7);
    expect(index2.findFirst(0, 6, ...K[1]!)).toBe(7);
  });

  it("refuses to cache the null block, a hashed or unreferenced block, and a parent without a first copy", () => {
    const { rec, index } = indexOf(8, [true]);
    index.cache(1, 0, ...K[0]!, NULL_BLOCK);
    expect(() => index.cache(NULL_BLOCK, 0, ...K[1]!, NULL_BLOCK)).toThrow("pool invariant: block 0 cannot be cached");
    expect(() => index.cache(1, 0, ...K[1]!, NULL_BLOCK)).toThrow("pool invariant: block 1 cannot be cached");
    rec.words[2 * STRIDE + REF] = 0;
    expect(() => index.cache(2, 0, ...K[1]!, NULL_BLOCK)).toThrow("pool invariant: block 2 cannot be cached");
    expect(() => index.cache(9, 0, ...K[1]!, NULL_BLOCK)).toThrow("pool invariant: block 9 cannot be cached");
    // Block 3 is cached as a later copy whose key is not in the table: its first copy is unknown.
    rec.words[3 * STRIDE + META] = 1;
    expect(() => index.cache(4, 0, ...K[1]!, 3)).toThrow("pool invariant: parent block 3 of block 4 has no first copy");
  });
});
