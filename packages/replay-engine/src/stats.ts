/** Summary statistics of one metric (docs/rules/decisions.md §11: exact nearest-rank percentiles, population std). */
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
 * Moves the k-th smallest value of `a[lo..hi]` to index k, smaller ones before it and larger ones
 * after (Hoare's selection with a median-of-three pivot): expected O(n), no full sort.
 */
function select(a: Float64Array, k: number, lo: number, hi: number): void {
  while (hi > lo) {
    const mid = (lo + hi) >>> 1;
    // Median of three to a[mid], then use it as the pivot.
    if (a[mid]! < a[lo]!) swap(a, mid, lo);
    if (a[hi]! < a[lo]!) swap(a, hi, lo);
    if (a[hi]! < a[mid]!) swap(a, hi, mid);
    const pivot = a[mid]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) {
        swap(a, i, j);
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return;
  }
}

function swap(a: Float64Array, i: number, j: number): void {
  const t = a[i]!;
  a[i] = a[j]!;
  a[j] = t;
}

/**
 * Summarises a sample, reordering `values` in place: exact nearest-rank percentiles by selection
 * (no full sort; the ITL sample holds one value per output token). An empty sample gives zeros.
 */
export function summarize(values: Float64Array): Distribution {
  const n = values.length;
  if (n === 0) return EMPTY;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const mean = sum / n;
  let sq = 0;
  for (const v of values) sq += (v - mean) * (v - mean);
  // Select the ranks in increasing order, each within the part above the previous one.
  const ranks = [percentileRank(n, 50), percentileRank(n, 90), percentileRank(n, 99)] as const;
  let lo = 0;
  const at: number[] = [];
  for (const k of ranks) {
    select(values, k, lo, n - 1);
    at.push(values[k]!);
    lo = k;
  }
  return { count: n, mean, min, max, p50: at[0]!, p90: at[1]!, p99: at[2]!, std: Math.sqrt(sq / n) };
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

/**
 * Exact nearest-rank percentiles `ps` (each in [0, 100]) of `values`, reordering it in place (by
 * selection, as `summarize`; the array may already have been reordered by it). Empty: zeros.
 */
export function percentilesOf(values: Float64Array, ps: readonly number[]): number[] {
  const n = values.length;
  if (n === 0) return ps.map(() => 0);
  return ps.map((p) => {
    const k = percentileRank(n, p);
    select(values, k, 0, n - 1);
    return values[k]!;
  });
}
