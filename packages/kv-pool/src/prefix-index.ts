import { BlockHashTable } from "./block-hash-table.js";
import { CHILD, COPY, FIRST, GROUP_MASK, HI, IN_TABLE, LO, META, REF, STRIDE, type BlockRecords } from "./block-records.js";
import { joinHash } from "./hash-halves.js";
import { failure } from "./errors.js";

/** Block id of the null block: holds nothing, never allocated, freed or cached. */
export const NULL_BLOCK = 0;

/** Hash tables of more slots than this (16 bytes each: 256 KiB) are prefetched before a run of lookups. */
const PREFETCH_SLOTS = 1 << 14;

/**
 * The prefix cache: (group, block hash) -> the cached blocks holding that key, in caching order;
 * the first copy is the one hits use (vLLM allows duplicates, so block tables stay append-only).
 * A block's key and links live in its record (`block-records.ts`): META (group, FIRST, IN_TABLE),
 * HI:LO (the hash), COPY (the next copy of its key) and CHILD (its run link).
 *
 * Why this instead of a hash table holding every key: in a *linked* group (full attention) a
 * sequence caches consecutive blocks whose keys chain, and a hit walks them from block 0 in the
 * same order. A key whose only copy was cached right after the first copy of its parent key is
 * found from that block's CHILD link and stays out of the table; only the head of such a run (and
 * keys with several copies, or branching off a run) are in the table (`block-hash-table.ts`).
 * Caching or evicting a run block then touches no table slot (a random cache miss in a table of a
 * pool's every key); a run is split (its next block enters the table) only where an eviction or a
 * branch cuts it. Lookups give the same first copies as a table holding every key, so every
 * result is unchanged (the property tests compare the pool with `reference-pool.ts`, a `Map` of
 * every key). Other group kinds keep every key in the table.
 *
 * Invariant: a cached key is either in the table (mapping to its first copy, which has IN_TABLE),
 * or it has exactly one copy f, and the first copy p of its parent key has CHILD[p] = f.
 */
export class PrefixIndex {
  /** (group, hash) -> the first block caching it, for keys not reachable through a run link. */
  private readonly table: BlockHashTable;
  private readonly linked: Uint8Array;

  constructor(
    private readonly records: BlockRecords,
    numGroups: number,
    /** Per group: cached blocks chain in runs (full-attention groups, whose hits walk from block 0). */
    linkedGroups: readonly boolean[],
  ) {
    // Every key is held by at least one of the P - 1 usable pages; the table grows with the keys.
    this.table = new BlockHashTable(records.numPages - 1, { grow: true });
    this.linked = Uint8Array.from({ length: numGroups }, (_, g) => (linkedGroups[g] === true ? 1 : 0));
  }

  /** True when the block is cached under exactly (group, hi:lo). */
  holdsKey(id: number, group: number, hi: number, lo: number): boolean {
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-23
    if (id >= this.records.cap) return false;
    const r = this.records.words;
    const at = id * STRIDE;
    return (r[at + META]! & GROUP_MASK) === group + 1 && r[at + HI] === (hi | 0) && r[at + LO] === (lo | 0);
  }

  /** The first copy of (group, hi:lo), or NULL_BLOCK (diagnostics: a full scan when the key is only linked). */
  cachedBlock(group: number, hi: number, lo: number): number {
    const t = this.table.get(group, hi, lo);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-24
    if (t >= 0) return t;
    // Stryker disable next-line EqualityOperator: KP-25
    // Surviving mutants: KP-26 (MUTANTS.md).
    for (let id = 1; id < this.records.cap; id++) if (this.holdsKey(id, group, hi, lo) && (this.records.words[id * STRIDE + META]! & FIRST) !== 0) return id;
    return NULL_BLOCK;
  }

  /** The copy of the same key cached after this one, or NULL_BLOCK. */
  nextCopy(id: number): number {
    return this.records.words[id * STRIDE + COPY]!;
  }

  /**
   * The first copy of (group, hi:lo), or NULL_BLOCK. `prev` is the first copy of the parent key
   * found by the same walk (NULL_BLOCK at block 0, or in a group that is not linked): its run
   * link is tried before the table.
   */
  findFirst(group: number, prev: number, hi: number, lo: number): number {
    // Stryker disable next-line ConditionalExpression: KP-27
    if (prev !== NULL_BLOCK) {
      const r = this.records.words;
      const c = r[prev * STRIDE + CHILD]!;
      // Stryker disable next-line ConditionalExpression: KP-28
      if (c !== 0) {
        const at = c * STRIDE;
        const meta = r[at + META]!;
        if ((meta & GROUP_MASK) === group + 1 && r[at + LO] === (lo | 0) && r[at + HI] === (hi | 0)) {
          if ((meta & FIRST) !== 0) return c;
          // A later copy: its key has several, so the table holds it.
        }
      }
    }
    const t = this.table.get(group, hi, lo);
    // Stryker disable next-line EqualityOperator: KP-29
    return t < 0 ? NULL_BLOCK : t;
  }

  /**
   * Caches a referenced, unhashed block under (group, hi:lo); true when it is the key's first
   * copy. `parent` is the block before it in the sequence's table (cached under the parent key),
   * or NULL_BLOCK: a linked group chains the block to the parent key's first copy when it can.
   */
  cache(id: number, group: number, hi: number, lo: number, parent: number): boolean {
    const r = this.records.words;
    // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator,ArithmeticOperator: KP-48
    if (id === NULL_BLOCK || id >= this.records.cap || r[id * STRIDE + META] !== 0 || r[id * STRIDE + REF]! <= 0) {
      throw failure("pool invariant: block {0} cannot be cached", id);
    }
    const at = id * STRIDE;
    const linked = this.linked[group] === 1 && parent !== NULL_BLOCK;
    // The parent key's first copy (several copies put the parent key in the table).
    let pf = NULL_BLOCK;
    if (linked) {
      const pm = r[parent * STRIDE + META]!;
      pf = (pm & FIRST) !== 0 ? parent : this.table.get(group, r[parent * STRIDE + HI]!, r[parent * STRIDE + LO]!);
      // Stryker disable next-line EqualityOperator: KP-49
      if (pf < 0) throw failure("pool invariant: parent block {0} of block {1} has no first copy", parent, id);
    }
    const first = this.findFirst(group, pf, hi, lo);
    r[at + HI] = hi;
    r[at + LO] = lo;
    if (first === NULL_BLOCK) {
      r[at + META] = (group + 1) | FIRST;
      // Stryker disable next-line ConditionalExpression: KP-50
      const c = pf === NULL_BLOCK ? 0 : r[pf * STRIDE + CHILD]!;
      // Stryker disable next-line LogicalOperator: KP-51
      // Surviving mutants: KP-52 (MUTANTS.md).
      if (pf !== NULL_BLOCK && (c === 0 || !this.isRunDependent(c))) {
        r[pf * STRIDE + CHILD] = id;
      } else {
        this.table.putIfAbsent(group, hi, lo, id);
        r[at + META] = r[at + META]! | IN_TABLE;
      }
      return true;
    }
    // A duplicate copy goes last: the first copy stays the one hits use; a key with copies lives in the table.
    r[at + META] = group + 1;
    const fm = r[first * STRIDE + META]!;
    // Stryker disable next-line ConditionalExpression: KP-53
    if ((fm & IN_TABLE) === 0) {
      this.table.putIfAbsent(group, hi, lo, first);
      r[first * STRIDE + META] = fm | IN_TABLE;
    }
    let last = first;
    for (let n = r[last * STRIDE + COPY]!; n !== 0; n = r[last * STRIDE + COPY]!) last = n;
    r[last * STRIDE + COPY] = id;
    return false;
  }

  /**
   * `cache` on the real, unhashed blocks of blocks[from, to) in order: block i under (group,
   * keys[2(i - from)] : keys[2(i - from) + 1]), with blocks[i - 1] as its parent (NULL_BLOCK at 0);
   * returns a value read by a prefetch (for the caller to keep).
   *
   * Why inline: a replay caches tens of millions of blocks this way, nearly all of them
   * the common case of a run, which is inline here (calling `cache` for each measured 8-10% more
   * CPU per request on the aggregated replay-engine bench). The reference-pool properties
   * without events (kv-cache-manager.prop.test.ts, block-runs-lockstep.prop.test.ts) compare its
   * results with a pool that caches one block at a time.
   */
  cacheRun(blocks: Int32Array, from: number, to: number, group: number, keys: Int32Array): number {
    let sink = 0;
    // Each new key is looked up in the table (a random slot): when the table is too big to stay
    // in cache (as in groups whose every key is in it), load those slots together first. Linked
    // groups keep only run heads in the table, which stays small: the extra pass would only cost.
    // Stryker disable next-line all: KP-55
    if (this.table.capacity > PREFETCH_SLOTS) sink = this.table.touchHomes(group, keys, to - from);
    // Caching allocates no record: the record array stays.
    const r = this.records.words;
    const cap = this.records.cap;
    // Stryker disable next-line ConditionalExpression: KP-54
    const linked = this.linked[group] === 1;
    const firstMeta = (group + 1) | FIRST;
    for (let i = from; i < to; i++) {
      const b = blocks[i]!;
      // Surviving mutants: KP-56 (MUTANTS.md).
      if (b === NULL_BLOCK || (b < cap && r[b * STRIDE + META] !== 0)) continue;
      const hi = keys[2 * (i - from)]!;
      const lo = keys[2 * (i - from) + 1]!;
      const parent = i === 0 ? NULL_BLOCK : blocks[i - 1]!;
      // The common case: a linked group whose parent block is its key's first copy with no run
      // link yet (as when it was cached just before), and a key not cached: the block becomes the
      // key's first copy, chained from its parent. `cache` takes the same branches then (pf =
      // parent, CHILD[pf] = 0, findFirst goes to the table and misses).
      // Stryker disable next-line ConditionalExpression,EqualityOperator,BlockStatement: KP-57
      if (linked && parent !== NULL_BLOCK && b < cap) {
        const at = b * STRIDE;
        const pat = parent * STRIDE;
        // Stryker disable next-line ArithmeticOperator,BlockStatement: KP-58
        // Surviving mutants: KP-59 (MUTANTS.md).
        if (r[at + REF]! > 0 && (r[pat + META]! & FIRST) !== 0 && r[pat + CHILD] === 0 && this.table.get(group, hi, lo) < 0) {
          r[at + HI] = hi;
          r[at + LO] = lo;
          r[at + META] = firstMeta;
          r[pat + CHILD] = b;
          continue;
        }
      }
      this.cache(b, group, hi, lo, parent);
    }
    return sink;
  }

  /** A first copy outside the table: a CHILD link may be what keeps it reachable. */
  private isRunDependent(c: number): boolean {
    const m = this.records.words[c * STRIDE + META]!;
    // Stryker disable next-line ConditionalExpression,LogicalOperator: KP-60
    return m !== 0 && (m & FIRST) !== 0 && (m & IN_TABLE) === 0;
  }

  /**
   * Drops a cached block's key (eviction); true when it was the key's last copy. The hash halves
   * stay in the record (the pool reads them for a `removed` event).
   */
  evict(id: number): boolean {
    const r = this.records.words;
    const at = id * STRIDE;
    const meta = r[at + META]!;
    const child = r[at + CHILD]!;
    // The common case first, kept small so that V8 inlines it into the pool's take loop (a call
    // per evicted block measured 2-4% more CPU per request on the aggregated replay bench): the
    // key's only copy, reached through a run link (a key with copies is in the table), whose link
    // names no block that depends on it (no link is block 0, whose META is 0). evictGeneral does
    // exactly this then.
    // Surviving mutants: KP-161 (MUTANTS.md).
    if ((meta & (FIRST | IN_TABLE)) === FIRST && (r[child * STRIDE + META]! & (FIRST | IN_TABLE)) !== FIRST) {
      r[at + META] = 0;
      r[at + CHILD] = 0;
      return true;
    }
    return this.evictGeneral(id, meta, child);
  }

  /** `evict` in every case (the common one included). */
  private evictGeneral(id: number, meta: number, child: number): boolean {
    const r = this.records.words;
    const at = id * STRIDE;
    r[at + META] = 0;
    // The run is cut here: the block chained after this one must now be found through the table.
    // Stryker disable next-line ConditionalExpression: KP-61
    if (child !== 0) {
      r[at + CHILD] = 0;
      if (this.isRunDependent(child)) {
        // (A stale link may point at a block re-cached since, in any group: its own key is what goes in.)
        const cat = child * STRIDE;
        this.table.putIfAbsent((r[cat + META]! & GROUP_MASK) - 1, r[cat + HI]!, r[cat + LO]!, child);
        r[cat + META] = r[cat + META]! | IN_TABLE;
      }
    }
    if ((meta & (FIRST | IN_TABLE)) === FIRST) return true;
    return this.evictTableKey(id, meta);
  }

  /** `evict` of a key in the table: the first copy of a key in the table, or a later copy. */
  private evictTableKey(id: number, meta: number): boolean {
    const r = this.records.words;
    const at = id * STRIDE;
    const group = (meta & GROUP_MASK) - 1;
    const hi = r[at + HI]!;
    const lo = r[at + LO]!;
    const next = r[at + COPY]!;
    r[at + COPY] = 0;
    if ((meta & FIRST) !== 0) {
      const slot = this.table.find(group, hi, lo);
      // Stryker disable next-line ConditionalExpression,StringLiteral: KP-63
      if (slot < 0) throw failure("pool invariant: block {0} is marked in the table but is not", id);
      if (next === 0) {
        this.table.deleteAt(slot);
        return true;
      }
      // The next copy becomes the first; a key with copies is in the table.
      this.table.setValueAt(slot, next);
      r[next * STRIDE + META] = r[next * STRIDE + META]! | FIRST | IN_TABLE;
      return false;
    }
    // A later copy: its key is in the table, and the first copy's chain reaches it before its end,
    // so prev never becomes 0.
    let prev = this.table.get(group, hi, lo);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-64
    while (prev > 0 && r[prev * STRIDE + COPY] !== id) prev = r[prev * STRIDE + COPY]!;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-65
    if (prev > 0) r[prev * STRIDE + COPY] = next;
    return false;
  }

  /** Cached keys per group with their copies in caching order, sorted (O(P): tests and determinism checks only). */
  snapshot(): string[] {
    const out: string[] = [];
    const r = this.records.words;
    // Stryker disable next-line EqualityOperator: KP-68
    for (let first = 1; first < this.records.cap; first++) {
      const meta = r[first * STRIDE + META]!;
      if ((meta & FIRST) === 0) continue;
      const copies: number[] = [];
      for (let id = first; id !== 0; id = r[id * STRIDE + COPY]!) copies.push(id);
      out.push(`${(meta & GROUP_MASK) - 1}:${joinHash(r[first * STRIDE + HI]! >>> 0, r[first * STRIDE + LO]! >>> 0)}:${copies.join("/")}`);
    }
    return out.sort();
  }
}
