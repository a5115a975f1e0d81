import { describe, expect, it } from "vitest";
import { dropSpareTables, EMPTY_TABLE, pushBlock, releaseTable, reserveBlocks, SPARE_BUDGET, tableEntries, type BlockTable } from "./block-table.js";

const empty = (): BlockTable => ({ blocks: EMPTY_TABLE, numBlocks: 0 });

describe("block tables", () => {
  it("grow to the next power of two (at least 16) and keep their entries", () => {
    dropSpareTables();
    const t = empty();
    reserveBlocks(t, 1);
    expect(t.blocks.length).toBe(16);
    for (let i = 1; i <= 16; i++) pushBlock(t, i);
    expect(t.blocks.length).toBe(16);
    // The 17th entry doubles the capacity; a reservation of 100 more needs 117 -> 128.
    pushBlock(t, 17);
    expect(t.blocks.length).toBe(32);
    reserveBlocks(t, 100);
    expect(t.blocks.length).toBe(128);
    expect(t.numBlocks).toBe(17);
    expect(tableEntries(t)).toEqual(Array.from({ length: 17 }, (_, i) => i + 1));
    // Room enough: the buffer stays.
    const b = t.blocks;
    reserveBlocks(t, 111);
    expect(t.blocks).toBe(b);
  });

  it("a released table is empty, and the next table of that capacity grows into its buffer", () => {
    dropSpareTables();
    const a = empty();
    for (let i = 0; i < 20; i++) pushBlock(a, 7);
    const buf = a.blocks;
    expect(buf.length).toBe(32);
    releaseTable(a);
    expect(a.numBlocks).toBe(0);
    expect(a.blocks).toBe(EMPTY_TABLE);
    const b = empty();
    reserveBlocks(b, 17);
    expect(b.blocks).toBe(buf);
    // Only entries below numBlocks count: the 7s left in the buffer are not the table's.
    pushBlock(b, 3);
    expect(tableEntries(b)).toEqual([3]);
    // A different capacity does not take it; the buffer a growth leaves behind is kept too.
    const c = empty();
    reserveBlocks(c, 5);
    const small = c.blocks;
    expect(small.length).toBe(16);
    reserveBlocks(c, 17);
    const d = empty();
    reserveBlocks(d, 3);
    expect(d.blocks).toBe(small);
  });

  it("keeps at most SPARE_BUDGET bytes of buffers, and none it did not make", () => {
    dropSpareTables();
    // Buffers of 2^20 entries (4 MiB): the budget keeps budget / 4 MiB of them.
    const perBuffer = 4 * 2 ** 20;
    const kept = SPARE_BUDGET / perBuffer;
    const tables = Array.from({ length: kept + 1 }, () => {
      const t = empty();
      reserveBlocks(t, 2 ** 20);
      return t;
    });
    const buffers = tables.map((t) => t.blocks);
    for (const t of tables) releaseTable(t);
    // Taken back last kept first; the one over the budget was not kept, so the last take is new.
    const again = Array.from({ length: kept + 1 }, () => {
      const t = empty();
      reserveBlocks(t, 2 ** 20);
      return t.blocks;
    });
    // Compared by identity as booleans (matchers on 4 MiB arrays format them, slowly).
    expect(again.map((b) => buffers.indexOf(b))).toEqual([...Array.from({ length: kept }, (_, i) => kept - 1 - i), -1]);
    // Taking them back gave their bytes back to the budget: released again, all but the new one are kept.
    const again2 = Array.from({ length: kept + 1 }, (_, i) => ({ blocks: again[i]!, numBlocks: 0 }));
    for (const t of again2) releaseTable(t);
    const third = Array.from({ length: kept }, () => {
      const t = empty();
      reserveBlocks(t, 2 ** 20);
      return t.blocks;
    });
    expect(third.map((b) => again.indexOf(b))).toEqual(Array.from({ length: kept }, (_, i) => kept - 1 - i));
    // dropSpareTables forgets every kept buffer.
    releaseTable({ blocks: third[0]!, numBlocks: 0 });
    dropSpareTables();
    const fresh = empty();
    reserveBlocks(fresh, 2 ** 20);
    expect(fresh.blocks === third[0]).toBe(false);
    // A table built elsewhere (not a power of two) is not kept.
    dropSpareTables();
    const odd: BlockTable = { blocks: new Int32Array(20), numBlocks: 0 };
    const oddBuf = odd.blocks;
    releaseTable(odd);
    const e = empty();
    reserveBlocks(e, 20);
    expect(e.blocks).not.toBe(oddBuf);
    expect(e.blocks.length).toBe(32);
  });
});
