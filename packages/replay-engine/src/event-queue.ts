import TinyQueue from "tinyqueue";

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

function compare<P>(a: QueuedEvent<P>, b: QueuedEvent<P>): number {
  return a.atMs - b.atMs || a.phase - b.phase || a.stage - b.stage || a.workerId - b.workerId || a.seq - b.seq;
}

/**
 * A min-heap of future events in the stated same-time order: time, phase, stage, worker id,
 * then insertion order. Push and pop are O(log n) in the number of pending events.
 */
export class EventQueue<P> {
  private readonly heap = new TinyQueue<QueuedEvent<P>>([], compare);
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(atMs: number, phase: Phase, stage: Stage, workerId: number, payload: P): void {
    if (!Number.isFinite(atMs)) throw new Error(`event time must be finite, got ${atMs}`);
    this.heap.push({ atMs, phase, stage, workerId, seq: this.seq++, payload });
  }

  /**
   * The time of the earliest event, Infinity when empty (events are finite). For the replay's
   * loop: always a number, so V8's compiled loop never meets an undefined it has no feedback for.
   */
  nextTimeMs(): number {
    return this.heap.length === 0 ? Infinity : this.heap.data[0]!.atMs;
  }

  /** Removes and returns the earliest event if it is due at or before `nowMs`. */
  popDue(nowMs: number): QueuedEvent<P> | undefined {
    // The length first: reading past the end of the heap's array (an empty queue) would throw
    // V8's compiled replay loop away the first time the queue ran dry.
    const heap = this.heap;
    if (heap.length === 0 || heap.data[0]!.atMs > nowMs) return undefined;
    return heap.pop();
  }

  /** Every pending event, in no particular order (for diagnostics). */
  pending(): readonly QueuedEvent<P>[] {
    return this.heap.data.slice(0, this.heap.length);
  }
}
