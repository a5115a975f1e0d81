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
    // Surviving mutants: VS-15 (MUTANTS.md).
    // Stryker disable next-line EqualityOperator: VS-16
    while (cap < initialCapacity) cap *= 2;
    // Stryker disable next-line ArrayDeclaration: VS-17
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
    // Surviving mutants: VS-18 (MUTANTS.md).
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
    // Surviving mutants: VS-19 (MUTANTS.md).
    for (let i = 0; i < this.count; i++) next[i] = this.buf[(this.head + i) & (this.buf.length - 1)];
    this.buf = next;
    this.head = 0;
  }
}
