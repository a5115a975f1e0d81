/**
 * One offload tier (host memory, disk): the blocks it holds under their (cache group, key) keys,
 * LRU by last use, within a byte capacity, and the two channels that time its traffic (loads into
 * the GPU pool share the read bandwidth, stores the write bandwidth, each in arrival order).
 *
 * Keys are the GPU pool's own (kv-pool's BlockListener: 64-bit keys as int32 halves). The blocks
 * live in typed arrays indexed by a slot, found through kv-pool's BlockHashTable: a store or a
 * lookup allocates nothing and reads no BigInt (a replay stores millions of blocks).
 */
import { BlockHashTable } from "@kvsim/kv-pool";
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

/** Where a tier puts the blocks it lets go (the tier below, when it keeps evictions). */
export type EvictedSink = (group: number, hi: number, lo: number, bytes: number) => void;

/** A block a tier holds, for tests and checks (`TierStore.entries`). */
export interface TierEntry {
  readonly slot: number;
  readonly group: number;
  readonly hi: number;
  readonly lo: number;
  readonly bytes: number;
  readonly readyAtMs: number;
  readonly pins: number;
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

const NONE = -1;
/** Int32 words per slot (see TierStore.words); the completion time is the float64 at 5 slot + 4. */
const STRIDE = 10;
const GROUP = 0;
const HI = 1;
const LO = 2;
const PINS = 3;
const PREV = 4;
const NEXT = 5;
const BYTES = 6;
/** The most blocks one tier may hold (kv-pool's hash table bound). */
const MAX_BLOCKS = 2 ** 27;

export class TierStore {
  private readonly table = new BlockHashTable(MAX_BLOCKS, { grow: true });
  /**
   * Slot s is int32 words [10s, 10s + 10): group, high half, low half, pins (loads reading it),
   * LRU previous, LRU next, bytes, unused, then its store's completion time as the float64 at
   * [5s + 4] of the same buffer. One slot is one cache line: a store or lookup of a block in a
   * tier of millions costs one memory miss for its fields, not one per field.
   */
  private words = new Int32Array(16 * STRIDE);
  private times = new Float64Array(this.words.buffer);
  /** Slots never used are [used, capacity); freed ones are stacked in `freeSlots`. */
  private usedSlots = 0;
  private freeSlots: number[] = [];
  /** The least recently used end of the LRU list, and the most recently used end. */
  private head = NONE;
  private tail = NONE;
  private used = 0;
  private count = 0;
  private writeFreeAtMs = 0;
  private readFreeAtMs = 0;
  private readonly victims: number[] = [];
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

  /** When the last store queued completes (every block held is ready from then). */
  get storesDoneAtMs(): number {
    return this.writeFreeAtMs;
  }

  /** Blocks held, stores still in flight included. */
  get blocks(): number {
    return this.count;
  }

  /** The slot holding (group, hi, lo), ready or not; -1 when the tier does not hold it. */
  find(group: number, hi: number, lo: number): number {
    return this.table.get(group, hi, lo);
  }

  /** The slot holding (group, hi, lo) if its store completed by `nowMs`; else -1. */
  ready(group: number, hi: number, lo: number, nowMs: number): number {
    const s = this.table.get(group, hi, lo);
    return s >= 0 && this.times[5 * s + 4]! <= nowMs ? s : NONE;
  }

  /** A held block's bytes. */
  slotBytes(slot: number): number {
    return this.words[STRIDE * slot + BYTES]!;
  }

  /**
   * Stores a block from `atMs` on the write channel (after the stores before it); a block already
   * held is only marked used. Makes room by evicting least recently used blocks that are neither
   * pinned nor still being stored, handing them to `evicted`. Returns false when the block is
   * already held or cannot be made room for (then it is dropped and counted).
   */
  store(group: number, hi: number, lo: number, bytes: number, atMs: number, evicted: EvictedSink | undefined): boolean {
    const have = this.table.get(group, hi, lo);
    if (have >= 0) {
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
    const s = this.newSlot();
    const w = this.words;
    const at = STRIDE * s;
    w[at + GROUP] = group;
    w[at + HI] = hi;
    w[at + LO] = lo;
    w[at + PINS] = 0;
    w[at + BYTES] = bytes;
    this.times[5 * s + 4] = end;
    this.table.putIfAbsent(group, hi, lo, s);
    this.link(s);
    this.used += bytes;
    this.count++;
    const c = this.counters;
    c.blocksStored++;
    c.bytesStored += bytes;
    if (this.used > c.peakUsedBytes) c.peakUsedBytes = this.used;
    return true;
  }

  /** Marks a held block most recently used. */
  touch(slot: number): void {
    if (this.tail === slot) return;
    this.unlink(slot);
    this.link(slot);
  }

  pin(slot: number): void {
    this.words[STRIDE * slot + PINS]!++;
  }

  unpin(slot: number): void {
    const at = STRIDE * slot + PINS;
    if (this.words[at]! <= 0) throw new Error(`tier ${this.config.name}: a block unpinned more often than pinned`);
    this.words[at]!--;
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
    const w = this.words;
    for (let s = this.head; s !== NONE; s = w[STRIDE * s + NEXT]!) {
      const at = STRIDE * s;
      yield { slot: s, group: w[at + GROUP]!, hi: w[at + HI]!, lo: w[at + LO]!, bytes: w[at + BYTES]!, readyAtMs: this.times[5 * s + 4]!, pins: w[at + PINS]! };
    }
  }

  private makeRoom(bytes: number, atMs: number, evicted: EvictedSink | undefined): boolean {
    const cap = this.config.capacityBytes;
    if (this.used + bytes <= cap) return true;
    // Evictable: neither pinned by a load nor still being stored. Walk from the LRU end; count
    // first, so a store that cannot fit evicts nothing.
    let free = cap - this.used;
    const victims = this.victims;
    victims.length = 0;
    const w = this.words;
    for (let s = this.head; s !== NONE && free < bytes; s = w[STRIDE * s + NEXT]!) {
      if (w[STRIDE * s + PINS]! > 0 || this.times[5 * s + 4]! > atMs) continue;
      victims.push(s);
      free += w[STRIDE * s + BYTES]!;
    }
    if (free < bytes) return false;
    for (const s of victims) {
      const at = STRIDE * s;
      const g = w[at + GROUP]!;
      const h = w[at + HI]!;
      const l = w[at + LO]!;
      const b = w[at + BYTES]!;
      this.unlink(s);
      this.table.delete(g, h, l);
      this.freeSlots.push(s);
      this.used -= b;
      this.count--;
      this.counters.blocksEvicted++;
      evicted?.(g, h, l, b);
    }
    return true;
  }

  private newSlot(): number {
    const reused = this.freeSlots.pop();
    if (reused !== undefined) return reused;
    const s = this.usedSlots++;
    if (STRIDE * (s + 1) > this.words.length) {
      const grown = new Int32Array(2 * this.words.length);
      grown.set(this.words);
      this.words = grown;
      this.times = new Float64Array(grown.buffer);
    }
    return s;
  }

  private link(s: number): void {
    const w = this.words;
    w[STRIDE * s + PREV] = this.tail;
    w[STRIDE * s + NEXT] = NONE;
    if (this.tail === NONE) this.head = s;
    else w[STRIDE * this.tail + NEXT] = s;
    this.tail = s;
  }

  private unlink(s: number): void {
    const w = this.words;
    const p = w[STRIDE * s + PREV]!;
    const n = w[STRIDE * s + NEXT]!;
    if (p === NONE) this.head = n;
    else w[STRIDE * p + NEXT] = n;
    if (n === NONE) this.tail = p;
    else w[STRIDE * n + PREV] = p;
  }
}
