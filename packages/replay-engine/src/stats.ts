/** Summary statistics of one metric (decisions.md: exact nearest-rank percentiles, population std). */
export interface Distribution {
  readonly count: number;
  readonly mean: number;
  readonly min: number;
  readonly max: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly std: number;
}

const EMPTY: Distribution = { count: 0, mean: 0, min: 0, max: 0, p50: 0, p90: 0, p99: 0, std: 0 };

/**
 * The nearest-rank index of percentile `p` in `n` sorted values: round((n - 1) x p / 100), half
 * away from zero (the product is never negative, so Math.round's half-up is the same), clamped.
 */
export function percentileRank(n: number, p: number): number {
  if (n <= 0) throw new Error("percentile of an empty sample");
  return Math.min(n - 1, Math.max(0, Math.round(((n - 1) * p) / 100)));
}

/** Exact percentile `p` (0..100) of `sorted` (ascending). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  return sorted[percentileRank(sorted.length, p)]!;
}

/**
 * Summarises a sample; sorts `values` in place (a typed array sorts numerically). An empty sample
 * gives zeros.
 */
export function summarize(values: Float64Array): Distribution {
  const n = values.length;
  if (n === 0) return EMPTY;
  values.sort();
  let sum = 0;
  for (const v of values) sum += v;
  const mean = sum / n;
  let sq = 0;
  for (const v of values) sq += (v - mean) * (v - mean);
  return {
    count: n,
    mean,
    min: values[0]!,
    max: values[n - 1]!,
    p50: percentile(values, 50),
    p90: percentile(values, 90),
    p99: percentile(values, 99),
    std: Math.sqrt(sq / n),
  };
}

/** An append-only sample of doubles that grows without boxing numbers. */
export class Sample {
  private data = new Float64Array(64);
  private n = 0;

  push(v: number): void {
    if (this.n === this.data.length) {
      const next = new Float64Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.n++] = v;
  }

  get length(): number {
    return this.n;
  }

  /** A copy of the values, trimmed to length. */
  values(): Float64Array {
    return this.data.slice(0, this.n);
  }
}
