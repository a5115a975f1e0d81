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

/**
 * vLLM v1's BlockPool: P pages shared by every cache group, page 0 the null block. Reference
 * counts, a free queue (eviction from the front) and the prefix-cache map keyed by
 * (group index, block hash); duplicates of one key are allowed (block tables stay append-only).
 */
export class BlockPool {
  private readonly refCounts: Int32Array;
  private readonly queue: FreeQueue;
  /** Group index of a block's cache entry, -1 when the block has no hash. */
  private readonly hashGroup: Int32Array;
  /** A cached block's hash as two 32-bit halves (no BigInt on the hot path). */
  private readonly hashHi: Uint32Array;
  private readonly hashLo: Uint32Array;
  /** (group, hash) -> the first block caching it; later copies follow through `nextCopy`. */
  private readonly cache: BlockHashTable;
  /** The next block cached under the same key, in caching order; -1 at the end. */
  private readonly nextCopy: Int32Array;
  private freeHashed = 0;
  private readonly events: KvEvent[] | undefined;

  constructor(
    readonly numPages: number,
    numGroups: number,
    collectEvents: boolean,
  ) {
    if (!Number.isInteger(numPages) || numPages < 2) throw new RangeError(`numPages must be an integer >= 2 (page 0 is the null page), got ${numPages}`);
    this.refCounts = new Int32Array(numPages);
    this.hashGroup = new Int32Array(numPages).fill(-1);
    this.hashHi = new Uint32Array(numPages);
    this.hashLo = new Uint32Array(numPages);
    this.nextCopy = new Int32Array(numPages).fill(-1);
    this.queue = new FreeQueue(numPages);
    for (let id = 1; id < numPages; id++) this.queue.pushBack(id);
    if (!Number.isInteger(numGroups) || numGroups < 1) throw new RangeError(`numGroups must be a positive integer, got ${numGroups}`);
    // Every key is held by at least one of the P - 1 usable pages.
    this.cache = new BlockHashTable(numPages - 1);
    this.events = collectEvents ? [] : undefined;
  }

  get numFree(): number {
    return this.queue.length;
  }

  refCount(id: number): number {
    return this.refCounts[id]!;
  }

  isHashed(id: number): boolean {
    return this.hashGroup[id]! >= 0;
  }

  /** True when the block is cached under exactly (group, hash). */
  holds(id: number, group: number, hash: BlockHash): boolean {
    return this.holdsKey(id, group, hashHi(hash), hashLo(hash));
  }

  /** `holds` with the hash as its 32-bit halves. */
  holdsKey(id: number, group: number, hi: number, lo: number): boolean {
    return this.hashGroup[id] === group && this.hashHi[id] === hi && this.hashLo[id] === lo;
  }

  /** A hit block that a touch would take out of the free queue. */
  isEvictable(id: number): boolean {
    return id !== NULL_BLOCK && this.refCounts[id] === 0;
  }

  /** Any block holding (group, hash), or NULL_BLOCK. */
  cachedBlock(group: number, hash: BlockHash): number {
    return this.cachedBlockKey(group, hashHi(hash), hashLo(hash));
  }

  /** `cachedBlock` with the hash as its 32-bit halves: the first copy cached, or NULL_BLOCK. */
  cachedBlockKey(group: number, hi: number, lo: number): number {
    const first = this.cache.get(group, hi, lo);
    return first < 0 ? NULL_BLOCK : first;
  }

  /** Takes n blocks from the front of the free queue, evicting cached ones; each gets ref 1. */
  takeFree(n: number): number[] {
    if (n > this.queue.length) throw new Error(`pool invariant: ${n} blocks asked, ${this.queue.length} free`);
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const id = this.queue.popFront();
      if (this.hashGroup[id]! >= 0) {
        this.freeHashed--;
        this.evict(id);
      }
      this.refCounts[id] = 1;
      out.push(id);
    }
    return out;
  }

  /** A prefix hit takes its blocks: out of the free queue when unreferenced, then ref + 1. */
  touch(ids: readonly number[]): void {
    for (const id of ids) {
      if (id === NULL_BLOCK) continue;
      if (this.refCounts[id] === 0) {
        this.queue.remove(id);
        if (this.hashGroup[id]! >= 0) this.freeHashed--;
      }
      this.refCounts[id]!++;
    }
  }

  /**
   * Drops one reference from each block, in the order given (a request passes its blocks tail
   * first). A block reaching 0 without a hash goes to the front (keeping the given order), a
   * hashed one to the back, where it stays cached until evicted. Returns how many reached 0.
   */
  free(ids: readonly number[]): number {
    let fresh: number[] | undefined;
    let released = 0;
    for (const id of ids) {
      if (id === NULL_BLOCK) continue;
      const rc = --this.refCounts[id]!;
      if (rc < 0) throw new Error(`pool invariant: block ${id} freed more often than taken`);
      if (rc > 0) continue;
      released++;
      if (this.hashGroup[id]! >= 0) {
        this.queue.pushBack(id);
        this.freeHashed++;
      } else {
        (fresh ??= []).push(id);
      }
    }
    if (fresh !== undefined) this.queue.prependAll(fresh);
    return released;
  }

  /**
   * Caches a referenced, unhashed block under (group, hash). Returns true when it is the first
   * copy of that key (then a `stored` event is due).
   */
  cacheBlock(id: number, group: number, hash: BlockHash): boolean {
    return this.cacheBlockKey(id, group, hashHi(hash), hashLo(hash));
  }

  /** `cacheBlock` with the hash as its 32-bit halves. */
  cacheBlockKey(id: number, group: number, hi: number, lo: number): boolean {
    if (id === NULL_BLOCK || this.hashGroup[id]! >= 0 || this.refCounts[id]! <= 0) {
      throw new Error(`pool invariant: block ${id} cannot be cached`);
    }
    this.hashGroup[id] = group;
    this.hashHi[id] = hi;
    this.hashLo[id] = lo;
    const first = this.cache.putIfAbsent(group, hi, lo, id);
    if (first < 0) return true;
    // A duplicate copy goes last: the first copy stays the one hits use.
    let last = first;
    for (let n = this.nextCopy[last]!; n >= 0; n = this.nextCopy[last]!) last = n;
    this.nextCopy[last] = id;
    return false;
  }

  /** Drops a block's cache entry and hash (eviction); `removed` when its key's last copy goes. */
  private evict(id: number): void {
    const group = this.hashGroup[id]!;
    const hi = this.hashHi[id]!;
    const lo = this.hashLo[id]!;
    this.hashGroup[id] = -1;
    const next = this.nextCopy[id]!;
    this.nextCopy[id] = -1;
    const slot = this.cache.find(group, hi, lo);
    const first = slot < 0 ? -1 : this.cache.valueAt(slot);
    let last = false;
    if (first === id) {
      if (next < 0) {
        this.cache.deleteAt(slot);
        last = true;
      } else {
        this.cache.setValueAt(slot, next);
      }
    } else {
      let prev = first;
      while (prev >= 0 && this.nextCopy[prev] !== id) prev = this.nextCopy[prev]!;
      if (prev >= 0) this.nextCopy[prev] = next;
    }
    if (last && this.events !== undefined) {
      const hash = joinHash(hi, lo);
      const prevEvent = this.events[this.events.length - 1];
      if (prevEvent?.type === "removed" && prevEvent.groupIndex === group) (prevEvent.blockHashes as BlockHash[]).push(hash);
      else this.events.push({ type: "removed", groupIndex: group, blockHashes: [hash] });
    }
  }

  /** Test hook: hides every copy of (group, hash) from the cache, as evicting them would. */
  uncache(group: number, hash: BlockHash): void {
    const copies: number[] = [];
    for (let id = this.cache.get(group, hashHi(hash), hashLo(hash)); id >= 0; id = this.nextCopy[id]!) copies.push(id);
    for (const id of copies) {
      if (this.queue.has(id)) this.freeHashed--;
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

  /** Front-to-back free queue (O(P): tests and diagnostics only). */
  freeQueueOrder(): number[] {
    return this.queue.toArray();
  }

  isFree(id: number): boolean {
    return this.queue.has(id);
  }

  /** Cached keys per group, sorted (O(cache): tests and determinism checks only). */
  cacheSnapshot(): string[] {
    const out: string[] = [];
    for (const [g, hi, lo, first] of this.cache.entries()) {
      const copies: number[] = [];
      for (let id = first; id >= 0; id = this.nextCopy[id]!) copies.push(id);
      out.push(`${g}:${joinHash(hi, lo)}:${copies.join("/")}`);
    }
    return out.sort();
  }
}
