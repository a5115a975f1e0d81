/**
 * A doubly linked queue of block ids with O(1) removal from the middle (vLLM's
 * FreeKVCacheBlockQueue), on typed arrays: slot `capacity` is the sentinel of a circular list.
 */
export class FreeQueue {
  private readonly next: Int32Array;
  private readonly prev: Int32Array;
  private readonly member: Uint8Array;
  private readonly sentinel: number;
  private count = 0;

  /** A queue for ids 0 .. capacity - 1, holding `initial` in that order. */
  constructor(
    readonly capacity: number,
    initial: Iterable<number> = [],
  ) {
    this.next = new Int32Array(capacity + 1);
    this.prev = new Int32Array(capacity + 1);
    this.member = new Uint8Array(capacity);
    this.sentinel = capacity;
    this.next[capacity] = capacity;
    this.prev[capacity] = capacity;
    for (const id of initial) this.pushBack(id);
  }

  get length(): number {
    return this.count;
  }

  has(id: number): boolean {
    return this.member[id] === 1;
  }

  /** The id at the front, or -1 when empty. */
  peekFront(): number {
    return this.count === 0 ? -1 : this.next[this.sentinel]!;
  }

  popFront(): number {
    if (this.count === 0) throw new Error("free queue is empty");
    const id = this.next[this.sentinel]!;
    this.remove(id);
    return id;
  }

  /** Pops n ids from the front, in queue order. */
  popFrontN(n: number): number[] {
    if (n > this.count) throw new Error(`free queue holds ${this.count}, asked for ${n}`);
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push(this.popFront());
    return out;
  }

  remove(id: number): void {
    if (this.member[id] !== 1) throw new Error(`block ${id} is not in the free queue`);
    const p = this.prev[id]!;
    const n = this.next[id]!;
    this.next[p] = n;
    this.prev[n] = p;
    this.member[id] = 0;
    this.count--;
  }

  pushBack(id: number): void {
    this.insertAfter(this.prev[this.sentinel]!, id);
  }

  pushFront(id: number): void {
    this.insertAfter(this.sentinel, id);
  }

  /** Puts `ids` at the front keeping their order: ids[0] becomes the new front. */
  prependAll(ids: readonly number[]): void {
    for (let i = ids.length - 1; i >= 0; i--) this.pushFront(ids[i]!);
  }

  /** Front to back (O(length): for tests and diagnostics, never on the hot path). */
  toArray(): number[] {
    const out: number[] = [];
    for (let id = this.next[this.sentinel]!; id !== this.sentinel; id = this.next[id]!) out.push(id);
    return out;
  }

  private insertAfter(at: number, id: number): void {
    if (id < 0 || id >= this.capacity || !Number.isInteger(id)) throw new RangeError(`block id ${id} outside 0..${this.capacity - 1}`);
    if (this.member[id] === 1) throw new Error(`block ${id} is already in the free queue`);
    const n = this.next[at]!;
    this.next[at] = id;
    this.prev[id] = at;
    this.next[id] = n;
    this.prev[n] = id;
    this.member[id] = 1;
    this.count++;
  }
}
