/**
 * Exact inter-token latencies without one double per token.
 *
 * Every token a worker emits in one pass carries the pass's end time, so the gaps of all requests
 * that got a token in two consecutive passes of a worker are one value: the difference of the two
 * pass times. A worker keeps a `PassLog` of the times of its passes that emitted tokens; a request
 * keeps a `TokenTrack`, the runs of consecutive log entries its tokens fell on (one run, unless a
 * pass skipped it or it was preempted). A completed request adds +1 over its runs to the log's
 * per-entry counts (a difference array): the ITL sample is then the compact (gap, count) data of
 * the log entries plus the few gaps that jump between runs. Memory is one double and one int per
 * pass, not per token; nothing is allocated per token.
 *
 * Exactness: a gap is `time[j] - time[j - 1]` on the very doubles the tokens were stamped with, so
 * it is the value the token-by-token computation gives; the mean is summed in the same order
 * (requests in completion order, gaps in token order); percentiles are exact nearest rank over the
 * weighted values.
 */
import { percentileRank, Sample, type Distribution } from "./stats.js";

const EMPTY: Distribution = { count: 0, mean: 0, min: 0, max: 0, p50: 0, p90: 0, p99: 0, std: 0 };

/** The times of one worker's passes that emitted tokens, and the completed-request counts per entry. */
export class PassLog {
  private times = new Float64Array(64);
  /** counts[j] - counts[j - 1] (entry j counts the gaps time[j] - time[j - 1] of completed requests). */
  private diff = new Int32Array(65);
  private n = 0;

  get length(): number {
    return this.n;
  }

  time(index: number): number {
    return this.times[index]!;
  }

  /** Adds a pass time; returns its index. */
  append(atMs: number): number {
    if (this.n === this.times.length) {
      const times = new Float64Array(this.n * 2);
      times.set(this.times);
      this.times = times;
      const diff = new Int32Array(this.n * 2 + 1);
      diff.set(this.diff);
      this.diff = diff;
    }
    this.times[this.n] = atMs;
    return this.n++;
  }

  /** Counts the gaps ending at entries first + 1 .. last once more. */
  countRun(first: number, last: number): void {
    if (last <= first) return;
    this.diff[first + 1]!++;
    this.diff[last + 1]!--;
  }

  /** Calls `f(gap, count)` for every entry whose gap was counted (count > 0). */
  forEachCounted(f: (gap: number, count: number) => void): void {
    let count = 0;
    for (let j = 1; j < this.n; j++) {
      count += this.diff[j]!;
      if (count > 0) f(this.times[j]! - this.times[j - 1]!, count);
    }
  }
}

/** Where one request's tokens fell in its worker's pass log: runs of consecutive entries. */
export class TokenTrack {
  private log: PassLog | undefined;
  private runFirst = -1;
  private runLast = -1;
  /** Closed runs before the current one, as [first, last] pairs; usually none. */
  private closed: number[] | undefined;

  /** Records the next token of the request, stamped with entry `index` of `log`. */
  add(log: PassLog, index: number): void {
    if (this.log === undefined) {
      this.log = log;
      this.runFirst = index;
    } else if (log !== this.log) {
      throw new Error("a request's tokens must all come from one worker");
    } else if (index !== this.runLast + 1) {
      (this.closed ??= []).push(this.runFirst, this.runLast);
      this.runFirst = index;
    }
    this.runLast = index;
  }

  /** Visits the runs in token order. */
  forEachRun(f: (log: PassLog, first: number, last: number) => void): void {
    const log = this.log;
    if (log === undefined) return;
    const c = this.closed;
    if (c !== undefined) for (let k = 0; k < c.length; k += 2) f(log, c[k]!, c[k + 1]!);
    f(log, this.runFirst, this.runLast);
  }
}

/**
 * The ITL sample of completed requests: their tracks (counted into the pass logs) and gaps given
 * one by one (between runs, or by a caller that has plain values).
 */
export class ItlSample {
  private sum = 0;
  private count = 0;
  private readonly single = new Sample();
  private readonly logs = new Set<PassLog>();

  /** Adds gaps given as values, in order. */
  addValues(values: Float64Array): void {
    for (const v of values) this.addOne(v);
  }

  /** Adds the gaps of a completed request's track, in token order. */
  addTrack(track: TokenTrack): void {
    let prevLast = -1;
    track.forEachRun((log, first, last) => {
      this.logs.add(log);
      if (prevLast >= 0) this.addOne(log.time(first) - log.time(prevLast));
      // The same additions, in the same order, as summing the gaps one token at a time.
      let sum = this.sum;
      for (let j = first + 1; j <= last; j++) sum += log.time(j) - log.time(j - 1);
      this.sum = sum;
      this.count += last - first;
      log.countRun(first, last);
      prevLast = last;
    });
  }

  private addOne(v: number): void {
    this.sum += v;
    this.count++;
    this.single.push(v);
  }

  get length(): number {
    return this.count;
  }

  /** Exact nearest-rank percentiles `ps` (each in [0, 100]); zeros when empty. */
  percentiles(ps: readonly number[]): number[] {
    const n = this.count;
    if (n === 0) return ps.map(() => 0);
    const [values, weights] = this.entries();
    return ps.map((p) => weightedSelect(values, weights, percentileRank(n, p)));
  }

  private entries(): [Float64Array, Float64Array] {
    let size = this.single.length;
    for (const log of this.logs) log.forEachCounted(() => size++);
    const values = new Float64Array(size);
    const weights = new Float64Array(size);
    let k = 0;
    for (const v of this.single.values()) {
      values[k] = v;
      weights[k++] = 1;
    }
    for (const log of this.logs) {
      log.forEachCounted((gap, c) => {
        values[k] = gap;
        weights[k++] = c;
      });
    }
    return [values, weights];
  }

  /** Mean, exact nearest-rank percentiles, min and max (std from the weighted values). */
  distribution(): Distribution {
    const n = this.count;
    if (n === 0) return EMPTY;
    let size = this.single.length;
    for (const log of this.logs) log.forEachCounted(() => size++);
    const values = new Float64Array(size);
    const weights = new Float64Array(size);
    let k = 0;
    for (const v of this.single.values()) {
      values[k] = v;
      weights[k++] = 1;
    }
    for (const log of this.logs) {
      log.forEachCounted((gap, c) => {
        values[k] = gap;
        weights[k++] = c;
      });
    }
    return weightedDistribution(values, weights, n, this.sum / n);
  }
}

/**
 * Summary of values with integer weights (total weight `n`), reordering both arrays: exact
 * nearest-rank percentiles by weighted selection, no full sort.
 */
export function weightedDistribution(values: Float64Array, weights: Float64Array, n: number, mean: number): Distribution {
  let min = Infinity;
  let max = -Infinity;
  let sq = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (v < min) min = v;
    if (v > max) max = v;
    sq += weights[i]! * (v - mean) * (v - mean);
  }
  const at = (p: number) => weightedSelect(values, weights, percentileRank(n, p));
  return { count: n, mean, min, max, p50: at(50), p90: at(90), p99: at(99), std: Math.sqrt(sq / n) };
}

/**
 * The value at 0-based rank `rank` of the multiset where values[i] occurs weights[i] times
 * (three-way partition around a median-of-three pivot; expected linear time).
 */
export function weightedSelect(values: Float64Array, weights: Float64Array, rank: number): number {
  let lo = 0;
  let hi = values.length - 1;
  let r = rank;
  for (;;) {
    if (lo === hi) return values[lo]!;
    const mid = (lo + hi) >>> 1;
    const a = values[lo]!;
    const b = values[mid]!;
    const c = values[hi]!;
    const pivot = a < b ? (b < c ? b : a < c ? c : a) : a < c ? a : b < c ? c : b;
    // Dutch flag: [lo, lt) < pivot, [lt, i) == pivot, (gt, hi] > pivot.
    let lt = lo;
    let i = lo;
    let gt = hi;
    let below = 0;
    let equal = 0;
    while (i <= gt) {
      const v = values[i]!;
      if (v < pivot) {
        below += weights[i]!;
        swap(values, weights, lt++, i++);
      } else if (v > pivot) {
        swap(values, weights, i, gt--);
      } else {
        equal += weights[i]!;
        i++;
      }
    }
    if (r < below) hi = lt - 1;
    else if (r < below + equal) return pivot;
    else {
      r -= below + equal;
      lo = gt + 1;
    }
  }
}

function swap(values: Float64Array, weights: Float64Array, i: number, j: number): void {
  const v = values[i]!;
  values[i] = values[j]!;
  values[j] = v;
  const w = weights[i]!;
  weights[i] = weights[j]!;
  weights[j] = w;
}
