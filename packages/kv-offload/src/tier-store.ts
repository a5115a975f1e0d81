/**
 * One offload tier (host memory, disk): the blocks it holds under their (group, hash) keys, LRU by
 * last use, within a byte capacity, and the two channels that time its traffic (loads into the
 * GPU pool share the read bandwidth, stores the write bandwidth, each in arrival order).
 */
import type { BlockHash } from "@kvsim/kv-pool";
import type { KvOffload } from "@kvsim/profile-schema";

/** A tier as one rank sees it: its share of the tier's capacity, and its bandwidths in bytes per ms. */
export interface TierConfig {
  readonly name: string;
  /** Bytes the tier holds (one TP rank's share when the worker has several). */
  readonly capacityBytes: number;
  readonly readBytesPerMs: number;
  readonly writeBytesPerMs: number;
  /** Paid once by every load before its first byte. */
  readonly latencyMs: number;
  /** write_through: fed every block the GPU computes; on_evict: fed what the tier above evicts. */
  readonly store: "write_through" | "on_evict";
}

/**
 * The tiers of a spec's `kv_offload` as one TP rank of a worker with `tensorParallelSize` ranks
 * sees them: the capacity is the worker's (summed over its TP ranks, as vLLM's
 * --kv-offloading-size), so each rank holds capacity / TP (rounded down to whole bytes); the
 * bandwidths are per GPU already (each rank moves its own shard over its own link).
 */
export function tierConfigs(offload: KvOffload, tensorParallelSize: number): TierConfig[] {
  if (!Number.isSafeInteger(tensorParallelSize) || tensorParallelSize < 1)
    throw new RangeError(`tensorParallelSize must be an integer >= 1, got ${tensorParallelSize}`);
  return offload.tiers.map((t) => ({
    name: t.name,
    capacityBytes: Math.floor(t.capacity / tensorParallelSize),
    readBytesPerMs: t.read_bandwidth / 1000,
    writeBytesPerMs: t.write_bandwidth / 1000,
    latencyMs: t.latency_ms,
    store: t.store,
  }));
}

/** One block a tier holds. */
export class TierEntry {
  /** Neighbours in the LRU list (least recently used first). */
  prev: TierEntry | undefined = undefined;
  next: TierEntry | undefined = undefined;
  /** Loads in flight that read it: it cannot be evicted meanwhile. */
  pins = 0;

  constructor(
    readonly group: number,
    readonly hash: BlockHash,
    readonly bytes: number,
    /** When its store completes: before then a lookup does not see it and it cannot be evicted. */
    readonly readyAtMs: number,
  ) {}
}

/** A block a tier let go to make room, for the tier below (on_evict). */
export interface EvictedBlock {
  readonly group: number;
  readonly hash: BlockHash;
  readonly bytes: number;
}

/** A tier's counters over the replay. */
export interface TierCounters {
  blocksStored: number;
  bytesStored: number;
  /** Stores refused: the block alone exceeds the capacity, or every held block is pinned or still being stored. */
  blocksDropped: number;
  blocksEvicted: number;
  /** Loads that read at least one block from this tier. */
  loads: number;
  blocksLoaded: number;
  bytesLoaded: number;
  /** Prompt tokens whose blocks this tier served. */
  tokensServed: number;
  peakUsedBytes: number;
}

export class TierStore {
  private readonly maps: Map<BlockHash, TierEntry>[] = [];
  /** Least recently used end of the LRU list, and the most recently used end. */
  private head: TierEntry | undefined = undefined;
  private tail: TierEntry | undefined = undefined;
  private used = 0;
  private count = 0;
  private writeFreeAtMs = 0;
  private readFreeAtMs = 0;
  readonly counters: TierCounters = {
    blocksStored: 0,
    bytesStored: 0,
    blocksDropped: 0,
    blocksEvicted: 0,
    loads: 0,
    blocksLoaded: 0,
    bytesLoaded: 0,
    tokensServed: 0,
    peakUsedBytes: 0,
  };

  constructor(readonly config: TierConfig) {
    if (!(config.capacityBytes >= 0) || !Number.isSafeInteger(config.capacityBytes))
      throw new RangeError(`tier ${config.name}: capacity ${config.capacityBytes} bytes`);
    if (!(config.readBytesPerMs > 0) || !(config.writeBytesPerMs > 0)) throw new RangeError(`tier ${config.name}: bandwidths must be > 0`);
  }

  /** Bytes held, stores still in flight included. */
  get usedBytes(): number {
    return this.used;
  }

  /** Blocks held, stores still in flight included. */
  get blocks(): number {
    return this.count;
  }

  /** The block stored under (group, hash), ready or not. */
  get(group: number, hash: BlockHash): TierEntry | undefined {
    return this.maps[group]?.get(hash);
  }

  /** The block stored under (group, hash) if its store completed by `nowMs`. */
  ready(group: number, hash: BlockHash, nowMs: number): TierEntry | undefined {
    const e = this.maps[group]?.get(hash);
    return e !== undefined && e.readyAtMs <= nowMs ? e : undefined;
  }

  /**
   * Stores a block from `atMs` on the write channel (after the stores before it); a block already
   * held is only marked used. Makes room by evicting least recently used blocks that are neither
   * pinned nor still being stored, appending them to `evicted`. Returns false when the block is
   * already held or cannot be made room for (then it is dropped and counted).
   */
  store(group: number, hash: BlockHash, bytes: number, atMs: number, evicted: EvictedBlock[] | undefined): boolean {
    let map = this.maps[group];
    if (map === undefined) {
      while (this.maps.length <= group) this.maps.push(new Map());
      map = this.maps[group]!;
    }
    const have = map.get(hash);
    if (have !== undefined) {
      this.touch(have);
      return false;
    }
    if (bytes > this.config.capacityBytes || !this.makeRoom(bytes, atMs, evicted)) {
      this.counters.blocksDropped++;
      return false;
    }
    const start = Math.max(atMs, this.writeFreeAtMs);
    const end = start + bytes / this.config.writeBytesPerMs;
    this.writeFreeAtMs = end;
    const e = new TierEntry(group, hash, bytes, end);
    map.set(hash, e);
    this.link(e);
    this.used += bytes;
    this.count++;
    const c = this.counters;
    c.blocksStored++;
    c.bytesStored += bytes;
    if (this.used > c.peakUsedBytes) c.peakUsedBytes = this.used;
    return true;
  }

  /** Marks a block most recently used. */
  touch(e: TierEntry): void {
    if (this.tail === e) return;
    this.unlink(e);
    this.link(e);
  }

  pin(e: TierEntry): void {
    e.pins++;
  }

  unpin(e: TierEntry): void {
    if (e.pins <= 0) throw new Error(`tier ${this.config.name}: a block unpinned more often than pinned`);
    e.pins--;
  }

  /**
   * Times a load of `bytes` from `nowMs`: it waits for the loads before it on the read channel, pays
   * the latency once and moves at the read bandwidth. Returns when its last byte is in the GPU pool.
   */
  readDone(bytes: number, nowMs: number): number {
    const start = Math.max(nowMs, this.readFreeAtMs);
    const transfer = bytes / this.config.readBytesPerMs;
    this.readFreeAtMs = start + transfer;
    return start + this.config.latencyMs + transfer;
  }

  /** Every held block in LRU order (least recently used first), for tests and checks. */
  *entries(): IterableIterator<TierEntry> {
    for (let e = this.head; e !== undefined; e = e.next) yield e;
  }

  private makeRoom(bytes: number, atMs: number, evicted: EvictedBlock[] | undefined): boolean {
    const cap = this.config.capacityBytes;
    if (this.used + bytes <= cap) return true;
    // Evictable: neither pinned by a load nor still being stored. Walk from the LRU end; count
    // first, so a store that cannot fit evicts nothing.
    let free = cap - this.used;
    const victims: TierEntry[] = [];
    for (let e = this.head; e !== undefined && free < bytes; e = e.next) {
      if (e.pins > 0 || e.readyAtMs > atMs) continue;
      victims.push(e);
      free += e.bytes;
    }
    if (free < bytes) return false;
    for (const e of victims) {
      this.unlink(e);
      this.maps[e.group]!.delete(e.hash);
      this.used -= e.bytes;
      this.count--;
      this.counters.blocksEvicted++;
      evicted?.push({ group: e.group, hash: e.hash, bytes: e.bytes });
    }
    return true;
  }

  private link(e: TierEntry): void {
    e.prev = this.tail;
    e.next = undefined;
    if (this.tail === undefined) this.head = e;
    else this.tail.next = e;
    this.tail = e;
  }

  private unlink(e: TierEntry): void {
    if (e.prev === undefined) this.head = e.next;
    else e.prev.next = e.next;
    if (e.next === undefined) this.tail = e.prev;
    else e.next.prev = e.prev;
    e.prev = undefined;
    e.next = undefined;
  }
}
