import type { BlockHash, KvEvent, PoolMetrics } from "./contract.js";
import { FreeQueue } from "./free-queue.js";

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
  private readonly hashValue: BigUint64Array;
  /** Per group: block hash -> the block holding it, or the blocks when duplicated. */
  private readonly cache: Map<BlockHash, number | number[]>[];
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
    this.hashValue = new BigUint64Array(numPages);
    this.queue = new FreeQueue(numPages);
    for (let id = 1; id < numPages; id++) this.queue.pushBack(id);
    this.cache = Array.from({ length: numGroups }, () => new Map<BlockHash, number | number[]>());
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
    return this.hashGroup[id] === group && this.hashValue[id] === hash;
  }

  /** A hit block that a touch would take out of the free queue. */
  isEvictable(id: number): boolean {
    return id !== NULL_BLOCK && this.refCounts[id] === 0;
  }

  /** Any block holding (group, hash), or NULL_BLOCK. */
  cachedBlock(group: number, hash: BlockHash): number {
    const e = this.cache[group]!.get(hash);
    if (e === undefined) return NULL_BLOCK;
    return typeof e === "number" ? e : e[0]!;
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
    if (id === NULL_BLOCK || this.hashGroup[id]! >= 0 || this.refCounts[id]! <= 0) {
      throw new Error(`pool invariant: block ${id} cannot be cached`);
    }
    this.hashGroup[id] = group;
    this.hashValue[id] = hash;
    const map = this.cache[group]!;
    const e = map.get(hash);
    if (e === undefined) {
      map.set(hash, id);
      return true;
    }
    if (typeof e === "number") map.set(hash, [e, id]);
    else e.push(id);
    return false;
  }

  /** Drops a block's cache entry and hash (eviction); `removed` when its key's last copy goes. */
  private evict(id: number): void {
    const group = this.hashGroup[id]!;
    const hash = this.hashValue[id]!;
    this.hashGroup[id] = -1;
    this.hashValue[id] = 0n;
    const map = this.cache[group]!;
    const e = map.get(hash);
    let last = false;
    if (e === id) {
      map.delete(hash);
      last = true;
    } else if (Array.isArray(e)) {
      const k = e.indexOf(id);
      if (k >= 0) e.splice(k, 1);
      if (e.length === 1) map.set(hash, e[0]!);
    }
    if (last && this.events !== undefined) {
      const prev = this.events[this.events.length - 1];
      if (prev?.type === "removed" && prev.groupIndex === group) (prev.blockHashes as BlockHash[]).push(hash);
      else this.events.push({ type: "removed", groupIndex: group, blockHashes: [hash] });
    }
  }

  /** Test hook: hides every copy of (group, hash) from the cache, as evicting them would. */
  uncache(group: number, hash: BlockHash): void {
    const e = this.cache[group]!.get(hash);
    if (e === undefined) return;
    for (const id of typeof e === "number" ? [e] : [...e]) {
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
    this.cache.forEach((m, g) => {
      for (const [h, e] of m) out.push(`${g}:${h}:${typeof e === "number" ? e : e.join("/")}`);
    });
    return out.sort();
  }
}
