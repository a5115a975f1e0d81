import type { BlockHash, KvEvent, PoolMetrics } from "./contract.js";
import { BlockHashTable } from "./block-hash-table.js";
import { FreeQueue } from "./free-queue.js";
import { hashHi, hashLo, joinHash } from "./hash-halves.js";

/** Block id of the null block: holds nothing, never allocated, freed or cached. */
export const NULL_BLOCK = 0;

/** One stored block in a `stored` event. */
export interface StoredBlock {
  readonly blockHash: BlockHash;
  readonly tokensHash: BlockHash;
}

/** The pool as its managers use it (a test reference implements it too). */
export type PoolOps = Pick<
  BlockPool,
  | "numPages"
  | "numFree"
  | "refCount"
  | "isHashed"
  | "holds"
  | "holdsKey"
  | "isEvictable"
  | "cachedBlock"
  | "findFirst"
  | "takeFree"
  | "takeFreeInto"
  | "touch"
  | "free"
  | "freeTableTailFirst"
  | "cacheBlock"
  | "cacheBlockKey"
  | "cacheTableRun"
  | "uncache"
  | "emitStored"
  | "collectsEvents"
  | "takeEvents"
  | "metrics"
  | "freeQueueOrder"
  | "isFree"
  | "cacheSnapshot"
  | "groupPages"
>;

/** Words per block record (a power of two: the fields of a block share one 32-byte line). */
const STRIDE = 8;
/** Reference count. */
const REF = 0;
/** 0 when the block has no hash; else (group + 1) | FIRST | IN_TABLE. */
const META = 1;
/** The cached block's hash as two 32-bit halves. */
const HI = 2;
const LO = 3;
/** The next block cached under the same key, in caching order; 0 at the end. */
const COPY = 4;
/** Linked groups: the first block cached right after this one in a sequence, as a lookup hint; 0 when none. */
const CHILD = 5;
/** The group whose table took the block (group + 1; 0 when taken without one). */
const OWNER = 6;

const GROUP_MASK = 0xff_ffff;
/** The key's first copy: the block hits use. */
const FIRST = 1 << 24;
/** The key is in the hash table (with this block, its first copy, as the value). */
const IN_TABLE = 1 << 25;
/** Block records stored before any growth. */
const INITIAL_BLOCKS = 256;

/**
 * vLLM v1's BlockPool: P pages shared by every cache group, page 0 the null block. Reference
 * counts, a free queue (eviction from the front) and the prefix cache keyed by (group index,
 * block hash); duplicates of one key are allowed (block tables stay append-only), the first copy
 * cached is the one hits use.
 *
 * Layout: one record of 8 int32 words per block (reference count, hash, copy chain, link) in one
 * typed array, so a block's fields share a cache line; records and free-queue links exist only
 * for blocks taken at least once (the pool's memory grows with use, not with P).
 *
 * Runs: in a *linked* group (full attention), a sequence caches consecutive blocks whose keys
 * chain, and a hit walks them in the same order. A key whose only copy was cached right after
 * the first copy of its parent key is found from that block's CHILD link and stays out of the
 * hash table; only the head of such a run (and keys with several copies, or branching off a run)
 * are in the table. Caching or evicting a run block then touches no table slot; a run is split
 * (its next block enters the table) only where an eviction or a branch cuts it. Lookups give the
 * same first copies as a table holding every key, so every result is unchanged.
 *
 * Invariant: a cached key is either in the table (mapping to its first copy, which has IN_TABLE),
 * or it has exactly one copy f, and the first copy p of its parent key has CHILD[p] = f.
 */
export class BlockPool {
  private rec: Int32Array;
  /** Block ids with a record (records of higher ids are implicitly zero). */
  private cap: number;
  private readonly queue: FreeQueue;
  /** (group, hash) -> the first block caching it, for keys not reachable through a run link. */
  private readonly cache: BlockHashTable;
  private readonly linked: Uint8Array;
  private freeHashed = 0;
  /** Per group: referenced pages its tables took, and free pages still caching one of its keys. */
  private readonly usedOf: Int32Array;
  private readonly cachedOf: Int32Array;
  private readonly events: KvEvent[] | undefined;

  constructor(
    readonly numPages: number,
    numGroups: number,
    collectEvents: boolean,
    /** Per group: cached blocks chain in runs (full-attention groups, whose hits walk from block 0). */
    linkedGroups: readonly boolean[] = [],
  ) {
    if (!Number.isInteger(numPages) || numPages < 2) throw new RangeError(`numPages must be an integer >= 2 (page 0 is the null page), got ${numPages}`);
    if (!Number.isInteger(numGroups) || numGroups < 1 || numGroups > GROUP_MASK - 1) throw new RangeError(`numGroups must be a positive integer, got ${numGroups}`);
    this.cap = Math.min(numPages, INITIAL_BLOCKS);
    this.rec = new Int32Array(this.cap * STRIDE);
    // Every usable page is free, in id order; none of them is stored until it is first taken.
    this.queue = new FreeQueue(numPages, [], 1);
    // Every key is held by at least one of the P - 1 usable pages; the table grows with the keys.
    this.cache = new BlockHashTable(numPages - 1, { grow: true });
    this.linked = Uint8Array.from({ length: numGroups }, (_, g) => (linkedGroups[g] === true ? 1 : 0));
    this.events = collectEvents ? [] : undefined;
    this.usedOf = new Int32Array(numGroups);
    this.cachedOf = new Int32Array(numGroups);
  }

  /** Makes room for the record of `id`. */
  private reach(id: number): void {
    if (id < this.cap) return;
    let cap = this.cap;
    while (cap <= id) cap *= 2;
    cap = Math.min(cap, this.numPages);
    const grown = new Int32Array(cap * STRIDE);
    grown.set(this.rec);
    this.rec = grown;
    this.cap = cap;
  }

  private word(id: number, field: number): number {
    return id < this.cap ? this.rec[id * STRIDE + field]! : 0;
  }

  get numFree(): number {
    return this.queue.length;
  }

  refCount(id: number): number {
    return this.word(id, REF);
  }

  isHashed(id: number): boolean {
    return this.word(id, META) !== 0;
  }

  /** True when the block is cached under exactly (group, hash). */
  holds(id: number, group: number, hash: BlockHash): boolean {
    return this.holdsKey(id, group, hashHi(hash), hashLo(hash));
  }

  /** `holds` with the hash as its 32-bit halves. */
  holdsKey(id: number, group: number, hi: number, lo: number): boolean {
    if (id >= this.cap) return false;
    const r = this.rec;
    const at = id * STRIDE;
    return (r[at + META]! & GROUP_MASK) === group + 1 && r[at + HI] === (hi | 0) && r[at + LO] === (lo | 0);
  }

  /** A hit block that a touch would take out of the free queue. */
  isEvictable(id: number): boolean {
    return id !== NULL_BLOCK && this.word(id, REF) === 0;
  }

  /** The first copy of (group, hash), or NULL_BLOCK (diagnostics: a full scan when the key is only linked). */
  cachedBlock(group: number, hash: BlockHash): number {
    const hi = hashHi(hash);
    const lo = hashLo(hash);
    const t = this.cache.get(group, hi, lo);
    if (t >= 0) return t;
    for (let id = 1; id < this.cap; id++) if (this.holdsKey(id, group, hi, lo) && (this.rec[id * STRIDE + META]! & FIRST) !== 0) return id;
    return NULL_BLOCK;
  }

  /**
   * The first copy of (group, hi:lo), or NULL_BLOCK. `prev` is the first copy of the parent key
   * found by the same walk (NULL_BLOCK at block 0, or in a group that is not linked): its run
   * link is tried before the table.
   */
  findFirst(group: number, prev: number, hi: number, lo: number): number {
    if (prev !== NULL_BLOCK) {
      const r = this.rec;
      const c = r[prev * STRIDE + CHILD]!;
      if (c !== 0) {
        const at = c * STRIDE;
        const meta = r[at + META]!;
        if ((meta & GROUP_MASK) === group + 1 && r[at + LO] === (lo | 0) && r[at + HI] === (hi | 0)) {
          if ((meta & FIRST) !== 0) return c;
          // A later copy: its key has several, so the table holds it.
        }
      }
    }
    const t = this.cache.get(group, hi, lo);
    return t < 0 ? NULL_BLOCK : t;
  }

  /**
   * Takes n blocks from the front of the free queue, evicting cached ones; each gets ref 1.
   * `group` (when >= 0) is the cache group whose table takes them, for `groupPages`.
   */
  takeFree(n: number, group = -1): number[] {
    const out: number[] = [];
    this.takeFreeInto(n, out, group);
    return out;
  }

  /** `takeFree`, appending the blocks to `out`. */
  takeFreeInto(n: number, out: number[], group = -1): void {
    if (n > this.queue.length) throw new Error(`pool invariant: ${n} blocks asked, ${this.queue.length} free`);
    for (let i = 0; i < n; i++) {
      const id = this.queue.popFront();
      this.reach(id);
      const at = id * STRIDE;
      const meta = this.rec[at + META]!;
      if (meta !== 0) {
        this.freeHashed--;
        this.cachedOf[(meta & GROUP_MASK) - 1]!--;
        this.evict(id);
      }
      this.rec[at + REF] = 1;
      this.rec[at + OWNER] = group + 1;
      if (group >= 0) this.usedOf[group]!++;
      out.push(id);
    }
  }

  /** A prefix hit takes its blocks: out of the free queue when unreferenced, then ref + 1. */
  touch(ids: readonly number[]): void {
    for (const id of ids) {
      if (id === NULL_BLOCK) continue;
      this.reach(id);
      const at = id * STRIDE;
      if (this.rec[at + REF] === 0) {
        this.queue.remove(id);
        const meta = this.rec[at + META]!;
        if (meta !== 0) {
          this.freeHashed--;
          this.cachedOf[(meta & GROUP_MASK) - 1]!--;
        }
        const owner = this.rec[at + OWNER]!;
        if (owner > 0) this.usedOf[owner - 1]!++;
      }
      this.rec[at + REF]!++;
    }
  }

  /**
   * Drops one reference from each block, in the order given (a request passes its blocks tail
   * first). A block reaching 0 without a hash goes to the front (keeping the given order), a
   * hashed one to the back, where it stays cached until evicted. Returns how many reached 0.
   */
  free(ids: readonly number[]): number {
    let lastFresh = -1;
    let released = 0;
    for (const id of ids) {
      if (id === NULL_BLOCK) continue;
      const r = this.release(id, lastFresh);
      if (r === 0) continue;
      released++;
      if (r > 0) lastFresh = id;
    }
    return released;
  }

  /**
   * Frees the real blocks of a block table tail first, then the blocks of `then` in order (as
   * `free([...reversed table, ...then])`, without the array); returns how many reached 0.
   */
  freeTableTailFirst(blocks: readonly number[], then: readonly number[]): number {
    let lastFresh = -1;
    let released = 0;
    for (let i = blocks.length + then.length - 1; i >= 0; i--) {
      // The table tail first, then `then` in its order (one batch: fresh blocks keep their order).
      const id = i >= then.length ? blocks[i - then.length]! : then[then.length - 1 - i]!;
      if (id === NULL_BLOCK) continue;
      const r = this.release(id, lastFresh);
      if (r === 0) continue;
      released++;
      if (r > 0) lastFresh = id;
    }
    return released;
  }

  /**
   * Drops one reference. Returns 0 when the block is still referenced, -1 when it went to the
   * back (hashed), 1 when it went to the front after `lastFresh` (unhashed; the batch's earlier
   * fresh blocks stay before it, as vLLM prepends them in order).
   */
  private release(id: number, lastFresh: number): number {
    const at = id * STRIDE;
    const rc = --this.rec[at + REF]!;
    if (rc < 0) throw new Error(`pool invariant: block ${id} freed more often than taken`);
    if (rc > 0) return 0;
    const owner = this.rec[at + OWNER]!;
    if (owner > 0) this.usedOf[owner - 1]!--;
    const meta = this.rec[at + META]!;
    if (meta !== 0) {
      this.queue.pushBack(id);
      this.freeHashed++;
      this.cachedOf[(meta & GROUP_MASK) - 1]!++;
      return -1;
    }
    this.queue.pushFrontAfter(lastFresh, id);
    return 1;
  }

  /**
   * Caches a referenced, unhashed block under (group, hash). Returns true when it is the first
   * copy of that key (then a `stored` event is due).
   */
  cacheBlock(id: number, group: number, hash: BlockHash): boolean {
    return this.cacheBlockKey(id, group, hashHi(hash), hashLo(hash), NULL_BLOCK);
  }

  /**
   * `cacheBlock` with the hash as its 32-bit halves. `parent` is the block before it in the
   * sequence's table (cached under the parent key), or NULL_BLOCK: a linked group chains the
   * block to the parent key's first copy when it can.
   */
  cacheBlockKey(id: number, group: number, hi: number, lo: number, parent: number): boolean {
    if (id === NULL_BLOCK || id >= this.cap || this.rec[id * STRIDE + META] !== 0 || this.rec[id * STRIDE + REF]! <= 0) {
      throw new Error(`pool invariant: block ${id} cannot be cached`);
    }
    const r = this.rec;
    const at = id * STRIDE;
    const linked = this.linked[group] === 1 && parent !== NULL_BLOCK;
    // The parent key's first copy (several copies put the parent key in the table).
    let pf = NULL_BLOCK;
    if (linked) {
      const pm = r[parent * STRIDE + META]!;
      pf = (pm & FIRST) !== 0 ? parent : this.cache.get(group, r[parent * STRIDE + HI]!, r[parent * STRIDE + LO]!);
      if (pf < 0) throw new Error(`pool invariant: parent block ${parent} of block ${id} has no first copy`);
    }
    const first = this.findFirst(group, pf, hi, lo);
    r[at + HI] = hi;
    r[at + LO] = lo;
    if (first === NULL_BLOCK) {
      r[at + META] = (group + 1) | FIRST;
      const c = pf === NULL_BLOCK ? 0 : r[pf * STRIDE + CHILD]!;
      if (pf !== NULL_BLOCK && (c === 0 || !this.isRunDependent(c))) {
        r[pf * STRIDE + CHILD] = id;
      } else {
        this.cache.putIfAbsent(group, hi, lo, id);
        r[at + META] = r[at + META]! | IN_TABLE;
      }
      return true;
    }
    // A duplicate copy goes last: the first copy stays the one hits use; a key with copies lives in the table.
    r[at + META] = group + 1;
    const fm = r[first * STRIDE + META]!;
    if ((fm & IN_TABLE) === 0) {
      this.cache.putIfAbsent(group, hi, lo, first);
      r[first * STRIDE + META] = fm | IN_TABLE;
    }
    let last = first;
    for (let n = r[last * STRIDE + COPY]!; n !== 0; n = r[last * STRIDE + COPY]!) last = n;
    r[last * STRIDE + COPY] = id;
    return false;
  }

  /**
   * Caches the real, unhashed blocks of table entries [from, to) in order: block i under
   * (group, keys[2(i - from)] : keys[2(i - from) + 1], the hash's int32 halves), with table entry
   * i - 1 as its parent (NULL_BLOCK at 0), exactly as `cacheBlockKey` on each would, in one
   * loop. Builds no `stored` event (for a caller that emits none).
   */
  cacheTableRun(blocks: readonly number[], from: number, to: number, group: number, keys: Int32Array): void {
    const linked = this.linked[group] === 1;
    for (let i = from; i < to; i++) {
      const b = blocks[i]!;
      if (b === NULL_BLOCK || (b < this.cap && this.rec[b * STRIDE + META] !== 0)) continue;
      const hi = keys[2 * (i - from)]!;
      const lo = keys[2 * (i - from) + 1]!;
      const parent = i === 0 ? NULL_BLOCK : blocks[i - 1]!;
      // The common case inline: a linked group whose parent block is its key's first copy with no
      // run link yet (as when it was cached just before), and a key not cached: the block becomes
      // the key's first copy, chained from its parent. cacheBlockKey takes the same branches then
      // (pf = parent, CHILD[pf] = 0, findFirst goes to the table and misses); anything else goes
      // through it.
      if (linked && parent !== NULL_BLOCK && b < this.cap) {
        const r = this.rec;
        const at = b * STRIDE;
        const pat = parent * STRIDE;
        if (r[at + REF]! > 0 && (r[pat + META]! & FIRST) !== 0 && r[pat + CHILD] === 0 && this.cache.get(group, hi, lo) < 0) {
          r[at + HI] = hi;
          r[at + LO] = lo;
          r[at + META] = (group + 1) | FIRST;
          r[pat + CHILD] = b;
          continue;
        }
      }
      this.cacheBlockKey(b, group, hi, lo, parent);
    }
  }

  /** A first copy outside the table: a CHILD link may be what keeps it reachable. */
  private isRunDependent(c: number): boolean {
    const m = this.rec[c * STRIDE + META]!;
    return m !== 0 && (m & FIRST) !== 0 && (m & IN_TABLE) === 0;
  }

  /** Drops a block's cache entry and hash (eviction); `removed` when its key's last copy goes. */
  private evict(id: number): void {
    const r = this.rec;
    const at = id * STRIDE;
    const meta = r[at + META]!;
    const group = (meta & GROUP_MASK) - 1;
    const hi = r[at + HI]!;
    const lo = r[at + LO]!;
    const next = r[at + COPY]!;
    r[at + META] = 0;
    r[at + COPY] = 0;
    // The run is cut here: the block chained after this one must now be found through the table.
    const child = r[at + CHILD]!;
    if (child !== 0) {
      r[at + CHILD] = 0;
      if (this.isRunDependent(child)) {
        // (A stale link may point at a block re-cached since, in any group: its own key is what goes in.)
        const cat = child * STRIDE;
        this.cache.putIfAbsent((r[cat + META]! & GROUP_MASK) - 1, r[cat + HI]!, r[cat + LO]!, child);
        r[cat + META] = r[cat + META]! | IN_TABLE;
      }
    }
    let last = false;
    if ((meta & FIRST) !== 0) {
      if (next !== 0) {
        // The next copy becomes the first; a key with copies is in the table.
        const slot = this.cache.find(group, hi, lo);
        if (slot < 0) throw new Error(`pool invariant: key of block ${id} has copies but no table entry`);
        this.cache.setValueAt(slot, next);
        r[next * STRIDE + META] = r[next * STRIDE + META]! | FIRST | IN_TABLE;
      } else {
        if ((meta & IN_TABLE) !== 0) {
          const slot = this.cache.find(group, hi, lo);
          if (slot < 0) throw new Error(`pool invariant: block ${id} is marked in the table but is not`);
          this.cache.deleteAt(slot);
        }
        last = true;
      }
    } else {
      let prev = this.cache.get(group, hi, lo);
      while (prev > 0 && r[prev * STRIDE + COPY] !== id) prev = r[prev * STRIDE + COPY]!;
      if (prev > 0) r[prev * STRIDE + COPY] = next;
    }
    if (last && this.events !== undefined) {
      const hash = joinHash(hi >>> 0, lo >>> 0);
      const prevEvent = this.events[this.events.length - 1];
      if (prevEvent?.type === "removed" && prevEvent.groupIndex === group) (prevEvent.blockHashes as BlockHash[]).push(hash);
      else this.events.push({ type: "removed", groupIndex: group, blockHashes: [hash] });
    }
  }

  /** Test hook: hides every copy of (group, hash) from the cache, as evicting them would. */
  uncache(group: number, hash: BlockHash): void {
    const copies: number[] = [];
    for (let id = this.cachedBlock(group, hash); id !== NULL_BLOCK; id = this.rec[id * STRIDE + COPY]!) copies.push(id);
    for (const id of copies) {
      if (this.queue.has(id)) {
        this.freeHashed--;
        this.cachedOf[group]!--;
      }
      this.evict(id);
    }
  }

  emitStored(group: number, parentHash: BlockHash | null, blocks: StoredBlock[]): void {
    this.events?.push({ type: "stored", groupIndex: group, parentHash, blocks });
  }

  get collectsEvents(): boolean {
    return this.events !== undefined;
  }

  takeEvents(): KvEvent[] {
    if (this.events === undefined) return [];
    return this.events.splice(0, this.events.length);
  }

  metrics(): PoolMetrics {
    const usable = this.numPages - 1;
    const free = this.queue.length;
    return { usablePages: usable, usedPages: usable - free, cachedEvictablePages: this.freeHashed, freePages: free, usage: 1 - free / usable };
  }

  /**
   * Per cache group, live counters (do not write): pages referenced by the group's tables
   * (`used`) and free pages still caching one of its keys (`cached`, evictable). O(1).
   */
  groupPages(): { readonly used: Int32Array; readonly cached: Int32Array } {
    return { used: this.usedOf, cached: this.cachedOf };
  }

  /** Front-to-back free queue (O(P): tests and diagnostics only). */
  freeQueueOrder(): number[] {
    return this.queue.toArray();
  }

  isFree(id: number): boolean {
    return this.queue.has(id);
  }

  /** Cached keys per group with their copies in caching order, sorted (O(P): tests and determinism checks only). */
  cacheSnapshot(): string[] {
    const out: string[] = [];
    const r = this.rec;
    for (let first = 1; first < this.cap; first++) {
      const meta = r[first * STRIDE + META]!;
      if ((meta & FIRST) === 0) continue;
      const copies: number[] = [];
      for (let id = first; id !== 0; id = r[id * STRIDE + COPY]!) copies.push(id);
      out.push(`${(meta & GROUP_MASK) - 1}:${joinHash(r[first * STRIDE + HI]! >>> 0, r[first * STRIDE + LO]! >>> 0)}:${copies.join("/")}`);
    }
    return out.sort();
  }
}
