/** Summary statistics as vLLM's benchmark prints them (numpy's default, linear interpolation). */

export function mean(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  let s = 0;
  for (const v of values) s += v;
  return s / values.length;
}

/**
 * The p-th percentile (0..100) of `values` by linear interpolation between closest ranks:
 * position h = (n - 1) p / 100, value = x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h])
 * over the sorted values (numpy.percentile's default, which vllm bench serve uses).
 */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const x = [...values].sort((a, b) => a - b);
  const h = ((x.length - 1) * p) / 100;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, x.length - 1);
  return x[lo]! + (h - lo) * (x[hi]! - x[lo]!);
}

/** The largest of `values` (-Infinity for none), without spreading them into a call: a spread of 100,000+ values overflows the stack. */
export function maxOf(values: Iterable<number>): number {
  let m = Number.NEGATIVE_INFINITY;
  for (const v of values) if (v > m) m = v;
  return m;
}
