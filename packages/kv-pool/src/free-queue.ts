import { QPOS, STRIDE, type BlockRecords } from "./block-records.js";
import { failure, rangeFailure } from "./errors.js";
import { FreeQueueRing } from "./free-queue-ring.js";

/** The front ring's positions start in the middle of the range, so it can grow both ways. */
const FRONT_BASE = 1 << 29;

/**
 * vLLM's free block queue (FreeKVCacheBlockQueue): the free blocks in eviction order, taken from
 * the front; a block freed without a hash goes to the front, a cached one to the back, and a hit
 * takes a block out of the middle.
 *
 * Why this instead of one list of every free block: a pool of P pages starts with all of them
 * free, and most pools never use most pages. The queue is `front ++ [untouchedFrom, P) ++ back`:
 * blocks never taken yet are an implicit id range (no entry, no record), and only blocks that
 * come back are queued, in two `FreeQueueRing`s (pushes to the front go to the front ring, to
 * the back to the back ring). Taking walks the front ring, then the range, then the back ring.
 * The fresh blocks of one free call are gathered and put at the front together, keeping their
 * order, as vLLM prepends them.
 */
export class FreeQueue {
  private readonly front: FreeQueueRing;
  private readonly back: FreeQueueRing;
  /** Blocks [untouchedFrom, numPages) were never taken: queued, in id order, between the rings. */
  private untouchedFrom = 1;
  /** Fresh blocks of one free call (the first `freshCount`), put at the front together by `flushFresh`. */
  private freshBatch: Int32Array = new Int32Array(64);
  private freshCount = 0;

  constructor(
    private readonly records: BlockRecords,
    private readonly numPages: number,
  ) {
    // Every usable page is free, in id order (the untouched range 1..P - 1).
    this.front = new FreeQueueRing(records, FRONT_BASE, -1);
    this.back = new FreeQueueRing(records, 1, 1);
  }

  get numFree(): number {
    return this.front.live + this.back.live + this.numPages - this.untouchedFrom;
  }

  /** Ring slots of the front and back parts (tests: they stay near twice the free blocks). */
  get ringSizes(): { readonly front: number; readonly back: number } {
    return { front: this.front.size, back: this.back.size };
  }

  /** True when the block is in the queue. */
  has(id: number): boolean {
    if (id >= this.untouchedFrom) return id < this.numPages;
    // Stryker disable next-line EqualityOperator: KP-10
    // Surviving mutants: KP-11 (MUTANTS.md).
    return id > 0 && id < this.records.cap && this.records.words[id * STRIDE + QPOS] !== 0;
  }

  /** Takes a queued block out of the queue (a hit). */
  remove(id: number): void {
    // Stryker disable next-line ConditionalExpression,StringLiteral: KP-12
    if (!this.has(id)) throw failure("pool invariant: block {0} is not in the free queue", id);
    if (id >= this.untouchedFrom) {
      // Taken from the middle of the untouched range (never by the pool's own walks): the range
      // before it moves to the end of the front part, where it was queued.
      this.records.reach(id);
      for (let u = this.untouchedFrom; u < id; u++) {
        this.untouchedFrom = u + 1;
        this.check(u);
        this.front.pushTail(u);
      }
      this.untouchedFrom = id + 1;
      return;
    }
    // Stryker disable next-line EqualityOperator: KP-13
    if (this.records.words[id * STRIDE + QPOS]! < 0) this.front.remove(id);
    else this.back.remove(id);
  }

  /** Checks that a block can enter the queue. */
  private check(id: number): void {
    // Surviving mutants: KP-14 (MUTANTS.md).
    if (id <= 0 || id >= this.numPages || !Number.isInteger(id)) throw rangeFailure("block id {0} outside 1..{1}", id, this.numPages - 1);
    if (this.has(id)) throw failure("pool invariant: block {0} is already in the free queue", id);
  }

  /** Puts a freed cached block at the back. */
  pushBack(id: number): void {
    this.check(id);
    this.back.pushTail(id);
  }

  /** Adds a freed block without a hash to the current free call's batch (see `flushFresh`). */
  pushFresh(id: number): void {
    if (this.freshCount === this.freshBatch.length) {
      const grown = new Int32Array(2 * this.freshBatch.length);
      grown.set(this.freshBatch);
      this.freshBatch = grown;
    }
    this.freshBatch[this.freshCount++] = id;
  }

  /** Ends a free call: its fresh blocks go to the very front, keeping their order (vLLM prepends them so). */
  flushFresh(): void {
    const batch = this.freshBatch;
    const n = this.freshCount;
    this.freshCount = 0;
    for (let i = n - 1; i >= 0; i--) {
      const id = batch[i]!;
      this.check(id);
      this.front.pushHead(id);
    }
  }

  /**
   * Pops the first n blocks (n <= numFree) in queue order into out[start], out[start + 1], ...
   * (out has room). Popped blocks of the untouched range get records here.
   */
  popInto(n: number, out: Int32Array, start: number): void {
    let k = start + this.front.popInto(n, out, start);
    // Blocks never taken yet, in id order; they get records here (block records only grow).
    const from = this.untouchedFrom;
    const fresh = Math.min(n - (k - start), this.numPages - from);
    this.records.reach(from + fresh - 1);
    this.untouchedFrom = from + fresh;
    for (let id = from; id < from + fresh; id++) out[k++] = id;
    const left = n - (k - start);
    // (A shortcut: with nothing left, the calls below would pop nothing.)
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-162
    if (left > 0) {
      // The back ring's entries are cached blocks spread over the records: load their QPOS
      // words together first (see FreeQueueRing.prefetch).
      // Stryker disable next-line all: KP-31
      this.sink = this.back.prefetch(left);
      // Stryker disable next-line ConditionalExpression,StringLiteral: KP-32
      if (this.back.popInto(left, out, k) < left) throw new Error("pool invariant: the free queue is empty");
    }
  }

  /** Where `prefetch` leaves what it read (kept so the reads are not optimised away). */
  private sink = 0;

  /** Front to back (O(P): tests and diagnostics only). */
  order(): number[] {
    const out: number[] = [];
    this.front.appendLive(out);
    for (let id = this.untouchedFrom; id < this.numPages; id++) out.push(id);
    this.back.appendLive(out);
    return out;
  }
}
