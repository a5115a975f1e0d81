import { QPOS, STRIDE, type BlockRecords } from "./block-records.js";
import { failure } from "./errors.js";

/** Ring positions stay in [1, POS_LIMIT) (they are stored in a block's int32 QPOS word). */
const POS_LIMIT = 1 << 30;
/** Ring slots before any growth (a power of two). */
const INITIAL_SLOTS = 8;

/**
 * One part of the free queue: block ids in queue order at consecutive positions
 * [head, tail) of a power-of-two ring, pushed at either end and popped from the head, with
 * removal from the middle.
 *
 * Why this instead of vLLM's doubly linked list of blocks (FreeKVCacheBlockQueue) or a plain
 * array: the linked list removes a block from the middle in O(1) but writes the links of its two
 * neighbours, two random cache misses per hit and per free, and an array's splice is O(n). Here
 * removal is lazy: an entry counts only while its block's QPOS record word (`block-records.ts`)
 * names its position (`sign` x position: the two rings of one queue sign them apart), so removing
 * a block only clears that word, and stale entries are skipped when popped and dropped when the
 * ring is rebuilt (when full, or at the end of its position range), growing to twice its live
 * entries at most. Pushing and popping read and write the ring in order and the block's own
 * record, which its caller touches anyway: the ring costs no random memory access of its own.
 */
export class FreeQueueRing {
  private slots: Int32Array = new Int32Array(INITIAL_SLOTS);
  /** Positions [head, tail) hold the entries (slot = position & (length - 1)). */
  private head: number;
  private tail: number;
  /** Entries whose block's QPOS word names them. */
  live = 0;

  constructor(
    private readonly records: BlockRecords,
    /** Where positions start, and start again at every rebuild: room below it for pushes at the head. */
    private readonly base: number,
    /** QPOS = sign x position: +1 or -1. */
    private readonly sign: number,
  ) {
    this.head = base;
    this.tail = base;
  }

  /** Slots in the ring (tests: stale entries do not make it grow without bound). */
  get size(): number {
    return this.slots.length;
  }

  /** Appends a block that has no queue entry (the caller checks). */
  pushTail(id: number): void {
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-15
    if (this.tail - this.head === this.slots.length || this.tail >= POS_LIMIT) this.rebuild();
    const pos = this.tail++;
    this.slots[pos & (this.slots.length - 1)] = id;
    this.records.words[id * STRIDE + QPOS] = this.sign * pos;
    this.live++;
  }

  /** Puts a block that has no queue entry in front of every entry (the caller checks). */
  pushHead(id: number): void {
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-16
    if (this.tail - this.head === this.slots.length || this.head <= 1) this.rebuild();
    const pos = --this.head;
    this.slots[pos & (this.slots.length - 1)] = id;
    this.records.words[id * STRIDE + QPOS] = this.sign * pos;
    this.live++;
  }

  /** Takes out a block whose QPOS word names an entry of this ring (the caller checks). */
  remove(id: number): void {
    this.records.words[id * STRIDE + QPOS] = 0;
    this.live--;
  }

  /**
   * Pops up to `count` live entries from the head into out[start], out[start + 1], ..., clearing
   * their QPOS words; returns how many.
   */
  popInto(count: number, out: Int32Array, start: number): number {
    const r = this.records.words;
    const ring = this.slots;
    const mask = ring.length - 1;
    const sign = this.sign;
    let head = this.head;
    let live = this.live;
    let k = start;
    const end = start + count;
    while (k < end && live > 0) {
      const pos = head++;
      const id = ring[pos & mask]!;
      const at = id * STRIDE + QPOS;
      if (r[at] === sign * pos) {
        r[at] = 0;
        live--;
        out[k++] = id;
      }
    }
    this.head = head;
    this.live = live;
    return k - start;
  }

  /**
   * Reads the QPOS words of the next `count` entries (a prefetch: popping checks each entry's
   * word, one cache miss after another otherwise); returns them folded, changes nothing.
   */
  prefetch(count: number): number {
    const r = this.records.words;
    const ring = this.slots;
    // Stryker disable next-line ArithmeticOperator: KP-36
    const mask = ring.length - 1;
    const to = Math.min(this.tail, this.head + count);
    let s = 0;
    // Stryker disable next-line all: KP-37
    for (let pos = this.head; pos < to; pos++) s ^= r[ring[pos & mask]! * STRIDE + QPOS]!;
    return s;
  }

  /** Appends the live entries to `out`, in order (O(entries): tests and diagnostics). */
  appendLive(out: number[]): void {
    const r = this.records.words;
    const mask = this.slots.length - 1;
    // Stryker disable next-line EqualityOperator: KP-66
    for (let pos = this.head; pos < this.tail; pos++) {
      const id = this.slots[pos & mask]!;
      if (r[id * STRIDE + QPOS] === this.sign * pos) out.push(id);
    }
  }

  /** Drops the stale entries (growing the ring when at least half are live) and renumbers the live ones from `base`. */
  private rebuild(): void {
    const r = this.records.words;
    const ring = this.slots;
    const mask = ring.length - 1;
    const live = this.live;
    const sign = this.sign;
    let size = ring.length;
    // Stryker disable next-line EqualityOperator,ArithmeticOperator: KP-19
    while (2 * live + 2 > size) size *= 2;
    const out = new Int32Array(size);
    let k = 0;
    // Live entries first, renumbered after: a block dequeued and queued again leaves a stale entry
    // that can sit at the very position its live entry moves to (a front ring's new positions
    // start at its base, above where pushes to its head went), and would then read as live.
    // Stryker disable next-line EqualityOperator: KP-20
    for (let pos = this.head; pos < this.tail; pos++) {
      const id = ring[pos & mask]!;
      if (r[id * STRIDE + QPOS] !== sign * pos) continue;
      out[(this.base + k++) & (size - 1)] = id;
    }
    // Stryker disable next-line ConditionalExpression,StringLiteral: KP-21
    if (k !== live) throw failure("pool invariant: free-queue ring holds {0} live entries, counted {1}", k, live);
    // Stryker disable next-line EqualityOperator: KP-22
    for (let np = this.base; np < this.base + k; np++) r[out[np & (size - 1)]! * STRIDE + QPOS] = sign * np;
    this.slots = out;
    this.head = this.base;
    this.tail = this.base + k;
  }
}
