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
 * The percentiles' first histogram level is built as requests complete (`GapHistogram`, in the
 * replay's hot code): the report then makes one pass over the logs, copying out the entries of the
 * buckets that hold the asked ranks, instead of three passes that run once, mostly before V8 has
 * compiled them.
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

/** Buckets of a `GapHistogram`. */
const HIST = 1 << 14;
/** The finest bucket width of a `GapHistogram` is 2^-MAX_SCALE_BITS (so 2^MAX_SCALE_BITS is finite). */
const MAX_SCALE_BITS = 1000;

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

/**
 * The weights of the ITL gaps by bucket, added as requests complete, so the report needs no pass
 * to find the value range or to histogram it. Bucket widths are powers of two, 2^shift: a gap's
 * bucket is floor(gap x 2^-shift) - base, exact (scaling by a power of two rounds nothing) and
 * never decreasing as the gap grows, so bucket order is value order. When a gap falls outside the
 * buckets, they are merged (shift grows: floor(floor(x / 2) / 2^k) = floor(x / 2^(k+1)), so each
 * old bucket falls whole into a new one) and re-centred so the occupied range spans under half of
 * them: a quarter is free on each side, and each width is left after a few moves. A negative, -0,
 * infinite or NaN gap (none in a replay: pass times never decrease) makes the histogram
 * `irregular` and unused, and the sample falls back to passes over its entries.
 */
export class GapHistogram {
  /** Weight per bucket (empty until the first gap). */
  total = new Float64Array(0);
  /** 2^-shift. */
  scale = 1;
  shift = 0;
  /** floor(gap x scale) of bucket 0 (none before the first gap). */
  base = Infinity;
  /** The least and greatest gap added (meaningful unless `irregular`). */
  min = Infinity;
  max = -Infinity;
  irregular = false;

  /** Adds one gap of weight one. */
  add(v: number): void {
    if (v < this.min) this.min = v;
    if (v > this.max) this.max = v;
    // -0 would share +0's bucket; it is the one value the check below lets through.
    if (v === 0 && 1 / v < 0) this.irregular = true;
    const b = this.bucketOf(v);
    if (b >= 0 && b < HIST) this.total[b]!++;
    else if (this.makeRoom(v)) this.total[this.bucketOf(v)]!++;
  }

  /** The bucket of gap `v` (outside 0 .. HIST - 1 or NaN: none yet). */
  bucketOf(v: number): number {
    return Math.floor(v * this.scale) - this.base;
  }

  /** Widens the buckets to take gap `v`; false if it is not finite and non-negative (irregular from then on). */
  makeRoom(v: number): boolean {
    if (this.irregular) return false;
    if (!(v >= 0 && v < Infinity)) {
      this.irregular = true;
      return false;
    }
    const old = this.total;
    let first = -1;
    let last = -1;
    for (let i = 0; i < old.length; i++) {
      if (old[i] === 0) continue;
      if (first < 0) first = i;
      last = i;
    }
    // The first gap sets a width of about 2^-20 of itself (2^-1000 for a zero), merged from there.
    let shift = first < 0 ? Math.max(-MAX_SCALE_BITS, Math.floor(Math.log2(v)) - 20) : this.shift;
    const range = (s: number): [number, number] => {
      const at = Math.floor(v * 2 ** -s);
      if (first < 0) return [at, at];
      const k = 2 ** (s - this.shift);
      return [Math.min(at, Math.floor((this.base + first) / k)), Math.max(at, Math.floor((this.base + last) / k))];
    };
    let [lo, hi] = range(shift);
    while (!(hi - lo < HIST / 2)) [lo, hi] = range(++shift);
    const base = Math.max(0, lo - Math.floor((HIST - (hi - lo + 1)) / 2));
    const total = new Float64Array(HIST);
    const k = 2 ** (shift - this.shift);
    for (let i = Math.max(first, 0); i <= last; i++) {
      if (old[i] !== 0) total[Math.floor((this.base + i) / k) - base]! += old[i]!;
    }
    this.total = total;
    this.shift = shift;
    this.scale = 2 ** -shift;
    this.base = base;
    return true;
  }

  /**
   * For each of `ranks` (0-based, below the total weight), the bucket holding it and its rank
   * inside the bucket: one sweep of the buckets in rank order.
   */
  targets(ranks: readonly number[]): { b: number; r: number }[] {
    const out = ranks.map((r) => ({ b: 0, r }));
    const order = Array.from(ranks.keys()).sort((x, y) => ranks[x]! - ranks[y]!);
    const total = this.total;
    let b = 0;
    let before = 0;
    for (const k of order) {
      const r = ranks[k]!;
      while (b < total.length - 1 && r >= before + total[b]!) before += total[b++]!;
      out[k] = { b, r: r - before };
    }
    return out;
  }
}

/** Where one request's tokens fell in its worker's pass log: runs of consecutive entries. */
export class TokenTrack {
  private log: PassLog | undefined;
  private runFirst = -1;
  private runLast = -1;
  /** Closed runs before the current one, as [first, last] pairs; usually none. */
  private closed: number[] | undefined;

  /**
   * Records the next token of the request, stamped with entry `index` of `log`. A token of the same
   * pass as the one before (speculative decoding emits several per step) adds no gap: a client
   * receives a step's tokens in one streamed chunk, and its ITL is the time between chunks (as
   * vLLM's benchmark measures it); TPOT still spreads the time over every token.
   */
  add(log: PassLog, index: number): void {
    if (index === this.runLast && log === this.log) return;
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
  /** Every gap's weight by bucket, added as it comes. */
  private readonly gaps = new GapHistogram();
  /** Buckets already copied out (see `ranks`), for the current runs; undefined: runs were added since. */
  private parts: Map<number, Part> | undefined;
  /** The entries' count and bounds when the histogram is irregular (see `irregularBounds`). */
  private bounds: { readonly size: number; readonly min: number; readonly max: number } | undefined;

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
      this.sum = log.addGaps(first, last, this.sum, this.gaps);
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
    this.gaps.add(v);
    this.record(-1, this.single.length, 0);
    this.single.push(v);
  }

  private record(a: number, b: number, c: number): void {
    this.counted = undefined;
    this.parts = undefined;
    this.bounds = undefined;
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
   * How many (gap, count) entries there are and their least and greatest gap, by a pass over them
   * in the order `weightedRanks` visits them (so a tie of -0 and 0 resolves as it always did):
   * needed only when the histogram is irregular.
   */
  private irregularBounds(): { readonly size: number; readonly min: number; readonly max: number } {
    if (this.bounds !== undefined) return this.bounds;
    let size = 0;
    let min = Infinity;
    let max = -Infinity;
    this.visitor()((v) => {
      size++;
      if (v < min) min = v;
      if (v > max) max = v;
    });
    this.bounds = { size, min, max };
    return this.bounds;
  }

  /**
   * The values at 0-based `ranks` of the (gap, count) multiset. The histogram gives each rank's
   * bucket; one pass over the logs copies out the entries of the buckets not copied out before
   * (asking p50, p90, p99 again costs no pass), and `weightedRanks` searches each bucket. When all
   * gaps are finite and non-negative, no two differ only in sign, so the values at the ranks are
   * the same whichever way they are found. Otherwise (irregular), `weightedRanks` runs over all
   * the entries.
   */
  private ranks(ranks: readonly number[]): number[] {
    const h = this.gaps;
    if (h.irregular) return weightedRanks(this.visitor(), this.irregularBounds().size, ranks);
    if (h.min === h.max) return ranks.map(() => h.min);
    const targets = h.targets(ranks);
    const parts = (this.parts ??= new Map<number, Part>());
    const missing = [...new Set(targets.map(({ b }) => b))].filter((b) => !parts.has(b));
    if (missing.length > 0) this.copyOut(missing, parts);
    return targets.map(({ b, r }) => {
      const { values, weights } = parts.get(b)!;
      return weightedRanks(arrayEntries(values, weights), values.length, [r])[0]!;
    });
  }

  /** Copies the entries of `buckets` into `parts`, in one pass over the logs. */
  private copyOut(buckets: readonly number[], parts: Map<number, Part>): void {
    const h = this.gaps;
    const partOf = new Int32Array(h.total.length).fill(-1);
    const values: Float64Array[] = [];
    const weights: Float64Array[] = [];
    // A bucket holds at most its weight in entries, and at most one entry per single value and
    // per log entry: a heavy bucket of gaps shared by many requests copies out its entries only.
    let entries = this.single.length;
    for (const log of this.logs) entries += log.length;
    for (const b of buckets) {
      const size = Math.min(h.total[b]!, entries);
      partOf[b] = values.length;
      values.push(new Float64Array(size));
      weights.push(new Float64Array(size));
    }
    const filled = new Int32Array(values.length);
    for (const v of this.single.values()) {
      const p = partOf[h.bucketOf(v)]!;
      if (p < 0) continue;
      const i = filled[p]!++;
      values[p]![i] = v;
      weights[p]![i] = 1;
    }
    const counted = this.countedRuns();
    for (const [li, log] of this.logs.entries()) log.copyCounted(counted[li]!.starts, counted[li]!.ends, h.scale, h.base, partOf, values, weights, filled);
    buckets.forEach((b, p) => parts.set(b, { values: values[p]!.subarray(0, filled[p]), weights: weights[p]!.subarray(0, filled[p]) }));
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
    const { min, max } = this.gaps.irregular ? this.irregularBounds() : this.gaps;
    const [p50, p90, p99] = this.ranks([percentileRank(n, 50), percentileRank(n, 90), percentileRank(n, 99)]);
    return { count: n, mean, min, max, p50: p50!, p90: p90!, p99: p99!, std: Math.sqrt(sq / n) };
  }
}

/** The entries of one histogram bucket, copied out: values and their counts. */
interface Part {
  readonly values: Float64Array;
  readonly weights: Float64Array;
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
