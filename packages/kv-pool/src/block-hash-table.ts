import { failure, rangeFailure } from "./errors.js";
/**
 * An open-addressing hash table from a key (group index, 64-bit block hash given as its high and
 * low 32-bit halves) to a non-negative int32 value, on typed arrays: no BigInt and no allocation
 * per operation. Linear probing; deletion shifts later entries of the probe run back, so there
 * are no tombstones and lookups stay short however many keys come and go.
 *
 * The capacity is a power of two at least twice `maxEntries`, so the load factor stays at or below
 * 1/2; with `grow`, the table starts small and doubles (rehashing) as keys arrive, up to that
 * size, so its memory follows the keys actually held. The home slot depends on the low half and the group only (block hashes are XXH3
 * output, so their low bits are already uniform): keys differing only in their high half collide,
 * which the tests use to build probe runs by hand.
 */
// Surviving mutants: KP-01 (MUTANTS.md).
const GROUP = 0;
const HI = 1;
const LO = 2;
const VALUE = 3;

export class BlockHashTable {
  /**
   * Slot s is words [4s, 4s + 4): group, high half, low half, value (-1: empty). One array keeps
   * a slot's fields in one cache line: a probe costs one memory access, not four.
   */
  private words: Int32Array;
  private mask: number;
  private count = 0;

  constructor(
    readonly maxEntries: number,
    options: { readonly grow?: boolean } = {},
  ) {
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1 || maxEntries > 2 ** 28) {
      throw new RangeError(`maxEntries must be an integer in 1..2^28, got ${maxEntries}`);
    }
    let capacity = 4;
    while (capacity < 2 * maxEntries) capacity *= 2;
    if (options.grow === true) capacity = Math.min(capacity, 16);
    this.mask = capacity - 1;
    this.words = BlockHashTable.emptyWords(capacity);
  }

  private static emptyWords(capacity: number): Int32Array {
    const words = new Int32Array(capacity * 4);
    // Surviving mutants: KP-02 (MUTANTS.md).
    for (let s = 0; s < capacity; s++) words[4 * s + VALUE] = -1;
    return words;
  }

  /** Doubles the capacity and reinserts every entry. */
  private grow(): void {
    const old = this.words;
    const capacity = 2 * (this.mask + 1);
    this.mask = capacity - 1;
    const w = BlockHashTable.emptyWords(capacity);
    this.words = w;
    // Surviving mutants: KP-03 (MUTANTS.md).
    for (let at = 0; at < old.length; at += 4) {
      if (old[at + VALUE]! < 0) continue;
      let slot = this.homeSlot(old[at + GROUP]!, old[at + LO]!);
      while (w[4 * slot + VALUE]! >= 0) slot = (slot + 1) & this.mask;
      // Four words copied one by one: a subarray per entry was garbage for millions of keys.
      const to = 4 * slot;
      w[to + GROUP] = old[at + GROUP]!;
      w[to + HI] = old[at + HI]!;
      w[to + LO] = old[at + LO]!;
      w[to + VALUE] = old[at + VALUE]!;
    }
  }

  /** Number of slots (a power of two; >= 2 x maxEntries unless the table grows, then >= 2 x size). */
  get capacity(): number {
    return this.mask + 1;
  }

  get size(): number {
    return this.count;
  }

  /** The slot where probing for (group, lo) starts: (lo XOR group) mod capacity. */
  homeSlot(group: number, lo: number): number {
    return (lo ^ group) & this.mask;
  }

  /** The value stored under the key, or -1. */
  get(group: number, hi: number, lo: number): number {
    const slot = this.find(group, hi, lo);
    return slot < 0 ? -1 : this.words[4 * slot + VALUE]!;
  }

  /** The slot holding the key, or -1 (for `valueAt`, `setValueAt`, `deleteAt`: one probe, several uses). */
  find(group: number, hi: number, lo: number): number {
    const w = this.words;
    const h = hi | 0;
    const l = lo | 0;
    let slot = this.homeSlot(group, lo);
    for (;;) {
      const at = 4 * slot;
      if (w[at + VALUE]! < 0) return -1;
      if (w[at + LO] === l && w[at + HI] === h && w[at + GROUP] === group) return slot;
      slot = (slot + 1) & this.mask;
    }
  }

  /**
   * Reads the home slots of `n` keys of one group (`keys` as int32 halves, high then low, as
   * `PackedHashView.blockKeysInto` writes them) and returns what it read, folded: a prefetch. The
   * loads are independent, so their cache misses overlap, and lookups of those keys right after
   * find their first slot in cache. Changes nothing.
   */
  touchHomes(group: number, keys: Int32Array, n: number): number {
    const w = this.words;
    const mask = this.mask;
    let s = 0;
    // Stryker disable next-line all: KP-04
    for (let k = 0; k < n; k++) s ^= w[4 * ((keys[2 * k + 1]! ^ group) & mask) + VALUE]!;
    return s;
  }

  /** The value in an occupied slot returned by `find`. */
  valueAt(slot: number): number {
    return this.words[4 * slot + VALUE]!;
  }

  /** Replaces the value in an occupied slot returned by `find`. */
  setValueAt(slot: number, value: number): void {
    if (!Number.isInteger(value) || value < 0 || value > 0x7fffffff) throw rangeFailure("value must be a non-negative int32, got {0}", value);
    this.words[4 * slot + VALUE] = value;
  }

  /**
   * Stores `value` (>= 0) under the key when it is absent and returns -1; when present, changes
   * nothing and returns the value it has. One probe either way.
   */
  putIfAbsent(group: number, hi: number, lo: number, value: number): number {
    if (!Number.isInteger(value) || value < 0 || value > 0x7fffffff) throw rangeFailure("value must be a non-negative int32, got {0}", value);
    const w = this.words;
    const h = hi | 0;
    const l = lo | 0;
    let slot = this.homeSlot(group, lo);
    for (;;) {
      const at = 4 * slot;
      const v = w[at + VALUE]!;
      if (v < 0) break;
      if (w[at + LO] === l && w[at + HI] === h && w[at + GROUP] === group) return v;
      slot = (slot + 1) & this.mask;
    }
    if (this.count >= this.maxEntries) throw new Error(`hash table invariant: more than ${this.maxEntries} keys`);
    // A growing table stops at the capacity maxEntries needs without a test of its own: that
    // capacity is >= 2 x maxEntries and count + 1 <= maxEntries here, so the load test is false there.
    if (2 * (this.count + 1) > this.mask + 1) {
      this.grow();
      return this.putIfAbsent(group, hi, lo, value);
    }
    const at = 4 * slot;
    w[at + GROUP] = group;
    w[at + HI] = h;
    w[at + LO] = l;
    w[at + VALUE] = value;
    this.count++;
    return -1;
  }

  /** Stores `value` (>= 0) under the key, replacing any value it had. */
  set(group: number, hi: number, lo: number, value: number): void {
    const slot = this.find(group, hi, lo);
    if (slot >= 0) this.setValueAt(slot, value);
    else this.putIfAbsent(group, hi, lo, value);
  }

  /** Removes the key; returns false when it was absent. */
  delete(group: number, hi: number, lo: number): boolean {
    const slot = this.find(group, hi, lo);
    if (slot < 0) return false;
    this.deleteAt(slot);
    return true;
  }

  /** Empties an occupied slot returned by `find`. */
  deleteAt(slot: number): void {
    const w = this.words;
    if (w[4 * slot + VALUE]! < 0) throw failure("hash table: slot {0} is empty", slot);
    // Backward shift: an entry later in the run moves into the hole unless its home slot lies
    // cyclically in (hole, next], where moving it would put it before its home.
    let hole = slot;
    let next = slot;
    for (;;) {
      next = (next + 1) & this.mask;
      const at = 4 * next;
      if (w[at + VALUE]! < 0) break;
      const home = this.homeSlot(w[at + GROUP]!, w[at + LO]!);
      // Surviving mutants: KP-05 (MUTANTS.md).
      const stays = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (stays) continue;
      const to = 4 * hole;
      w[to + GROUP] = w[at + GROUP]!;
      w[to + HI] = w[at + HI]!;
      w[to + LO] = w[at + LO]!;
      w[to + VALUE] = w[at + VALUE]!;
      hole = next;
    }
    w[4 * hole + VALUE] = -1;
    this.count--;
  }

  /** Every entry as [group, hi, lo, value], in slot order (O(capacity): tests and diagnostics). */
  entries(): [number, number, number, number][] {
    const w = this.words;
    const out: [number, number, number, number][] = [];
    // Surviving mutants: KP-06 (MUTANTS.md).
    for (let at = 0; at < w.length; at += 4) {
      const v = w[at + VALUE]!;
      if (v >= 0) out.push([w[at + GROUP]!, w[at + HI]! >>> 0, w[at + LO]! >>> 0, v]);
    }
    return out;
  }
}
