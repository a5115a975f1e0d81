// The first histogram level of the ITL percentiles, built as requests complete (see itl.ts).

/** Buckets of a `GapHistogram`. */
export const HIST = 1 << 14;
/** The finest bucket width of a `GapHistogram` is 2^-MAX_SCALE_BITS (so 2^MAX_SCALE_BITS is finite). */
const MAX_SCALE_BITS = 1000;
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
