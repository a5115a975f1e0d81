// Exact nearest-rank values of a weighted multiset, by histogram levels instead of a sort.

/** The entries of one histogram bucket, copied out: values and their counts. */
export interface Part {
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
