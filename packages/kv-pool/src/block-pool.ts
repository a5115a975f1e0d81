import type { BlockHash, KvEvent, PoolMetrics } from "./contract.js";
import { BlockHashTable } from "./block-hash-table.js";
import { hashHi, hashLo, joinHash } from "./hash-halves.js";
import { failure, rangeFailure } from "./errors.js";
import { reserveBlocks, type BlockTable } from "./block-table.js";

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
  | "touchTable"
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
/**
 * The block's entry in the free queue: 0 when it has none; b > 0 for position b of the back
 * ring, -f for position f of the front ring (see `BlockPool`'s queue fields).
 */
const QPOS = 7;
/** Ring positions stay in [1, POS_LIMIT); the front ring's start in the middle, so it can grow both ways. */
const POS_LIMIT = 1 << 30;
const FRONT_BASE = 1 << 29;
/** Ring slots before any growth (a power of two). */
const INITIAL_RING = 8;

const GROUP_MASK = 0xff_ffff;
/** The key's first copy: the block hits use. */
const FIRST = 1 << 24;
/** The key is in the hash table (with this block, its first copy, as the value). */
const IN_TABLE = 1 << 25;
/** Hash tables of more slots than this (16 bytes each: 256 KiB) are prefetched before a run of lookups. */
const PREFETCH_SLOTS = 1 << 14;
/** Block records stored before any growth. */
const INITIAL_BLOCKS = 256;

/**
 * vLLM v1's BlockPool: P pages shared by every cache group, page 0 the null block. Reference
 * counts, a free queue (eviction from the front) and the prefix cache keyed by (group index,
 * block hash); duplicates of one key are allowed (block tables stay append-only), the first copy
 * cached is the one hits use.
 *
 * Layout: one record of 8 int32 words per block (reference count, hash, copy chain, link, free
 * queue entry) in one typed array, so a block's fields share a cache line; records exist only for
 * blocks taken at least once (the pool's memory grows with use, not with P).
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
  /**
   * The free queue (vLLM's FreeKVCacheBlockQueue, eviction from the front) is
   * `front ++ [untouchedFrom, numPages) ++ back`: blocks never taken yet are implicit (in id
   * order), pushes to the front go to the front part, pushes to the back to the back part.
   * Each part is a ring of block ids in queue order with lazy removal: an entry counts only while
   * its block's QPOS word names its position, so removing a block from the middle (a hit) only
   * clears that word, and stale entries are skipped when popped or dropped when a ring is
   * rebuilt. Pushing and popping read and write the ring in order and the block's own record,
   * which the caller touches anyway: the queue costs no random memory access of its own.
   */
  private front: Int32Array = new Int32Array(INITIAL_RING);
  /** Positions [frontHead, frontTail) of the front ring (slot = position & (length - 1)). */
  private frontHead = FRONT_BASE;
  private frontTail = FRONT_BASE;
  private frontLive = 0;
  private back: Int32Array = new Int32Array(INITIAL_RING);
  private backHead = 1;
  private backTail = 1;
  private backLive = 0;
  private untouchedFrom = 1;
  /** Fresh blocks of one free call (the first `freshCount`), put at the front together in their order when it ends. */
  private freshBatch: Int32Array = new Int32Array(64);
  private freshCount = 0;
  /** (group, hash) -> the first block caching it, for keys not reachable through a run link. */
  private readonly cache: BlockHashTable;
  private readonly linked: Uint8Array;
  private freeHashed = 0;
  /** Per group: referenced pages its tables took, and free pages still caching one of its keys. */
  private readonly usedOf: Int32Array;
  private readonly cachedOf: Int32Array;
  private readonly events: KvEvent[] | undefined;
  /** Where `prefetch` leaves what it read (kept so the reads are not optimised away). */
  private sink = 0;

  constructor(
    readonly numPages: number,
    numGroups: number,
    collectEvents: boolean,
    /** Per group: cached blocks chain in runs (full-attention groups, whose hits walk from block 0). */
    linkedGroups: readonly boolean[] = [],
  ) {
    if (!Number.isInteger(numPages) || numPages < 2) throw new RangeError(`numPages must be an integer >= 2 (page 0 is the null page), got ${numPages}`);
    // Surviving mutants: KP-07 (MUTANTS.md).
    if (!Number.isInteger(numGroups) || numGroups < 1 || numGroups > GROUP_MASK - 1)
      throw new RangeError(`numGroups must be a positive integer, got ${numGroups}`);
    this.cap = Math.min(numPages, INITIAL_BLOCKS);
    this.rec = new Int32Array(this.cap * STRIDE);
    // Every usable page is free, in id order (the untouched range 1..P - 1); none of them is
    // stored until it is first taken.
    // Every key is held by at least one of the P - 1 usable pages; the table grows with the keys.
    this.cache = new BlockHashTable(numPages - 1, { grow: true });
    this.linked = Uint8Array.from({ length: numGroups }, (_, g) => (linkedGroups[g] === true ? 1 : 0));
    this.events = collectEvents ? [] : undefined;
    this.usedOf = new Int32Array(numGroups);
    this.cachedOf = new Int32Array(numGroups);
  }

  /** Makes room for the record of `id`. */
  private reach(id: number): void {
    // Stryker disable next-line ConditionalExpression: KP-08
    if (id < this.cap) return;
    let cap = this.cap;
    while (cap <= id) cap *= 2;
    // Stryker disable next-line MethodExpression: KP-09
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
    return this.frontLive + this.backLive + this.numPages - this.untouchedFrom;
  }

  /** True when the block is in the free queue. */
  private queued(id: number): boolean {
    if (id >= this.untouchedFrom) return id < this.numPages;
    // Stryker disable next-line EqualityOperator: KP-10
    // Surviving mutants: KP-11 (MUTANTS.md).
    return id > 0 && id < this.cap && this.rec[id * STRIDE + QPOS] !== 0;
  }

  /** Takes a queued block out of the free queue. */
  private dequeue(id: number): void {
    // Stryker disable next-line ConditionalExpression,StringLiteral: KP-12
    if (!this.queued(id)) throw failure("pool invariant: block {0} is not in the free queue", id);
    if (id >= this.untouchedFrom) {
      // Taken from the middle of the untouched range (never by the pool's own walks): the range
      // before it moves to the end of the front part, where it was queued.
      this.reach(id);
      for (let u = this.untouchedFrom; u < id; u++) {
        this.untouchedFrom = u + 1;
        this.pushFrontPartEnd(u);
      }
      this.untouchedFrom = id + 1;
      return;
    }
    const at = id * STRIDE + QPOS;
    // Stryker disable next-line EqualityOperator: KP-13
    if (this.rec[at]! < 0) this.frontLive--;
    else this.backLive--;
    this.rec[at] = 0;
  }

  /** Checks that a block can enter the free queue. */
  private checkEnqueue(id: number): void {
    // Surviving mutants: KP-14 (MUTANTS.md).
    if (id <= 0 || id >= this.numPages || !Number.isInteger(id)) throw rangeFailure("block id {0} outside 1..{1}", id, this.numPages - 1);
    if (this.queued(id)) throw failure("pool invariant: block {0} is already in the free queue", id);
  }

  private pushBack(id: number): void {
    this.checkEnqueue(id);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-15
    if (this.backTail - this.backHead === this.back.length || this.backTail >= POS_LIMIT) this.rebuildBack();
    const pos = this.backTail++;
    this.back[pos & (this.back.length - 1)] = id;
    this.rec[id * STRIDE + QPOS] = pos;
    this.backLive++;
  }

  /** Puts a block at the very front. */
  private pushFront(id: number): void {
    this.checkEnqueue(id);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-16
    if (this.frontTail - this.frontHead === this.front.length || this.frontHead <= 1) this.rebuildFront();
    const pos = --this.frontHead;
    this.front[pos & (this.front.length - 1)] = id;
    this.rec[id * STRIDE + QPOS] = -pos;
    this.frontLive++;
  }

  /** Puts a block at the end of the front part (before the untouched range). */
  private pushFrontPartEnd(id: number): void {
    this.checkEnqueue(id);
    // Stryker disable next-line EqualityOperator: KP-17
    // Surviving mutants: KP-18 (MUTANTS.md).
    if (this.frontTail - this.frontHead === this.front.length || this.frontTail >= POS_LIMIT) this.rebuildFront();
    const pos = this.frontTail++;
    this.front[pos & (this.front.length - 1)] = id;
    this.rec[id * STRIDE + QPOS] = -pos;
    this.frontLive++;
  }

  /** Puts the fresh blocks of a free call at the front, keeping their order (vLLM prepends them so). */
  private flushFresh(): void {
    const batch = this.freshBatch;
    const n = this.freshCount;
    this.freshCount = 0;
    for (let i = n - 1; i >= 0; i--) this.pushFront(batch[i]!);
  }

  /** The ring's live entries, in order, at positions from `base`, with their QPOS words; returns the new ring. */
  private rebuildRing(ring: Int32Array, head: number, tail: number, live: number, base: number, sign: number): Int32Array {
    const r = this.rec;
    const mask = ring.length - 1;
    let size = ring.length;
    // Stryker disable next-line EqualityOperator,ArithmeticOperator: KP-19
    while (2 * live + 2 > size) size *= 2;
    const out = new Int32Array(size);
    let k = 0;
    // Live entries first, renumbered after: a block dequeued and queued again leaves a stale entry
    // that can sit at the very position its live entry moves to (the front ring's new positions
    // start at FRONT_BASE, above where pushes to the front went), and would then read as live.
    // Stryker disable next-line EqualityOperator: KP-20
    for (let pos = head; pos < tail; pos++) {
      const id = ring[pos & mask]!;
      if (r[id * STRIDE + QPOS] !== sign * pos) continue;
      out[(base + k++) & (size - 1)] = id;
    }
    // Stryker disable next-line ConditionalExpression,StringLiteral: KP-21
    if (k !== live) throw failure("pool invariant: free-queue ring holds {0} live entries, counted {1}", k, live);
    // Stryker disable next-line EqualityOperator: KP-22
    for (let np = base; np < base + k; np++) r[out[np & (size - 1)]! * STRIDE + QPOS] = sign * np;
    return out;
  }

  /** Drops the back ring's stale entries (growing it when at least half are live) and renumbers it from 1. */
  private rebuildBack(): void {
    this.back = this.rebuildRing(this.back, this.backHead, this.backTail, this.backLive, 1, 1);
    this.backHead = 1;
    this.backTail = 1 + this.backLive;
  }

  /** The same for the front ring, renumbered from FRONT_BASE. */
  private rebuildFront(): void {
    this.front = this.rebuildRing(this.front, this.frontHead, this.frontTail, this.frontLive, FRONT_BASE, -1);
    this.frontHead = FRONT_BASE;
    this.frontTail = FRONT_BASE + this.frontLive;
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
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-23
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
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-24
    if (t >= 0) return t;
    // Stryker disable next-line EqualityOperator: KP-25
    // Surviving mutants: KP-26 (MUTANTS.md).
    for (let id = 1; id < this.cap; id++) if (this.holdsKey(id, group, hi, lo) && (this.rec[id * STRIDE + META]! & FIRST) !== 0) return id;
    return NULL_BLOCK;
  }

  /**
   * The first copy of (group, hi:lo), or NULL_BLOCK. `prev` is the first copy of the parent key
   * found by the same walk (NULL_BLOCK at block 0, or in a group that is not linked): its run
   * link is tried before the table.
   */
  findFirst(group: number, prev: number, hi: number, lo: number): number {
    // Stryker disable next-line ConditionalExpression: KP-27
    if (prev !== NULL_BLOCK) {
      const r = this.rec;
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
    const t = this.cache.get(group, hi, lo);
    // Stryker disable next-line EqualityOperator: KP-29
    return t < 0 ? NULL_BLOCK : t;
  }

  /**
   * Takes n blocks from the front of the free queue, evicting cached ones; each gets ref 1.
   * `group` (when >= 0) is the cache group whose table takes them, for `groupPages`.
   */
  takeFree(n: number, group = -1): number[] {
    this.checkTake(n);
    const taken = new Int32Array(n);
    this.takeInto(n, taken, 0, group);
    // Array.from gives a packed array, like every block list.
    return Array.from(taken);
  }

  /** `takeFree`, appending the blocks to a block table. */
  takeFreeInto(n: number, table: BlockTable, group = -1): void {
    this.checkTake(n);
    reserveBlocks(table, n);
    this.takeInto(n, table.blocks, table.numBlocks, group);
    table.numBlocks += n;
  }

  private checkTake(n: number): void {
    if (n > this.numFree) throw failure("pool invariant: {0} blocks asked, {1} free", n, this.numFree);
  }

  /** Takes n blocks (n <= numFree), writing them to out[start], out[start + 1], ... (out has room). */
  private takeInto(n: number, out: Int32Array, start: number, group: number): void {
    // Pops the n blocks in queue order (front part, untouched range, back part) and takes each as
    // it is popped. Popping reads and writes only the rings and QPOS words, taking (evicting)
    // touches neither, so the order of the two within a call changes nothing.
    let k = start;
    const owner = group + 1;
    let left = n;
    if (this.frontLive > 0) {
      const r = this.rec;
      const ring = this.front;
      const mask = ring.length - 1;
      let head = this.frontHead;
      while (left > 0 && this.frontLive > 0) {
        const pos = head++;
        const id = ring[pos & mask]!;
        const at = id * STRIDE + QPOS;
        if (r[at] === -pos) {
          r[at] = 0;
          this.frontLive--;
          out[k++] = id;
          this.claim(id, owner);
          left--;
        }
      }
      this.frontHead = head;
    }
    if (left > 0) {
      // The front part is empty: its stale entries go.
      this.frontHead = this.frontTail;
      // Blocks never taken yet, in id order; they get records here (block records only grow).
      const fresh = Math.min(left, this.numPages - this.untouchedFrom);
      if (fresh > 0) {
        const from = this.untouchedFrom;
        this.reach(from + fresh - 1);
        this.untouchedFrom = from + fresh;
        for (let id = from; id < from + fresh; id++) {
          out[k++] = id;
          this.claim(id, owner);
        }
        left -= fresh;
      }
      if (left > 0) this.popBackInto(left, out, k, owner);
    }
    // Stryker disable next-line ConditionalExpression: KP-30
    if (group >= 0) this.usedOf[group]! += n;
  }

  /** Pops `count` blocks from the back part (which holds them) into out[start], ..., taking each. */
  private popBackInto(count: number, out: Int32Array, start: number, owner: number): void {
    const ring = this.back;
    const tail = this.backTail;
    // Load the records of the next entries in a loop of plain reads first: popping checks each
    // entry's QPOS word, one cache miss after another otherwise.
    // Stryker disable next-line all: KP-31
    this.sink = this.prefetchRing(ring, this.backHead, Math.min(tail, this.backHead + count));
    const r = this.rec;
    const mask = ring.length - 1;
    let head = this.backHead;
    let left = count;
    let k = start;
    while (left > 0 && head < tail) {
      const pos = head++;
      const id = ring[pos & mask]!;
      const at = id * STRIDE + QPOS;
      if (r[at] === pos) {
        r[at] = 0;
        out[k++] = id;
        this.claim(id, owner);
        left--;
      }
    }
    this.backHead = head;
    this.backLive -= count - left;
    // Stryker disable next-line ConditionalExpression,StringLiteral: KP-32
    if (left > 0) throw new Error("pool invariant: the free queue is empty");
  }

  /** Takes a block just popped: evicts its key if it caches one, then reference 1 for `owner` (group + 1). */
  private claim(id: number, owner: number): void {
    const r = this.rec;
    const at = id * STRIDE;
    const meta = r[at + META]!;
    if (meta !== 0) {
      this.freeHashed--;
      this.cachedOf[(meta & GROUP_MASK) - 1]!--;
      // The common eviction inline: the key's only copy, reached through a run link (not in the
      // table), with no events to build, its link (if any) naming a block that is not run
      // dependent. `evict` takes the same branches then (no table slot, no event).
      const child = r[at + CHILD]!;
      // Surviving mutants: KP-33 (MUTANTS.md).
      if ((meta & (FIRST | IN_TABLE)) === FIRST && r[at + COPY] === 0 && this.events === undefined && (child === 0 || !this.isRunDependent(child))) {
        r[at + META] = 0;
        // Surviving mutants: KP-34 (MUTANTS.md).
        r[at + CHILD] = 0;
      } else {
        this.evict(id);
      }
    }
    // Stryker disable next-line ArithmeticOperator: KP-35
    r[at + REF] = 1;
    r[at + OWNER] = owner;
  }

  /** Reads the QPOS words of the blocks at ring positions [from, to) (a prefetch); returns them folded. */
  private prefetchRing(ring: Int32Array, from: number, to: number): number {
    const r = this.rec;
    // Stryker disable next-line ArithmeticOperator: KP-36
    const mask = ring.length - 1;
    let s = 0;
    // Stryker disable next-line all: KP-37
    for (let pos = from; pos < to; pos++) s ^= r[ring[pos & mask]! * STRIDE + QPOS]!;
    return s;
  }

  /**
   * Reads the records of `ids` (a prefetch): the loads are independent, so the CPU overlaps their
   * cache misses, and the loop that then works on the blocks finds them in cache. Changes nothing.
   */
  // Stryker disable next-line BlockStatement: KP-38
  private prefetch(ids: Int32Array, from: number, to: number): void {
    const r = this.rec;
    const cap = this.cap;
    let s = 0;
    // Stryker disable next-line all: KP-39
    for (let i = from; i < to; i++) {
      const id = ids[i]!;
      // Stryker disable next-line all: KP-40
      if (id < cap) s ^= r[id * STRIDE]!;
    }
    this.sink = s;
  }

  /** A prefix hit takes its blocks: out of the free queue when unreferenced, then ref + 1. */
  touch(ids: readonly number[]): void {
    for (const id of ids) this.touchOne(id);
  }

  /** `touch` on a block table's entries, in table order. */
  touchTable(table: BlockTable): void {
    const ids = table.blocks;
    for (let i = 0; i < table.numBlocks; i++) this.touchOne(ids[i]!);
  }

  private touchOne(id: number): void {
    if (id === NULL_BLOCK) return;
    this.reach(id);
    const at = id * STRIDE;
    // Stryker disable next-line ArithmeticOperator: KP-41
    if (this.rec[at + REF] === 0) {
      this.dequeue(id);
      const meta = this.rec[at + META]!;
      if (meta !== 0) {
        this.freeHashed--;
        this.cachedOf[(meta & GROUP_MASK) - 1]!--;
      }
      const owner = this.rec[at + OWNER]!;
      // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-42
      if (owner > 0) this.usedOf[owner - 1]!++;
    }
    // Stryker disable next-line ArithmeticOperator: KP-43
    this.rec[at + REF]!++;
  }

  /**
   * Drops one reference from each block, in the order given (a request passes its blocks tail
   * first). A block reaching 0 without a hash goes to the front (keeping the given order), a
   * hashed one to the back, where it stays cached until evicted. Returns how many reached 0.
   */
  free(ids: readonly number[]): number {
    let released = 0;
    try {
      for (const id of ids) if (id !== NULL_BLOCK && this.release(id)) released++;
    } finally {
      this.flushFresh();
    }
    return released;
  }

  /**
   * Frees the real blocks of a block table tail first, then the blocks of `then` in order (as
   * `free([...reversed table, ...then])`, without the array); returns how many reached 0.
   */
  freeTableTailFirst(table: BlockTable, then: readonly number[]): number {
    let released = 0;
    const blocks = table.blocks;
    this.prefetch(blocks, 0, table.numBlocks);
    try {
      // The table tail first, then `then` in its order (one batch: fresh blocks keep their order).
      const r = this.rec;
      for (let i = table.numBlocks - 1; i >= 0; i--) {
        const id = blocks[i]!;
        if (id === NULL_BLOCK) continue;
        const at = id * STRIDE;
        const meta = r[at + META]!;
        // The common case inline: the last reference of a cached block, which goes to the back
        // of the free queue (ring not full). `release` and `pushBack` do exactly this then: the
        // block is taken (id below untouchedFrom, QPOS 0), so the enqueue check passes.
        // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator,BlockStatement: KP-44
        // prettier-ignore
        if (r[at + REF] === 1 && meta !== 0 && id < this.untouchedFrom && r[at + QPOS] === 0 && this.backTail - this.backHead < this.back.length && this.backTail < POS_LIMIT) {
          r[at + REF] = 0;
          released++;
          const owner = r[at + OWNER]!;
          // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-45
          if (owner > 0) this.usedOf[owner - 1]!--;
          const pos = this.backTail++;
          this.back[pos & (this.back.length - 1)] = id;
          r[at + QPOS] = pos;
          this.backLive++;
          this.freeHashed++;
          this.cachedOf[(meta & GROUP_MASK) - 1]!++;
          continue;
        }
        if (this.release(id)) released++;
      }
      for (const id of then) if (id !== NULL_BLOCK && this.release(id)) released++;
    } finally {
      this.flushFresh();
    }
    return released;
  }

  /**
   * Drops one reference; true when it reached 0. A hashed block then goes to the back of the
   * free queue, an unhashed one to the free call's fresh batch (`flushFresh` puts the batch at
   * the front in its order, as vLLM prepends them).
   */
  private release(id: number): boolean {
    const at = id * STRIDE;
    // Stryker disable next-line ArithmeticOperator: KP-46
    const rc = --this.rec[at + REF]!;
    if (rc < 0) throw failure("pool invariant: block {0} freed more often than taken", id);
    if (rc > 0) return false;
    const owner = this.rec[at + OWNER]!;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-47
    if (owner > 0) this.usedOf[owner - 1]!--;
    const meta = this.rec[at + META]!;
    if (meta !== 0) {
      this.pushBack(id);
      this.freeHashed++;
      this.cachedOf[(meta & GROUP_MASK) - 1]!++;
      return true;
    }
    if (this.freshCount === this.freshBatch.length) {
      const grown = new Int32Array(2 * this.freshBatch.length);
      grown.set(this.freshBatch);
      this.freshBatch = grown;
    }
    this.freshBatch[this.freshCount++] = id;
    return true;
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
    // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator,ArithmeticOperator: KP-48
    if (id === NULL_BLOCK || id >= this.cap || this.rec[id * STRIDE + META] !== 0 || this.rec[id * STRIDE + REF]! <= 0) {
      throw failure("pool invariant: block {0} cannot be cached", id);
    }
    const r = this.rec;
    const at = id * STRIDE;
    const linked = this.linked[group] === 1 && parent !== NULL_BLOCK;
    // The parent key's first copy (several copies put the parent key in the table).
    let pf = NULL_BLOCK;
    if (linked) {
      const pm = r[parent * STRIDE + META]!;
      pf = (pm & FIRST) !== 0 ? parent : this.cache.get(group, r[parent * STRIDE + HI]!, r[parent * STRIDE + LO]!);
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
        this.cache.putIfAbsent(group, hi, lo, id);
        r[at + META] = r[at + META]! | IN_TABLE;
      }
      return true;
    }
    // A duplicate copy goes last: the first copy stays the one hits use; a key with copies lives in the table.
    r[at + META] = group + 1;
    const fm = r[first * STRIDE + META]!;
    // Stryker disable next-line ConditionalExpression: KP-53
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
  cacheTableRun(table: BlockTable, from: number, to: number, group: number, keys: Int32Array): void {
    const blocks = table.blocks;
    // Stryker disable next-line ConditionalExpression: KP-54
    const linked = this.linked[group] === 1;
    // Each new key is looked up in the table (a random slot): when the table is too big to stay
    // in cache (as in groups whose every key is in it), load those slots together first. Linked
    // groups keep only run heads in the table, which stays small: the extra pass would only cost.
    // Stryker disable next-line all: KP-55
    if (this.cache.capacity > PREFETCH_SLOTS) this.sink = this.cache.touchHomes(group, keys, to - from);
    // Caching allocates no record (cacheBlockKey does not grow the pool): the record array stays.
    const r = this.rec;
    const cap = this.cap;
    const firstMeta = (group + 1) | FIRST;
    for (let i = from; i < to; i++) {
      const b = blocks[i]!;
      // Surviving mutants: KP-56 (MUTANTS.md).
      if (b === NULL_BLOCK || (b < cap && r[b * STRIDE + META] !== 0)) continue;
      const hi = keys[2 * (i - from)]!;
      const lo = keys[2 * (i - from) + 1]!;
      const parent = i === 0 ? NULL_BLOCK : blocks[i - 1]!;
      // The common case inline: a linked group whose parent block is its key's first copy with no
      // run link yet (as when it was cached just before), and a key not cached: the block becomes
      // the key's first copy, chained from its parent. cacheBlockKey takes the same branches then
      // (pf = parent, CHILD[pf] = 0, findFirst goes to the table and misses); anything else goes
      // through it.
      // Stryker disable next-line ConditionalExpression,EqualityOperator,BlockStatement: KP-57
      if (linked && parent !== NULL_BLOCK && b < cap) {
        const at = b * STRIDE;
        const pat = parent * STRIDE;
        // Stryker disable next-line ArithmeticOperator,BlockStatement: KP-58
        // Surviving mutants: KP-59 (MUTANTS.md).
        if (r[at + REF]! > 0 && (r[pat + META]! & FIRST) !== 0 && r[pat + CHILD] === 0 && this.cache.get(group, hi, lo) < 0) {
          r[at + HI] = hi;
          r[at + LO] = lo;
          r[at + META] = firstMeta;
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
    // Stryker disable next-line ConditionalExpression,LogicalOperator: KP-60
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
    // Stryker disable next-line ConditionalExpression: KP-61
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
        // Stryker disable next-line ConditionalExpression,StringLiteral: KP-62
        if (slot < 0) throw failure("pool invariant: key of block {0} has copies but no table entry", id);
        this.cache.setValueAt(slot, next);
        r[next * STRIDE + META] = r[next * STRIDE + META]! | FIRST | IN_TABLE;
      } else {
        if ((meta & IN_TABLE) !== 0) {
          const slot = this.cache.find(group, hi, lo);
          // Stryker disable next-line ConditionalExpression,StringLiteral: KP-63
          if (slot < 0) throw failure("pool invariant: block {0} is marked in the table but is not", id);
          this.cache.deleteAt(slot);
        }
        last = true;
      }
    } else {
      // A later copy: its key is in the table, and the first copy's chain reaches it before its end,
      // so prev never becomes 0.
      let prev = this.cache.get(group, hi, lo);
      // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-64
      while (prev > 0 && r[prev * STRIDE + COPY] !== id) prev = r[prev * STRIDE + COPY]!;
      // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-65
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
      if (this.queued(id)) {
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
    const free = this.numFree;
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
    const out: number[] = [];
    const r = this.rec;
    // Stryker disable next-line EqualityOperator: KP-66
    for (let pos = this.frontHead; pos < this.frontTail; pos++) {
      const id = this.front[pos & (this.front.length - 1)]!;
      if (r[id * STRIDE + QPOS] === -pos) out.push(id);
    }
    for (let id = this.untouchedFrom; id < this.numPages; id++) out.push(id);
    // Stryker disable next-line EqualityOperator: KP-67
    for (let pos = this.backHead; pos < this.backTail; pos++) {
      const id = this.back[pos & (this.back.length - 1)]!;
      if (r[id * STRIDE + QPOS] === pos) out.push(id);
    }
    return out;
  }

  isFree(id: number): boolean {
    return this.queued(id);
  }

  /** Cached keys per group with their copies in caching order, sorted (O(P): tests and determinism checks only). */
  cacheSnapshot(): string[] {
    const out: string[] = [];
    const r = this.rec;
    // Stryker disable next-line EqualityOperator: KP-68
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
