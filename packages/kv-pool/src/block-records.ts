/**
 * The block pool's per-block state: one record of STRIDE int32 words per block id, all in one
 * `Int32Array`, read and written as `words[id * STRIDE + FIELD]`.
 *
 * Why this instead of one object per block (or one array per field): every pool operation on a
 * block (take, free, hit, cache, evict) reads or writes several of its fields (reference count,
 * key, links, free-queue entry), and a record of 8 words keeps them on one 32-byte line, so
 * touching a block costs one cache miss, not one per field; a typed array of plain int32 holds no
 * pointers for the garbage collector to trace and keeps every access monomorphic. Records exist
 * only for blocks taken at least once (`reach` grows the array by doubling), so a pool's memory
 * grows with the pages it uses, not with its size (1,024 pools of 2^24 pages cost a few MB).
 *
 * The structures that share the records each own some fields: the free queue (`free-queue.ts`)
 * QPOS, the prefix index (`prefix-index.ts`) META, HI, LO, COPY and CHILD, the pool REF and
 * OWNER. They hold this object, not its array, because growing replaces the array: read
 * `words` again after anything that may call `reach`.
 */

/** Words per block record (a power of two: the fields of a block share one 32-byte line). */
export const STRIDE = 8;
/** Reference count. */
export const REF = 0;
/** 0 when the block has no hash; else (group + 1) | FIRST | IN_TABLE. */
export const META = 1;
/** The cached block's hash as two 32-bit halves. */
export const HI = 2;
export const LO = 3;
/** The next block cached under the same key, in caching order; 0 at the end. */
export const COPY = 4;
/** Linked groups: the first block cached right after this one in a sequence, as a lookup hint; 0 when none. */
export const CHILD = 5;
/** The group whose table took the block (group + 1; 0 when taken without one). */
export const OWNER = 6;
/**
 * The block's entry in the free queue: 0 when it has none; b > 0 for position b of the back
 * ring, -f for position f of the front ring (see `FreeQueue`).
 */
export const QPOS = 7;

/** META: the group + 1 of a cached block. */
export const GROUP_MASK = 0xff_ffff;
/** META: the key's first copy (the block hits use). */
export const FIRST = 1 << 24;
/** META: the key is in the hash table (with this block, its first copy, as the value). */
export const IN_TABLE = 1 << 25;

/** Block records stored before any growth. */
const INITIAL_BLOCKS = 256;

export class BlockRecords {
  /** The records; replaced (grown) by `reach`. */
  words: Int32Array;
  /** Block ids with a record (records of higher ids are implicitly zero). */
  cap: number;

  constructor(readonly numPages: number) {
    this.cap = Math.min(numPages, INITIAL_BLOCKS);
    this.words = new Int32Array(this.cap * STRIDE);
  }

  /** Makes room for the record of `id` (id < numPages). */
  reach(id: number): void {
    // Stryker disable next-line ConditionalExpression: KP-08
    if (id < this.cap) return;
    let cap = this.cap;
    while (cap <= id) cap *= 2;
    // Stryker disable next-line MethodExpression: KP-09
    cap = Math.min(cap, this.numPages);
    const grown = new Int32Array(cap * STRIDE);
    grown.set(this.words);
    this.words = grown;
    this.cap = cap;
  }

  /** A field of a block's record (0 for a block without one). */
  word(id: number, field: number): number {
    return id < this.cap ? this.words[id * STRIDE + field]! : 0;
  }

  /**
   * Reads the records of ids[from, to) (a prefetch): the loads are independent, so the CPU
   * overlaps their cache misses, and the loop that then works on the blocks finds them in cache.
   * Changes nothing; returns the words read, folded (for the caller to keep, so the reads stay).
   */
  // Stryker disable next-line BlockStatement: KP-38
  prefetch(ids: Int32Array, from: number, to: number): number {
    const r = this.words;
    const cap = this.cap;
    let s = 0;
    // Stryker disable next-line all: KP-39
    for (let i = from; i < to; i++) {
      const id = ids[i]!;
      // Stryker disable next-line all: KP-40
      if (id < cap) s ^= r[id * STRIDE]!;
    }
    return s;
  }
}
