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
 * Summary of values with integer weights (total weight `n`): exact nearest-rank percentiles, min,
 * max and the weighted population std.
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
  const [p50, p90, p99] = weightedRanks(values, weights, [percentileRank(n, 50), percentileRank(n, 90), percentileRank(n, 99)]);
  return { count: n, mean, min, max, p50: p50!, p90: p90!, p99: p99!, std: Math.sqrt(sq / n) };
}

/** Below this many entries a part is sorted outright. */
const SMALL = 64;
/** Buckets per histogram pass. */
const BUCKETS = 4096;

/**
 * The values at the 0-based `ranks` of the multiset where values[i] occurs weights[i] times.
 * A histogram of the value range over the entries finds the bucket holding each rank (bucket
 * order is value order: floor((v - min) / width) never decreases as v grows); only that bucket's
 * entries go to the next pass. Two linear passes per level, no comparison sort of the whole.
 */
export function weightedRanks(values: Float64Array, weights: Float64Array, ranks: readonly number[]): number[] {
  const n = values.length;
  if (n <= SMALL) {
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => values[a]! - values[b]!);
    return ranks.map((r) => {
      let acc = 0;
      for (const i of order) {
        acc += weights[i]!;
        if (r < acc) return values[i]!;
      }
      throw new RangeError(`rank ${r} beyond the total weight ${acc}`);
    });
  }
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if (min === max) return ranks.map(() => min);
  const buckets = Math.min(BUCKETS, n);
  const width = (max - min) / buckets;
  const total = new Float64Array(buckets);
  const count = new Int32Array(buckets);
  const bucket = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const b = Math.min(buckets - 1, Math.floor((values[i]! - min) / width));
    bucket[i] = b;
    total[b] = total[b]! + weights[i]!;
    count[b]!++;
  }
  return ranks.map((r) => {
    let b = 0;
    let before = 0;
    while (b < buckets - 1 && r >= before + total[b]!) before += total[b++]!;
    const size = count[b]!;
    const v = new Float64Array(size);
    const w = new Float64Array(size);
    let k = 0;
    for (let i = 0; i < n; i++) {
      if (bucket[i] !== b) continue;
      v[k] = values[i]!;
      w[k++] = weights[i]!;
    }
    // The bucket holds fewer entries than the whole (min and max fall in different buckets).
    return weightedRanks(v, w, [r - before])[0]!;
  });
}
