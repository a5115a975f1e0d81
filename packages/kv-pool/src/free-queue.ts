/**
 * A doubly linked queue of block ids with O(1) removal from the middle (vLLM's
 * FreeKVCacheBlockQueue), on one typed array that grows with the ids actually used.
 *
 * A pool starts with every block free, in id order. Those never taken yet are not stored: the
 * queue is `front ++ [untouchedFrom, capacity) ++ back`, where the untouched range is implicit,
 * pushFront adds to the front part and pushBack to the back part. Popping takes the front part,
 * then the range in id order, then the back part: the same order as a queue holding every id.
 */
/** The first number of ids whose links are stored before any growth. */
const INITIAL_IDS = 256;

export class FreeQueue {
  /**
   * Node n = id + 1 (node 0 is the sentinel of a circular list): links[2n] = next node + 1, or 0
   * when the id is not in the list; links[2n + 1] = previous node.
   */
  private links: Int32Array;
  private listCount = 0;
  /** Ids in [untouchedFrom, capacity) are queued implicitly, after the front part. */
  private untouchedFrom: number;
  /** Node of the last id of the front part (before the untouched range); 0 when there is none. */
  private frontLast = 0;

  /**
   * A queue for ids 0 .. capacity - 1 holding `initial` in that order, then (implicitly, without
   * storing them) the ids `untouchedFrom` .. capacity - 1.
   */
  constructor(
    readonly capacity: number,
    initial: Iterable<number> = [],
    untouchedFrom = capacity,
  ) {
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new RangeError(`capacity must be an integer >= 0, got ${capacity}`);
    if (!Number.isSafeInteger(untouchedFrom) || untouchedFrom < 0 || untouchedFrom > capacity) throw new RangeError(`untouchedFrom must be in 0..${capacity}, got ${untouchedFrom}`);
    this.untouchedFrom = untouchedFrom;
    this.links = new Int32Array(2 * (Math.min(capacity, INITIAL_IDS) + 1));
    this.links[0] = 1; // the sentinel points at itself (node 0, stored + 1)
    for (const id of initial) {
      if (id >= untouchedFrom) throw new RangeError(`block id ${id} is already in the untouched range`);
      this.pushBack(id);
    }
  }

  get length(): number {
    return this.listCount + this.capacity - this.untouchedFrom;
  }

  has(id: number): boolean {
    if (id >= this.untouchedFrom) return id < this.capacity;
    const at = 2 * (id + 1);
    return id >= 0 && at < this.links.length && this.links[at] !== 0;
  }

  /** The id at the front, or -1 when empty. */
  peekFront(): number {
    if (this.frontLast === 0 && this.untouchedFrom < this.capacity) return this.untouchedFrom;
    return this.listCount === 0 ? -1 : this.links[0]! - 2;
  }

  popFront(): number {
    if (this.frontLast === 0 && this.untouchedFrom < this.capacity) return this.untouchedFrom++;
    if (this.listCount === 0) throw new Error("free queue is empty");
    const id = this.links[0]! - 2;
    this.remove(id);
    return id;
  }

  /** Pops n ids from the front, in queue order. */
  popFrontN(n: number): number[] {
    if (n > this.length) throw new Error(`free queue holds ${this.length}, asked for ${n}`);
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push(this.popFront());
    return out;
  }

  remove(id: number): void {
    if (!this.has(id)) throw new Error(`block ${id} is not in the free queue`);
    if (id >= this.untouchedFrom) {
      // Taken from the middle of the untouched range (never by the pool's own walks): store the
      // range up to it at the end of the front part, where it was queued.
      for (let u = this.untouchedFrom; u <= id; u++) {
        const node = this.admitUntouched(u);
        this.link(this.frontLast, node);
        this.frontLast = node;
      }
      this.untouchedFrom = id + 1;
    }
    const l = this.links;
    const node = id + 1;
    const next = l[2 * node]! - 1;
    const prev = l[2 * node + 1]!;
    l[2 * prev] = next + 1;
    l[2 * next + 1] = prev;
    l[2 * node] = 0;
    if (node === this.frontLast) this.frontLast = prev;
    this.listCount--;
  }

  pushBack(id: number): void {
    const node = this.admit(id);
    const last = this.links[1]!;
    this.link(last, node);
  }

  pushFront(id: number): void {
    const node = this.admit(id);
    this.link(0, node);
    if (this.frontLast === 0) this.frontLast = node;
  }

  /**
   * Inserts `id` right after `after` (an id in the front part), or at the very front when `after`
   * is -1: a run of ids put at the front keeps its order this way.
   */
  pushFrontAfter(after: number, id: number): void {
    if (after < 0) {
      this.pushFront(id);
      return;
    }
    if (!this.has(after) || after >= this.untouchedFrom) throw new Error(`block ${after} is not in the free queue`);
    const node = this.admit(id);
    const at = after + 1;
    this.link(at, node);
    if (at === this.frontLast) this.frontLast = node;
  }

  /** Puts `ids` at the front keeping their order: ids[0] becomes the new front. */
  prependAll(ids: readonly number[]): void {
    for (let i = ids.length - 1; i >= 0; i--) this.pushFront(ids[i]!);
  }

  /** Front to back (O(length): for tests and diagnostics, never on the hot path). */
  toArray(): number[] {
    const out: number[] = [];
    const untouched = (): void => {
      for (let id = this.untouchedFrom; id < this.capacity; id++) out.push(id);
    };
    if (this.frontLast === 0) untouched();
    for (let node = this.links[0]! - 1; node !== 0; node = this.links[2 * node]! - 1) {
      out.push(node - 1);
      if (node === this.frontLast) untouched();
    }
    return out;
  }

  /** Checks an id can be inserted and makes room for its node. */
  private admit(id: number): number {
    if (id < 0 || id >= this.capacity || !Number.isInteger(id)) throw new RangeError(`block id ${id} outside 0..${this.capacity - 1}`);
    if (this.has(id)) throw new Error(`block ${id} is already in the free queue`);
    return this.admitUntouched(id);
  }

  /** Makes room for the node of `id`. */
  private admitUntouched(id: number): number {
    const node = id + 1;
    if (2 * node + 2 > this.links.length) {
      let size = this.links.length;
      while (2 * node + 2 > size) size *= 2;
      const grown = new Int32Array(Math.min(size, 2 * (this.capacity + 1)));
      grown.set(this.links);
      this.links = grown;
    }
    return node;
  }

  /** Links `node` after node `at`. */
  private link(at: number, node: number): void {
    const l = this.links;
    const next = l[2 * at]! - 1;
    l[2 * at] = node + 1;
    l[2 * node + 1] = at;
    l[2 * node] = next + 1;
    l[2 * next + 1] = node;
    this.listCount++;
  }
}
