/**
 * Keeps at most `maxPoints` of an x-sorted series: the points split into equal runs and each run
 * keeps its point of largest `key` (spikes survive). Returns the kept indices, in order.
 */
export function downsampleIndices(n: number, maxPoints: number, key: (i: number) => number): number[] {
  if (n <= maxPoints) return Array.from({ length: n }, (_, i) => i);
  const out: number[] = [];
  const per = n / maxPoints;
  for (let b = 0; b < maxPoints; b++) {
    const from = Math.floor(b * per);
    const to = Math.min(n, Math.floor((b + 1) * per));
    let best = from;
    for (let i = from + 1; i < to; i++) if (key(i) > key(best)) best = i;
    out.push(best);
  }
  return out;
}

/** Rounds to `digits` significant digits (smaller pages; charts need no more). */
export function round(v: number | null, digits = 5): number | null {
  if (v === null || !Number.isFinite(v) || v === 0) return v;
  return Number(v.toPrecision(digits));
}
