/** The saturation check of a replay (ReplayReport.saturation). Rates in requests per second. */
export interface SaturationCheck {
  /** True when the served rate stays under the offered rate and TTFT keeps growing: the queue does not drain. */
  readonly saturated: boolean;
  /** (arrivals - 1) / (last arrival - first arrival); null when every request arrived at once. */
  readonly offered_rps: number | null;
  /**
   * Completion rate while requests were still arriving: (completions by the last arrival - 1) /
   * (last arrival - first completion) when at least 2 completed by then; with 0 or 1 completed,
   * that count over the arrival window (last arrival - first arrival), so a heavy overload where
   * nothing completes before the last arrival reads 0, not "unknown". Null only when the arrival
   * window is empty. Not the report's request_throughput_rps, which is completions over the whole
   * run (the drain after the last arrival included).
   */
  readonly served_rps: number | null;
  /** Mean TTFT of the completed requests that arrived in the first and in the last quarter of the arrival window. */
  readonly ttft_first_quarter_ms: number | null;
  readonly ttft_last_quarter_ms: number | null;
}

/** Served below this fraction of offered counts as falling behind. */
export const SATURATION_RATE_RATIO = 0.9;
/** Last-quarter mean TTFT above this multiple of the first quarter's counts as growing. */
export const SATURATION_TTFT_GROWTH = 2;
/** Fewer arrivals than this give no verdict (too little to tell a trend from noise). */
export const SATURATION_MIN_REQUESTS = 20;

const BUCKETS = 64;

/**
 * Watches a replay for saturation in O(1) memory: TTFT sums in 64 buckets over arrival time whose
 * width doubles (neighbours merged) whenever a later arrival needs room, so the quarters of the
 * arrival window are resolved to 1/32 of it or better. Fed by the metrics collector.
 */
export class SaturationMonitor {
  private firstArrival: number | undefined;
  private lastArrival = 0;
  private arrivals = 0;
  private completedByLastArrival = 0;
  private completed = 0;
  private firstCompletion: number | undefined;
  private width = 1;
  private readonly sum = new Float64Array(BUCKETS);
  private readonly count = new Float64Array(BUCKETS);

  onArrival(atMs: number): void {
    this.firstArrival ??= atMs;
    this.arrivals++;
    this.lastArrival = atMs;
    // Completions so far all happened at or before this instant (passes complete before arrivals).
    this.completedByLastArrival = this.completed;
    while (this.bucket(atMs) >= BUCKETS) this.widen();
  }

  /** A completed request: its arrival, its first token (if any) and when it completed. */
  onCompleted(arrivalMs: number, firstTokenMs: number | undefined, atMs: number): void {
    this.completed++;
    this.firstCompletion ??= atMs;
    if (firstTokenMs === undefined) return;
    const b = this.bucket(arrivalMs);
    this.sum[b] = this.sum[b]! + (firstTokenMs - arrivalMs);
    this.count[b] = this.count[b]! + 1;
  }

  check(): SaturationCheck {
    const first = this.firstArrival ?? 0;
    const span = this.lastArrival - first;
    const offered = this.arrivals >= 2 && span > 0 ? ((this.arrivals - 1) / span) * 1000 : null;
    const servedSpan = this.firstCompletion === undefined ? 0 : this.lastArrival - this.firstCompletion;
    const done = this.completedByLastArrival;
    // Fewer than 2 completions have no interval between them: count them over the arrival window.
    const served = done >= 2 && servedSpan > 0 ? ((done - 1) / servedSpan) * 1000 : span > 0 ? (done / span) * 1000 : null;
    const early = span > 0 ? this.meanTtft(first, first + span / 4) : null;
    const late = span > 0 ? this.meanTtft(this.lastArrival - span / 4, this.lastArrival) : null;
    const saturated =
      this.arrivals >= SATURATION_MIN_REQUESTS &&
      offered !== null &&
      served !== null &&
      early !== null &&
      late !== null &&
      served < SATURATION_RATE_RATIO * offered &&
      late > SATURATION_TTFT_GROWTH * early;
    return { saturated, offered_rps: offered, served_rps: served, ttft_first_quarter_ms: early, ttft_last_quarter_ms: late };
  }

  private bucket(atMs: number): number {
    return Math.floor(Math.max(0, atMs) / this.width);
  }

  private widen(): void {
    for (let i = 0; i < BUCKETS / 2; i++) {
      this.sum[i] = this.sum[2 * i]! + this.sum[2 * i + 1]!;
      this.count[i] = this.count[2 * i]! + this.count[2 * i + 1]!;
    }
    this.sum.fill(0, BUCKETS / 2);
    this.count.fill(0, BUCKETS / 2);
    this.width *= 2;
  }

  /** Mean TTFT over the buckets whose middle lies in [from, to]; null when they hold no request. */
  private meanTtft(from: number, to: number): number | null {
    let s = 0;
    let n = 0;
    for (let i = 0; i < BUCKETS; i++) {
      const mid = (i + 0.5) * this.width;
      if (mid < from || mid > to) continue;
      s += this.sum[i]!;
      n += this.count[i]!;
    }
    return n > 0 ? s / n : null;
  }
}
