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
import type { PassLog } from "./pass-log.js";
import { GapHistogram } from "./gap-histogram.js";
import { type Part, type Visit, arrayEntries, weightedRanks } from "./weighted-ranks.js";

const EMPTY: Distribution = { count: 0, mean: 0, min: 0, max: 0, p50: 0, p90: 0, p99: 0, std: 0 };

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
