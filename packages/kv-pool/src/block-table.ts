/**
 * A sequence's block table in one cache group: entries [0, numBlocks) of `blocks`, NULL_BLOCK (0)
 * where a block was skipped or never needed. `blocks` is longer than that (its capacity, a power
 * of two), and entries at or past `numBlocks` mean nothing: they may hold another table's old
 * entries (read none of them).
 *
 * Typed and recycled, not a `number[]`: a JavaScript array copied itself into a new backing store
 * about 1.5x as large each time it outgrew one, and those copies were the largest allocation of a
 * replay (about 100 MB of the 236 MB a first aggregated replay of the public Mooncake trace
 * allocated). A table's buffer now doubles when full, and the buffers of freed tables are kept
 * (up to SPARE_BUDGET bytes) for the next tables to grow into.
 */
export interface BlockTable {
  blocks: Int32Array;
  numBlocks: number;
}

/** The table of a sequence holding nothing; shared, never written (a table grows before any write). */
export const EMPTY_TABLE = new Int32Array(0);

/** Smallest capacity a table grows to (a power of two). */
const MIN_CAPACITY = 16;

/** At most this many bytes of freed table buffers are kept for reuse (the rest is left to the GC). */
export const SPARE_BUDGET = 16 * 2 ** 20;

/** Freed buffers by log2 of their capacity. */
const spare: Int32Array[][] = [];
let spareBytes = 0;

/** A buffer of `capacity` entries (a power of two): a freed one when kept, else a new one. */
function obtain(capacity: number): Int32Array {
  const list = spare[Math.log2(capacity)];
  if (list !== undefined && list.length > 0) {
    const b = list.pop()!;
    spareBytes -= b.byteLength;
    return b;
  }
  return new Int32Array(capacity);
}

/** Keeps a buffer no table uses any more, if the budget allows (only capacities this module made: powers of two). */
function recycle(b: Int32Array): void {
  if (b.length === 0 || (b.length & (b.length - 1)) !== 0 || spareBytes + b.byteLength > SPARE_BUDGET) return;
  const c = Math.log2(b.length);
  while (spare.length <= c) spare.push([]);
  spare[c]!.push(b);
  spareBytes += b.byteLength;
}

/** Makes room for `n` more entries (the buffer may be replaced: read `t.blocks` after this). */
export function reserveBlocks(t: BlockTable, n: number): void {
  const need = t.numBlocks + n;
  if (need <= t.blocks.length) return;
  let capacity = MIN_CAPACITY;
  while (capacity < need) capacity *= 2;
  const grown = obtain(capacity);
  grown.set(t.blocks.subarray(0, t.numBlocks));
  recycle(t.blocks);
  t.blocks = grown;
}

/** Appends one entry. */
export function pushBlock(t: BlockTable, b: number): void {
  // Stryker disable next-line ConditionalExpression: KP-69
  if (t.numBlocks === t.blocks.length) reserveBlocks(t, 1);
  t.blocks[t.numBlocks++] = b;
}

/** Empties a table, keeping its buffer for another one. */
export function releaseTable(t: BlockTable): void {
  recycle(t.blocks);
  t.blocks = EMPTY_TABLE;
  t.numBlocks = 0;
}

/** The table's entries as a plain array (tests and diagnostics). */
export function tableEntries(t: BlockTable): number[] {
  return Array.from(t.blocks.subarray(0, t.numBlocks));
}

/** Drops every kept buffer (tests: a known start). */
export function dropSpareTables(): void {
  spare.length = 0;
  spareBytes = 0;
}
