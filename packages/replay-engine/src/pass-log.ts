// The times of one worker's passes that emitted tokens, and the gap sums and counts the ITL sample
// reads off them (see itl.ts).
import type { GapHistogram } from "./gap-histogram.js";
import { HIST } from "./gap-histogram.js";

/** Entries per storage chunk of a pass log (fixed chunks: growth copies nothing and leaves no slack). */
const CHUNK_BITS = 13;
const CHUNK = 1 << CHUNK_BITS;
const MASK = CHUNK - 1;
/** The times of one worker's passes that emitted tokens. */
export class PassLog {
  // The first chunk up front: a log born empty was an array of small integers until its first
  // chunk went in, so `append` met two maps and was deoptimised on each new worker's first pass.
  private readonly times: Float64Array[] = [new Float64Array(CHUNK)];
  private n = 0;
  /**
   * A time was -0, not finite, or below the one before: a gap may then be -0, negative or NaN,
   * which `GapHistogram` does not order (never so in a replay).
   */
  private odd = false;

  get length(): number {
    return this.n;
  }

  time(index: number): number {
    return this.times[index >>> CHUNK_BITS]![index & MASK]!;
  }

  /** Adds a pass time; returns its index. */
  append(atMs: number): number {
    const c = this.n >>> CHUNK_BITS;
    if (c === this.times.length) this.times.push(new Float64Array(CHUNK));
    this.times[c]![this.n & MASK] = atMs;
    if (!(atMs < Infinity) || (this.n > 0 && !(atMs >= this.time(this.n - 1))) || (atMs === 0 && 1 / atMs < 0)) this.odd = true;
    return this.n++;
  }

  /**
   * Calls `f(gap, count)` for every entry j >= 1 whose count is positive: the count of entry j is
   * how many of `starts` are <= j less how many of `ends` are (both ascending). A run over entries
   * first .. last counts the gaps of entries first + 1 .. last: its start is first + 1, its end
   * last + 1.
   */
  forEachCounted(starts: Int32Array, ends: Int32Array, f: (gap: number, count: number) => void): void {
    const n = this.n;
    if (n === 0) return;
    let count = 0;
    let si = 0;
    let ei = 0;
    let prev = this.times[0]![0]!;
    // Chunk by chunk: the gap of entry j is time[j] - time[j - 1], read in order.
    for (let c = 0; c * CHUNK < n; c++) {
      const times = this.times[c]!;
      const end = Math.min(CHUNK, n - c * CHUNK);
      for (let k = c === 0 ? 1 : 0; k < end; k++) {
        const j = c * CHUNK + k;
        while (si < starts.length && starts[si]! <= j) {
          count++;
          si++;
        }
        while (ei < ends.length && ends[ei]! <= j) {
          count--;
          ei++;
        }
        const t = times[k]!;
        if (count > 0) f(t - prev, count);
        prev = t;
      }
    }
  }

  /**
   * Copies `forEachCounted`'s entries whose `GapHistogram` bucket (`Math.floor(gap * scale) -
   * base`) has a part, in order: part `p = partOf[bucket]` (-1: none) gets the value at
   * `values[p][filled[p]]`, its count at the same index of `weights[p]`.
   */
  copyCounted(
    starts: Int32Array,
    ends: Int32Array,
    scale: number,
    base: number,
    partOf: Int32Array,
    values: Float64Array[],
    weights: Float64Array[],
    filled: Int32Array,
  ): void {
    const n = this.n;
    if (n === 0) return;
    let live = 0;
    let si = 0;
    let ei = 0;
    const chunks = this.times;
    let prev = chunks[0]![0]!;
    // One flat loop (not one per chunk): V8 compiles this pass while it runs (on-stack
    // replacement), and an outer loop it had not run yet sent that code back to the interpreter.
    for (let j = 1; j < n; j++) {
      while (si < starts.length && starts[si]! <= j) {
        live++;
        si++;
      }
      while (ei < ends.length && ends[ei]! <= j) {
        live--;
        ei++;
      }
      const t = chunks[j >>> CHUNK_BITS]![j & MASK]!;
      if (live > 0) {
        const v = t - prev;
        const p = partOf[Math.floor(v * scale) - base]!;
        if (p >= 0) {
          const i = filled[p]!++;
          values[p]![i] = v;
          weights[p]![i] = live;
        }
      }
      prev = t;
    }
  }

  /** Σ (gap - mean)^2 over the gaps of entries first + 1 .. last, added in order to `acc` (the order `addGaps` summed them in). */
  squaredDeviations(first: number, last: number, acc: number, mean: number): number {
    if (last <= first) return acc;
    let prev = this.time(first);
    for (let j = first + 1; j <= last;) {
      const times = this.times[j >>> CHUNK_BITS]!;
      const stop = Math.min(last, j | MASK);
      for (let k = j & MASK, kEnd = stop & MASK; k <= kEnd; k++) {
        const t = times[k]!;
        const v = t - prev;
        acc = acc + (v - mean) * (v - mean);
        prev = t;
      }
      j = stop + 1;
    }
    return acc;
  }

  /**
   * Adds the gaps of entries first + 1 .. last in order to `sum` (returned: the same additions as
   * summing them one token at a time) and each, with weight one, to `h`.
   */
  addGaps(first: number, last: number, sum: number, h: GapHistogram): number {
    if (last <= first) return sum;
    if (this.odd) h.irregular = true;
    let total = h.total;
    let scale = h.scale;
    let base = h.base;
    let min = h.min;
    let max = h.max;
    let prev = this.time(first);
    for (let j = first + 1; j <= last;) {
      const times = this.times[j >>> CHUNK_BITS]!;
      const stop = Math.min(last, j | MASK);
      for (let k = j & MASK, kEnd = stop & MASK; k <= kEnd; k++) {
        const t = times[k]!;
        const v = t - prev;
        prev = t;
        sum = sum + v;
        if (v < min) min = v;
        if (v > max) max = v;
        let b = Math.floor(v * scale) - base;
        if (!(b >= 0 && b < HIST)) {
          if (!h.makeRoom(v)) continue;
          total = h.total;
          scale = h.scale;
          base = h.base;
          b = Math.floor(v * scale) - base;
        }
        total[b]!++;
      }
      j = stop + 1;
    }
    h.min = min;
    h.max = max;
    return sum;
  }
}
