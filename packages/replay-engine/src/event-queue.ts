/**
 * Same-time phases of heap events (docs/rules/decisions.md §10): pass completions, then transfer completions.
 * Arrivals come from the record stream, not the heap: the replay releases them after every heap
 * event of the same time, and idle workers start passes after both, so no event marks a worker ready.
 */
export const Phase = { passCompletion: 0, transferCompletion: 1 } as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

/** Prefill stage before decode; an aggregated worker is its own (single) stage. */
export const Stage = { aggregated: 0, prefill: 0, decode: 1 } as const;
export type Stage = (typeof Stage)[keyof typeof Stage];

export interface QueuedEvent<P> {
  readonly atMs: number;
  readonly phase: Phase;
  readonly stage: Stage;
  readonly workerId: number;
  /** Insertion order: the last tie-break. */
  readonly seq: number;
  readonly payload: P;
}

/** True when event a comes before event b (no two events are equal: `seq` differs). */
function before<P>(a: QueuedEvent<P>, b: QueuedEvent<P>): boolean {
  if (a.atMs !== b.atMs) return a.atMs < b.atMs;
  if (a.phase !== b.phase) return a.phase < b.phase;
  if (a.stage !== b.stage) return a.stage < b.stage;
  if (a.workerId !== b.workerId) return a.workerId < b.workerId;
  return a.seq < b.seq;
}

/**
 * A min-heap of future events in the stated same-time order: time, phase, stage, worker id,
 * then insertion order. Push and pop are O(log n) in the number of pending events. The order is
 * total (no two events tie), so any correct heap pops the same sequence. Its own binary heap, not
 * a generic one taking a comparison function: the replay's other heaps shared that one's methods
 * with other comparisons, so its calls to the comparison were polymorphic, left uninlined and
 * deoptimised the heap's code in a process's first replay.
 */
export class EventQueue<P> {
  /** The heap in an array: the children of entry i are 2i + 1 and 2i + 2. */
  private readonly heap: QueuedEvent<P>[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(atMs: number, phase: Phase, stage: Stage, workerId: number, payload: P): void {
    if (!Number.isFinite(atMs)) throw new Error(`event time must be finite, got ${atMs}`);
    const heap = this.heap;
    const e: QueuedEvent<P> = { atMs, phase, stage, workerId, seq: this.seq++, payload };
    // Sift up: move parents down until e's place is found.
    let i = heap.length;
    heap.push(e);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent]!;
      if (!before(e, p)) break;
      heap[i] = p;
      i = parent;
    }
    heap[i] = e;
  }

  /**
   * The time of the earliest event, Infinity when empty (events are finite). For the replay's
   * loop: always a number, so V8's compiled loop never meets an undefined it has no feedback for.
   */
  nextTimeMs(): number {
    return this.heap.length === 0 ? Infinity : this.heap[0]!.atMs;
  }

  /** Removes and returns the earliest event if it is due at or before `nowMs`. */
  popDue(nowMs: number): QueuedEvent<P> | undefined {
    // The length first: reading past the end of the heap's array (an empty queue) would throw
    // V8's compiled replay loop away the first time the queue ran dry.
    const heap = this.heap;
    if (heap.length === 0 || heap[0]!.atMs > nowMs) return undefined;
    const top = heap[0]!;
    const last = heap.pop()!;
    const n = heap.length;
    if (n > 0) {
      // Sift the last entry down from the root: move the earlier child up while it is before it.
      let i = 0;
      for (;;) {
        let child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && before(heap[child + 1]!, heap[child]!)) child++;
        const c = heap[child]!;
        if (!before(c, last)) break;
        heap[i] = c;
        i = child;
      }
      heap[i] = last;
    }
    return top;
  }

  /** Every pending event, in no particular order (for diagnostics). */
  pending(): readonly QueuedEvent<P>[] {
    return this.heap.slice();
  }
}
