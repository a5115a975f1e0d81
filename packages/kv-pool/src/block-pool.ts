import type { BlockHash, BlockListener, KvEvent, PoolMetrics } from "./contract.js";
import { hashHi, hashLo, joinHash } from "./hash-halves.js";
import { failure } from "./errors.js";
import { reserveBlocks, type BlockTable } from "./block-table.js";
import { BlockRecords, GROUP_MASK, HI, LO, META, OWNER, REF, STRIDE } from "./block-records.js";
import { FreeQueue } from "./free-queue.js";
import { NULL_BLOCK, PrefixIndex } from "./prefix-index.js";

export { NULL_BLOCK } from "./prefix-index.js";

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
  | "listener"
  | "takeEvents"
  | "metrics"
  | "freeQueueOrder"
  | "isFree"
  | "cacheSnapshot"
  | "groupPages"
>;

/**
 * vLLM v1's BlockPool: P pages shared by every cache group, page 0 the null block. Reference
 * counts, a free queue (eviction from the front) and the prefix cache keyed by (group index,
 * block hash); duplicates of one key are allowed (block tables stay append-only), the first copy
 * cached is the one hits use.
 *
 * It composes three structures over one set of block records (`block-records.ts`: 8 int32 words
 * per block in one typed array): the free queue (`free-queue.ts`, two lazy-removal rings
 * `free-queue-ring.ts` around the never-taken ids), the prefix index (`prefix-index.ts`: run links
 * over a hash table, `block-hash-table.ts`), and here the reference counts, the owner group of
 * each block and the per-group page counters, and the KV events.
 */
export class BlockPool {
  private readonly records: BlockRecords;
  private readonly queue: FreeQueue;
  private readonly index: PrefixIndex;
  /** Free blocks that still cache a key. */
  private freeHashed = 0;
  /** Per group: referenced pages its tables took, and free pages still caching one of its keys. */
  private readonly usedOf: Int32Array;
  private readonly cachedOf: Int32Array;
  private readonly events: KvEvent[] | undefined;
  /** Told of cached blocks (by the managers) and evicted keys (here); set by the manager. */
  listener: BlockListener | undefined = undefined;
  /** Where prefetches leave what they read (kept so the reads are not optimised away). */
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
    this.records = new BlockRecords(numPages);
    this.queue = new FreeQueue(this.records, numPages);
    this.index = new PrefixIndex(this.records, numGroups, linkedGroups);
    this.events = collectEvents ? [] : undefined;
    this.usedOf = new Int32Array(numGroups);
    this.cachedOf = new Int32Array(numGroups);
  }

  get numFree(): number {
    return this.queue.numFree;
  }

  refCount(id: number): number {
    return this.records.word(id, REF);
  }

  isHashed(id: number): boolean {
    return this.records.word(id, META) !== 0;
  }

  /** True when the block is cached under exactly (group, hash). */
  holds(id: number, group: number, hash: BlockHash): boolean {
    return this.index.holdsKey(id, group, hashHi(hash), hashLo(hash));
  }

  /** `holds` with the hash as its 32-bit halves. */
  holdsKey(id: number, group: number, hi: number, lo: number): boolean {
    return this.index.holdsKey(id, group, hi, lo);
  }

  /** A hit block that a touch would take out of the free queue. */
  isEvictable(id: number): boolean {
    return id !== NULL_BLOCK && this.records.word(id, REF) === 0;
  }

  /** The first copy of (group, hash), or NULL_BLOCK (diagnostics: a full scan when the key is only linked). */
  cachedBlock(group: number, hash: BlockHash): number {
    return this.index.cachedBlock(group, hashHi(hash), hashLo(hash));
  }

  /**
   * The first copy of (group, hi:lo), or NULL_BLOCK. `prev` is the first copy of the parent key
   * found by the same walk (NULL_BLOCK at block 0, or in a group that is not linked): its run
   * link is tried before the table.
   */
  findFirst(group: number, prev: number, hi: number, lo: number): number {
    return this.index.findFirst(group, prev, hi, lo);
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
    // Pops the n blocks in queue order, then takes each. Popping reads and writes only the rings
    // and QPOS words, taking (evicting) touches neither, so doing all of one first changes nothing.
    this.queue.popInto(n, out, start);
    const owner = group + 1;
    for (let k = start; k < start + n; k++) this.claim(out[k]!, owner);
    // Stryker disable next-line ConditionalExpression: KP-30
    if (group >= 0) this.usedOf[group]! += n;
  }

  /** Takes a block just popped: evicts its key if it caches one, then reference 1 for `owner` (group + 1). */
  private claim(id: number, owner: number): void {
    // Records may have grown while popping: read the array here.
    const r = this.records.words;
    const at = id * STRIDE;
    const meta = r[at + META]!;
    if (meta !== 0) {
      const group = (meta & GROUP_MASK) - 1;
      this.freeHashed--;
      this.cachedOf[group]!--;
      this.evictKey(id, group);
    }
    // Stryker disable next-line ArithmeticOperator: KP-35
    r[at + REF] = 1;
    r[at + OWNER] = owner;
  }

  /** Evicts a cached block's key; a `removed` event when its last copy goes. */
  private evictKey(id: number, group: number): void {
    if (this.index.evict(id) && (this.events !== undefined || this.listener !== undefined)) {
      // The index keeps the evicted block's hash halves in its record.
      const r = this.records.words;
      const hi = r[id * STRIDE + HI]!;
      const lo = r[id * STRIDE + LO]!;
      if (this.events !== undefined) this.emitRemoved(group, hi, lo);
      this.listener?.evicted(group, hi, lo);
    }
  }

  /** Consecutive removals of one group make one event. */
  private emitRemoved(group: number, hi: number, lo: number): void {
    const events = this.events!;
    const hash = joinHash(hi >>> 0, lo >>> 0);
    const prevEvent = events[events.length - 1];
    if (prevEvent?.type === "removed" && prevEvent.groupIndex === group) (prevEvent.blockHashes as BlockHash[]).push(hash);
    else events.push({ type: "removed", groupIndex: group, blockHashes: [hash] });
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
    this.records.reach(id);
    const r = this.records.words;
    const at = id * STRIDE;
    // Stryker disable next-line ArithmeticOperator: KP-41
    if (r[at + REF] === 0) {
      this.queue.remove(id);
      const meta = r[at + META]!;
      if (meta !== 0) {
        this.freeHashed--;
        this.cachedOf[(meta & GROUP_MASK) - 1]!--;
      }
      const owner = r[at + OWNER]!;
      // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-42
      if (owner > 0) this.usedOf[owner - 1]!++;
    }
    // Stryker disable next-line ArithmeticOperator: KP-43
    r[at + REF]!++;
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
      this.queue.flushFresh();
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
    this.sink = this.records.prefetch(blocks, 0, table.numBlocks);
    try {
      // The table tail first, then `then` in its order (one batch: fresh blocks keep their order).
      for (let i = table.numBlocks - 1; i >= 0; i--) {
        const id = blocks[i]!;
        if (id !== NULL_BLOCK && this.release(id)) released++;
      }
      for (const id of then) if (id !== NULL_BLOCK && this.release(id)) released++;
    } finally {
      this.queue.flushFresh();
    }
    return released;
  }

  /**
   * Drops one reference; true when it reached 0. A hashed block then goes to the back of the
   * free queue, an unhashed one to the free call's fresh batch (put at the front when the call ends).
   */
  private release(id: number): boolean {
    const r = this.records.words;
    const at = id * STRIDE;
    // Stryker disable next-line ArithmeticOperator: KP-46
    const rc = --r[at + REF]!;
    if (rc < 0) throw failure("pool invariant: block {0} freed more often than taken", id);
    if (rc > 0) return false;
    const owner = r[at + OWNER]!;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-47
    if (owner > 0) this.usedOf[owner - 1]!--;
    const meta = r[at + META]!;
    if (meta !== 0) {
      this.queue.pushBack(id);
      this.freeHashed++;
      this.cachedOf[(meta & GROUP_MASK) - 1]!++;
    } else {
      this.queue.pushFresh(id);
    }
    return true;
  }

  /**
   * Caches a referenced, unhashed block under (group, hash). Returns true when it is the first
   * copy of that key (then a `stored` event is due).
   */
  cacheBlock(id: number, group: number, hash: BlockHash): boolean {
    return this.index.cache(id, group, hashHi(hash), hashLo(hash), NULL_BLOCK);
  }

  /**
   * `cacheBlock` with the hash as its 32-bit halves. `parent` is the block before it in the
   * sequence's table (cached under the parent key), or NULL_BLOCK: a linked group chains the
   * block to the parent key's first copy when it can.
   */
  cacheBlockKey(id: number, group: number, hi: number, lo: number, parent: number): boolean {
    return this.index.cache(id, group, hi, lo, parent);
  }

  /**
   * Caches the real, unhashed blocks of table entries [from, to) in order: block i under
   * (group, keys[2(i - from)] : keys[2(i - from) + 1], the hash's int32 halves), with table entry
   * i - 1 as its parent (NULL_BLOCK at 0), exactly as `cacheBlockKey` on each would, in one
   * loop. Builds no `stored` event (for a caller that emits none).
   */
  cacheTableRun(table: BlockTable, from: number, to: number, group: number, keys: Int32Array): void {
    this.sink = this.index.cacheRun(table.blocks, from, to, group, keys);
  }

  /** Test hook: hides every copy of (group, hash) from the cache, as evicting them would. */
  uncache(group: number, hash: BlockHash): void {
    const copies: number[] = [];
    for (let id = this.cachedBlock(group, hash); id !== NULL_BLOCK; id = this.index.nextCopy(id)) copies.push(id);
    for (const id of copies) {
      if (this.queue.has(id)) {
        this.freeHashed--;
        this.cachedOf[group]!--;
      }
      this.evictKey(id, group);
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
    return this.queue.order();
  }

  /** Slots of the free queue's two rings (tests: they stay near twice the free blocks). */
  freeQueueRingSizes(): { readonly front: number; readonly back: number } {
    return this.queue.ringSizes;
  }

  isFree(id: number): boolean {
    return this.queue.has(id);
  }

  /** Cached keys per group with their copies in caching order, sorted (O(P): tests and determinism checks only). */
  cacheSnapshot(): string[] {
    return this.index.snapshot();
  }
}
