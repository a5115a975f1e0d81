/**
 * Exact inter-token latencies without one double per token.
 *
 * Every token a worker emits in one pass carries the pass's end time, so the gaps of all requests
 * that got a token in two consecutive passes of a worker are one value: the difference of the two
 * pass times. A worker keeps a `PassLog` of the times of its passes that emitted tokens; a request
 * keeps a `TokenTrack`, the runs of consecutive log entries its tokens fell on (one run, unless a
 * pass skipped it or it was preempted). A completed request's runs are kept (three ints each);
 * when the report is made, each log entry's count (how many completed requests have its gap) is
 * swept from the runs' sorted starts and ends, so the ITL sample is the compact (gap, count) data
 * of the log entries plus the few gaps that jump between runs. Memory is one double per pass and
 * three ints per completed run, not one double per token; nothing is allocated per token.
 *
 * Exactness: a gap is `time[j] - time[j - 1]` on the very doubles the tokens were stamped with, so
 * it is the value the token-by-token computation gives; the mean is summed in the same order
 * (requests in completion order, gaps in token order); percentiles are exact nearest rank over the
 * weighted values.
 */
import { percentileRank, Sample, type Distribution } from "./stats.js";

const EMPTY: Distribution = { count: 0, mean: 0, min: 0, max: 0, p50: 0, p90: 0, p99: 0, std: 0 };

/** Entries per storage chunk of a pass log (fixed chunks: growth copies nothing and leaves no slack). */
const CHUNK_BITS = 13;
const CHUNK = 1 << CHUNK_BITS;
const MASK = CHUNK - 1;
/** The running sum of gaps, for `foldGaps`. */
const addGap = (sum: number, gap: number): number => sum + gap;

/** The times of one worker's passes that emitted tokens. */
export class PassLog {
  private readonly times: Float64Array[] = [];
  private n = 0;

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
   * `forEachCounted`'s entries summarised in one pass, no call per entry: adds to `acc` (size,
   * min, max) how many there are and their least and greatest gap.
   */
  scanCounted(starts: Int32Array, ends: Int32Array, acc: Float64Array): void {
    const n = this.n;
    if (n === 0) return;
    let size = acc[0]!;
    let min = acc[1]!;
    let max = acc[2]!;
    let count = 0;
    let si = 0;
    let ei = 0;
    const chunks = this.times;
    let prev = chunks[0]![0]!;
    // One flat loop (not one per chunk): V8 compiles this pass while it runs (on-stack
    // replacement), and an outer loop it had not run yet sent that code back to the interpreter.
    for (let j = 1; j < n; j++) {
      while (si < starts.length && starts[si]! <= j) {
        count++;
        si++;
      }
      while (ei < ends.length && ends[ei]! <= j) {
        count--;
        ei++;
      }
      const t = chunks[j >>> CHUNK_BITS]![j & MASK]!;
      if (count > 0) {
        const v = t - prev;
        // Written as they change, not after the loop: code after the loop has not run when V8
        // compiles the loop, and reaching it would send the pass back to the interpreter.
        acc[0] = ++size;
        if (v < min) acc[1] = min = v;
        if (v > max) acc[2] = max = v;
      }
      prev = t;
    }
  }

  /**
   * Adds `forEachCounted`'s entries to a histogram of `buckets` buckets of `width` from `min`:
   * their weight to `total`, one to `count` (bucket floor((v - min) / width), the last one also
   * taking v = max), in one pass.
   */
  histogramCounted(starts: Int32Array, ends: Int32Array, min: number, width: number, buckets: number, total: Float64Array, count: Int32Array): void {
    const n = this.n;
    if (n === 0) return;
    let live = 0;
    let si = 0;
    let ei = 0;
    const chunks = this.times;
    let prev = chunks[0]![0]!;
    // One flat loop, as in scanCounted.
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
        const b = Math.min(buckets - 1, Math.floor((v - min) / width));
        total[b] = total[b]! + live;
        count[b]!++;
      }
      prev = t;
    }
  }

  /**
   * Copies `forEachCounted`'s entries whose bucket (as `histogramCounted`) has a part, in order:
   * part `p = partOf[b]` (-1: none) gets the value at `values[p][filled[p]]`, its weight at the
   * same index of `weights[p]`.
   */
  copyCounted(
    starts: Int32Array,
    ends: Int32Array,
    min: number,
    width: number,
    buckets: number,
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
    // One flat loop, as in scanCounted.
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
        const p = partOf[Math.min(buckets - 1, Math.floor((v - min) / width))]!;
        if (p >= 0) {
          const i = filled[p]!++;
          values[p]![i] = v;
          weights[p]![i] = live;
        }
      }
      prev = t;
    }
  }

  /** Σ (gap - mean)^2 over the gaps of entries first + 1 .. last, added in order to `acc` (`foldGaps` without a call per gap). */
  squaredDeviations(first: number, last: number, acc: number, mean: number): number {
    if (last <= first) return acc;
    let prev = this.time(first);
    for (let j = first + 1; j <= last; ) {
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
   * Folds `f` over the gaps of entries first + 1 .. last in order, from `acc`: the gaps' sum
   * (`(s, g) => s + g`) or squared deviations, added one gap at a time as a per-token loop would.
   */
  foldGaps(first: number, last: number, acc: number, f: (acc: number, gap: number) => number): number {
    if (last <= first) return acc;
    let prev = this.time(first);
    for (let j = first + 1; j <= last; ) {
      const times = this.times[j >>> CHUNK_BITS]!;
      const stop = Math.min(last, j | MASK);
      for (let k = j & MASK, kEnd = stop & MASK; k <= kEnd; k++) {
        const t = times[k]!;
        acc = f(acc, t - prev);
        prev = t;
      }
      j = stop + 1;
    }
    return acc;
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
 * one by one (between runs, or by a caller that has plain values). It also keeps, in completion
 * order, which runs and values each completed request added (three ints each), so the standard
 * deviation is summed in the very order the one-double-per-gap sample summed it.
 */
export class ItlSample {
  private sum = 0;
  private count = 0;
  private readonly single = new Sample();
  private readonly logs: PassLog[] = [];
  private readonly logIndex = new Map<PassLog, number>();
  /** Completion order: [log index, first, last] for a run, [-1, index in `single`, 0] for a value. */
  private order = new Int32Array(96);
  private orderLength = 0;
  /** Per log, its runs' sorted starts and ends (see PassLog.forEachCounted); undefined: runs were added since. */
  private counted: { readonly starts: Int32Array; readonly ends: Int32Array }[] | undefined;
  /** The entries' summary for the current `counted` (see `summary`). */
  private summarised: EntrySummary | undefined;

  /** Adds gaps given as values, in order. */
  addValues(values: Float64Array): void {
    for (const v of values) this.addOne(v);
  }

  /** Adds the gaps of a completed request's track, in token order. */
  addTrack(track: TokenTrack): void {
    let prevLast = -1;
    track.forEachRun((log, first, last) => {
      if (prevLast >= 0) this.addOne(log.time(first) - log.time(prevLast));
      prevLast = last;
      if (last <= first) return;
      // The same additions, in the same order, as summing the gaps one token at a time.
      this.sum = log.foldGaps(first, last, this.sum, addGap);
      this.count += last - first;
      let li = this.logIndex.get(log);
      if (li === undefined) {
        li = this.logs.length;
        this.logs.push(log);
        this.logIndex.set(log, li);
      }
      this.record(li, first, last);
    });
  }

  private addOne(v: number): void {
    this.sum += v;
    this.count++;
    this.record(-1, this.single.length, 0);
    this.single.push(v);
  }

  private record(a: number, b: number, c: number): void {
    this.counted = undefined;
    this.summarised = undefined;
    if (this.orderLength + 3 > this.order.length) {
      const grown = new Int32Array(this.order.length * 2);
      grown.set(this.order);
      this.order = grown;
    }
    this.order[this.orderLength++] = a;
    this.order[this.orderLength++] = b;
    this.order[this.orderLength++] = c;
  }

  get length(): number {
    return this.count;
  }

  /** Exact nearest-rank percentiles `ps` (each in [0, 100]); zeros when empty. */
  percentiles(ps: readonly number[]): number[] {
    const n = this.count;
    if (n === 0) return ps.map(() => 0);
    return this.ranks(ps.map((p) => percentileRank(n, p)));
  }

  /** The (gap, count) entries, visited where they are (nothing the size of the sample is built). */
  private visitor(): Visit {
    const single = this.single.values();
    const logs = this.logs;
    const counted = this.countedRuns();
    return (f) => {
      for (const v of single) f(v, 1);
      logs.forEach((log, li) => {
        log.forEachCounted(counted[li]!.starts, counted[li]!.ends, f);
      });
    };
  }

  /**
   * How many (gap, count) entries there are, their least and greatest gap and, when `weightedRanks`
   * would make one (more than SMALL entries, not all equal), its first histogram: made once per
   * set of runs by passes over the logs that call nothing per entry.
   */
  private summary(): EntrySummary {
    if (this.summarised !== undefined) return this.summarised;
    const counted = this.countedRuns();
    const single = this.single.values();
    const acc = Float64Array.of(0, Infinity, -Infinity);
    for (const v of single) {
      acc[0]!++;
      if (v < acc[1]!) acc[1] = v;
      if (v > acc[2]!) acc[2] = v;
    }
    for (const [li, log] of this.logs.entries()) log.scanCounted(counted[li]!.starts, counted[li]!.ends, acc);
    const [size, min, max] = acc as unknown as [number, number, number];
    let histogram: EntrySummary["histogram"];
    if (size > SMALL && min !== max) {
      // As weightedRanks buckets them.
      const buckets = Math.min(BUCKETS, size);
      const width = (max - min) / buckets;
      const total = new Float64Array(buckets);
      const count = new Int32Array(buckets);
      for (const v of single) {
        const b = Math.min(buckets - 1, Math.floor((v - min) / width));
        total[b] = total[b]! + 1;
        count[b]!++;
      }
      for (const [li, log] of this.logs.entries()) log.histogramCounted(counted[li]!.starts, counted[li]!.ends, min, width, buckets, total, count);
      histogram = { buckets, width, total, count };
    }
    this.summarised = { size, min, max, histogram };
    return this.summarised;
  }

  /**
   * The values at 0-based `ranks` of the (gap, count) multiset: `weightedRanks` over its entries,
   * its first level (bounds, histogram, copying out the target buckets) done by the logs' own
   * passes, the buckets copied out then searched by `weightedRanks` itself.
   */
  private ranks(ranks: readonly number[]): number[] {
    const { size, min, histogram } = this.summary();
    if (histogram === undefined) return size <= SMALL ? weightedRanks(this.visitor(), size, ranks) : ranks.map(() => min);
    const { buckets, width, total, count } = histogram;
    // The bucket of each rank and the rank inside it (as weightedRanks finds them).
    const targets = ranks.map((r) => {
      let b = 0;
      let before = 0;
      while (b < buckets - 1 && r >= before + total[b]!) before += total[b++]!;
      return { b, r: r - before };
    });
    const partOf = new Int32Array(buckets).fill(-1);
    const values: Float64Array[] = [];
    const weights: Float64Array[] = [];
    for (const { b } of targets) {
      if (partOf[b]! >= 0) continue;
      partOf[b] = values.length;
      values.push(new Float64Array(count[b]!));
      weights.push(new Float64Array(count[b]!));
    }
    const filled = new Int32Array(values.length);
    for (const v of this.single.values()) {
      const p = partOf[Math.min(buckets - 1, Math.floor((v - min) / width))]!;
      if (p < 0) continue;
      const i = filled[p]!++;
      values[p]![i] = v;
      weights[p]![i] = 1;
    }
    const counted = this.countedRuns();
    for (const [li, log] of this.logs.entries()) log.copyCounted(counted[li]!.starts, counted[li]!.ends, min, width, buckets, partOf, values, weights, filled);
    // Each bucket holds fewer entries than the whole (min and max fall in different buckets).
    return targets.map(({ b, r }) => {
      const p = partOf[b]!;
      return weightedRanks(arrayEntries(values[p]!, weights[p]!), values[p]!.length, [r])[0]!;
    });
  }

  /** Each log's runs as sorted starts (first + 1) and ends (last + 1), made once per set of runs. */
  private countedRuns(): { readonly starts: Int32Array; readonly ends: Int32Array }[] {
    if (this.counted !== undefined) return this.counted;
    const o = this.order;
    const sizes = new Array<number>(this.logs.length).fill(0);
    for (let k = 0; k < this.orderLength; k += 3) if (o[k]! >= 0) sizes[o[k]!]!++;
    const out = sizes.map((n) => ({ starts: new Int32Array(n), ends: new Int32Array(n) }));
    const filled = new Array<number>(this.logs.length).fill(0);
    for (let k = 0; k < this.orderLength; k += 3) {
      const li = o[k]!;
      if (li < 0) continue;
      const i = filled[li]!++;
      out[li]!.starts[i] = o[k + 1]! + 1;
      out[li]!.ends[i] = o[k + 2]! + 1;
    }
    for (const r of out) {
      r.starts.sort();
      r.ends.sort();
    }
    this.counted = out;
    return out;
  }

  /** Mean and std exactly as a one-double-per-gap sample gives them, exact nearest-rank percentiles, min and max. */
  distribution(): Distribution {
    const n = this.count;
    if (n === 0) return EMPTY;
    const mean = this.sum / n;
    // Σ (v - mean)^2 in completion order, gaps in token order.
    let sq = 0;
    const single = this.single.values();
    const o = this.order;
    for (let k = 0; k < this.orderLength; k += 3) {
      if (o[k]! < 0) {
        const v = single[o[k + 1]!]!;
        sq += (v - mean) * (v - mean);
        continue;
      }
      sq = this.logs[o[k]!]!.squaredDeviations(o[k + 1]!, o[k + 2]!, sq, mean);
    }
    const { min, max } = this.summary();
    const [p50, p90, p99] = this.ranks([percentileRank(n, 50), percentileRank(n, 90), percentileRank(n, 99)]);
    return { count: n, mean, min, max, p50: p50!, p90: p90!, p99: p99!, std: Math.sqrt(sq / n) };
  }
}

/** What `ItlSample.summary` keeps: the entries' count and bounds, and the first histogram level. */
interface EntrySummary {
  readonly size: number;
  readonly min: number;
  readonly max: number;
  readonly histogram: { readonly buckets: number; readonly width: number; readonly total: Float64Array; readonly count: Int32Array } | undefined;
}

/** Calls `f(value, weight)` for every entry of a weighted multiset. */
export type Visit = (f: (value: number, weight: number) => void) => void;

/** The entries of two parallel arrays. */
export function arrayEntries(values: Float64Array, weights: Float64Array): Visit {
  return (f) => {
    for (let i = 0; i < values.length; i++) f(values[i]!, weights[i]!);
  };
}

/** Below this many entries a part is sorted outright. */
const SMALL = 64;
/** Buckets per histogram pass. */
const BUCKETS = 4096;

/**
 * The values at the 0-based `ranks` of a multiset of `size` entries (value, weight). A histogram of
 * the value range finds the bucket holding each rank (bucket order is value order: floor((v - min)
 * / width) never decreases as v grows); only the entries of those buckets are copied out and
 * searched further. A few linear passes per level, no comparison sort of the whole, and no copy
 * of the whole.
 */
export function weightedRanks(visit: Visit, size: number, ranks: readonly number[]): number[] {
  if (size <= SMALL) {
    const values: number[] = [];
    const weights: number[] = [];
    visit((v, w) => {
      values.push(v);
      weights.push(w);
    });
    const order = Array.from({ length: values.length }, (_, i) => i).sort((a, b) => values[a]! - values[b]!);
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
  visit((v) => {
    if (v < min) min = v;
    if (v > max) max = v;
  });
  if (min === max) return ranks.map(() => min);
  const buckets = Math.min(BUCKETS, size);
  const width = (max - min) / buckets;
  const bucketOf = (v: number): number => Math.min(buckets - 1, Math.floor((v - min) / width));
  const total = new Float64Array(buckets);
  const count = new Int32Array(buckets);
  visit((v, w) => {
    const b = bucketOf(v);
    total[b] = total[b]! + w;
    count[b]!++;
  });
  // The bucket of each rank and the rank inside it.
  const targets = ranks.map((r) => {
    let b = 0;
    let before = 0;
    while (b < buckets - 1 && r >= before + total[b]!) before += total[b++]!;
    return { b, r: r - before };
  });
  // Copy out the entries of the target buckets, in one pass.
  const parts = new Map<number, { values: Float64Array; weights: Float64Array; k: number }>();
  for (const { b } of targets) if (!parts.has(b)) parts.set(b, { values: new Float64Array(count[b]!), weights: new Float64Array(count[b]!), k: 0 });
  visit((v, w) => {
    const p = parts.get(bucketOf(v));
    if (p === undefined) return;
    p.values[p.k] = v;
    p.weights[p.k++] = w;
  });
  // Each bucket holds fewer entries than the whole (min and max fall in different buckets).
  return targets.map(({ b, r }) => {
    const p = parts.get(b)!;
    return weightedRanks(arrayEntries(p.values, p.weights), p.values.length, [r])[0]!;
  });
}
