/**
 * Test-only (not exported from the package): the block pool written the straightforward way, one
 * block at a time, as vLLM describes it: an array free queue, a Map from every cached key to its
 * copies in caching order, no runs, no lazy storage. Property tests run the same operations on it
 * and on `BlockPool` and compare every outcome.
 */
import type { BlockHash, BlockListener, KvEvent, PoolMetrics } from "./contract.js";
import { NULL_BLOCK, type PoolOps, type StoredBlock } from "./block-pool.js";
import { hashHi, hashLo, joinHash } from "./hash-halves.js";
import { KvCacheManager } from "./kv-cache-manager.js";
import { pushBlock, tableEntries, type BlockTable } from "./block-table.js";

interface Key {
  readonly group: number;
  readonly hi: number;
  readonly lo: number;
}

const keyOf = (group: number, hi: number, lo: number): string => `${group}:${hi >>> 0}:${lo >>> 0}`;

export class ReferencePool implements PoolOps {
  private readonly refs: number[];
  private queue: number[];
  private readonly hashOf = new Map<number, Key>();
  private readonly copies = new Map<string, number[]>();
  private readonly events: KvEvent[] | undefined;

  constructor(
    readonly numPages: number,
    private readonly numGroups: number,
    collectEvents: boolean,
  ) {
    this.refs = new Array<number>(numPages).fill(0);
    this.queue = Array.from({ length: numPages - 1 }, (_, i) => i + 1);
    this.events = collectEvents ? [] : undefined;
  }

  get numFree(): number {
    return this.queue.length;
  }
  refCount(id: number): number {
    return this.refs[id]!;
  }
  isHashed(id: number): boolean {
    return this.hashOf.has(id);
  }
  holds(id: number, group: number, hash: BlockHash): boolean {
    return this.holdsKey(id, group, hashHi(hash), hashLo(hash));
  }
  holdsKey(id: number, group: number, hi: number, lo: number): boolean {
    const k = this.hashOf.get(id);
    return k?.group === group && k.hi === hi >>> 0 && k.lo === lo >>> 0;
  }
  isEvictable(id: number): boolean {
    return id !== NULL_BLOCK && this.refs[id] === 0;
  }
  cachedBlock(group: number, hash: BlockHash): number {
    return this.copies.get(keyOf(group, hashHi(hash), hashLo(hash)))?.[0] ?? NULL_BLOCK;
  }
  findFirst(group: number, _prev: number, hi: number, lo: number): number {
    return this.copies.get(keyOf(group, hi, lo))?.[0] ?? NULL_BLOCK;
  }
  private readonly owner = new Map<number, number>();
  takeFree(n: number, group = -1): number[] {
    if (n > this.queue.length) throw new Error(`pool invariant: ${n} blocks asked, ${this.queue.length} free`);
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const id = this.queue.shift()!;
      if (this.hashOf.has(id)) this.evict(id);
      this.refs[id] = 1;
      this.owner.set(id, group);
      out.push(id);
    }
    return out;
  }
  /** Straightforward: scans every page. */
  groupPages(): { used: Int32Array; cached: Int32Array } {
    const used = new Int32Array(this.numGroups);
    const cached = new Int32Array(this.numGroups);
    this.refs.forEach((r, id) => {
      const g = this.owner.get(id);
      if (r > 0 && g !== undefined && g >= 0) used[g]!++;
      const k = this.hashOf.get(id);
      if (r === 0 && k !== undefined) cached[k.group]!++;
    });
    return { used, cached };
  }
  takeFreeInto(n: number, table: BlockTable, group = -1): void {
    for (const id of this.takeFree(n, group)) pushBlock(table, id);
  }
  touch(ids: readonly number[]): void {
    for (const id of ids) {
      if (id === NULL_BLOCK) continue;
      if (this.refs[id] === 0) this.queue.splice(this.queue.indexOf(id), 1);
      this.refs[id]!++;
    }
  }
  touchTable(table: BlockTable): void {
    this.touch(tableEntries(table));
  }
  free(ids: readonly number[]): number {
    const fresh: number[] = [];
    let released = 0;
    for (const id of ids) {
      if (id === NULL_BLOCK) continue;
      const rc = --this.refs[id]!;
      if (rc < 0) throw new Error(`pool invariant: block ${id} freed more often than taken`);
      if (rc > 0) continue;
      released++;
      if (this.hashOf.has(id)) this.queue.push(id);
      else fresh.push(id);
    }
    this.queue = [...fresh, ...this.queue];
    return released;
  }
  freeTableTailFirst(table: BlockTable, then: readonly number[]): number {
    return this.free([...tableEntries(table).reverse(), ...then]);
  }
  cacheBlock(id: number, group: number, hash: BlockHash): boolean {
    return this.cacheBlockKey(id, group, hashHi(hash), hashLo(hash));
  }
  cacheBlockKey(id: number, group: number, hi: number, lo: number): boolean {
    if (id === NULL_BLOCK || this.hashOf.has(id) || this.refs[id]! <= 0) throw new Error(`pool invariant: block ${id} cannot be cached`);
    this.hashOf.set(id, { group, hi: hi >>> 0, lo: lo >>> 0 });
    const k = keyOf(group, hi, lo);
    const c = this.copies.get(k);
    if (c === undefined) {
      this.copies.set(k, [id]);
      return true;
    }
    c.push(id);
    return false;
  }
  cacheTableRun(table: BlockTable, from: number, to: number, group: number, keys: Int32Array): void {
    const blocks = tableEntries(table);
    for (let i = from; i < to; i++) {
      const b = blocks[i]!;
      if (b === NULL_BLOCK || this.isHashed(b)) continue;
      this.cacheBlockKey(b, group, keys[2 * (i - from)]!, keys[2 * (i - from) + 1]!);
    }
  }
  private evict(id: number): void {
    const key = this.hashOf.get(id)!;
    this.hashOf.delete(id);
    const k = keyOf(key.group, key.hi, key.lo);
    const c = this.copies.get(k)!;
    c.splice(c.indexOf(id), 1);
    if (c.length > 0) return;
    this.copies.delete(k);
    if (this.events === undefined) return;
    const hash = joinHash(key.hi, key.lo);
    const prev = this.events[this.events.length - 1];
    if (prev?.type === "removed" && prev.groupIndex === key.group) (prev.blockHashes as BlockHash[]).push(hash);
    else this.events.push({ type: "removed", groupIndex: key.group, blockHashes: [hash] });
  }
  uncache(group: number, hash: BlockHash): void {
    for (const id of [...(this.copies.get(keyOf(group, hashHi(hash), hashLo(hash))) ?? [])]) this.evict(id);
  }
  emitStored(group: number, parentHash: BlockHash | null, blocks: StoredBlock[]): void {
    this.events?.push({ type: "stored", groupIndex: group, parentHash, blocks });
  }
  /** Only the type: the reference is compared on pool state, not on what a listener hears. */
  listener: BlockListener | undefined = undefined;

  get collectsEvents(): boolean {
    return this.events !== undefined;
  }
  takeEvents(): KvEvent[] {
    return this.events === undefined ? [] : this.events.splice(0, this.events.length);
  }
  metrics(): PoolMetrics {
    const usable = this.numPages - 1;
    const free = this.queue.length;
    const cached = this.queue.filter((id) => this.hashOf.has(id)).length;
    return { usablePages: usable, usedPages: usable - free, cachedEvictablePages: cached, freePages: free, usage: 1 - free / usable };
  }
  freeQueueOrder(): number[] {
    return [...this.queue];
  }
  isFree(id: number): boolean {
    return this.queue.includes(id);
  }
  cacheSnapshot(): string[] {
    const out: string[] = [];
    for (const c of this.copies.values()) {
      const k = this.hashOf.get(c[0]!)!;
      out.push(`${k.group}:${joinHash(k.hi, k.lo)}:${c.join("/")}`);
    }
    return out.sort();
  }
}

/** A KvCacheManager over the reference pool. */
export class ReferenceKvCacheManager extends KvCacheManager {
  protected override createPool(numPages: number, numGroups: number, collectEvents: boolean): PoolOps {
    return new ReferencePool(numPages, numGroups, collectEvents);
  }
}
