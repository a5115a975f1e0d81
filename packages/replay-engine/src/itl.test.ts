import { describe, expect, it } from "vitest";
import { GapHistogram } from "./gap-histogram.js";
import { ItlSample, TokenTrack } from "./itl.js";
import { PassLog } from "./pass-log.js";
import { arrayEntries, weightedRanks } from "./weighted-ranks.js";

describe("ItlSample: gaps from pass logs", () => {
  it("two requests on one worker, one skipped a pass: gaps {10, 2} and {2, 8}", () => {
    // Passes with tokens at 0, 10, 12, 15, 20 ms (entries 0..4).
    const log = new PassLog();
    for (const t of [0, 10, 12, 15, 20]) log.append(t);
    // A: tokens at entries 0, 1, 2 -> gaps 10 - 0 = 10, 12 - 10 = 2.
    const a = new TokenTrack();
    for (const e of [0, 1, 2]) a.add(log, e);
    // B: tokens at entries 1, 2, 4 (not in pass 3) -> gaps 12 - 10 = 2, 20 - 12 = 8.
    const b = new TokenTrack();
    for (const e of [1, 2, 4]) b.add(log, e);
    const s = new ItlSample();
    s.addTrack(a);
    s.addTrack(b);
    // Sorted 2, 2, 8, 10; mean 22 / 4 = 5.5; p50 index round(3 x 0.5) = 2 -> 8; p90 round(2.7) = 3
    // -> 10; p99 round(2.97) = 3 -> 10.
    expect(s.distribution()).toMatchObject({ count: 4, mean: 5.5, min: 2, max: 10, p50: 8, p90: 10, p99: 10 });
  });

  it("a request with one token has no gap; plain values mix with tracks", () => {
    const log = new PassLog();
    log.append(3);
    const t = new TokenTrack();
    t.add(log, 0);
    const s = new ItlSample();
    s.addTrack(t);
    expect(s.length).toBe(0);
    expect(s.distribution()).toMatchObject({ count: 0, mean: 0, p50: 0 });
    s.addValues(Float64Array.from([4, 1]));
    // Values 1, 4: mean 2.5, p50 index round(0.5) = 1 -> 4.
    expect(s.distribution()).toMatchObject({ count: 2, mean: 2.5, p50: 4, min: 1, max: 4 });
  });

  it("tokens of one request from two workers are a broken invariant", () => {
    const [x, y] = [new PassLog(), new PassLog()];
    x.append(1);
    y.append(2);
    const t = new TokenTrack();
    t.add(x, 0);
    expect(() => {
      t.add(y, 0);
    }).toThrow(/one worker/);
  });

  it("the log grows past its first buffer and keeps counting", () => {
    const log = new PassLog();
    const t = new TokenTrack();
    // 200 passes 1 ms apart, then one 5 ms later: 199 gaps of 1 and one of 5.
    for (let i = 0; i < 200; i++) t.add(log, log.append(i));
    t.add(log, log.append(204));
    const s = new ItlSample();
    s.addTrack(t);
    // Mean (199 x 1 + 5) / 200 = 1.02; p99 index round(199 x 0.99) = 197 -> 1 (only index 199 is 5).
    expect(s.distribution()).toMatchObject({ count: 200, mean: 1.02, p50: 1, p99: 1, max: 5 });
  });

  it("runs across storage chunks (8,192 entries each) count every gap once", () => {
    const log = new PassLog();
    const t = new TokenTrack();
    // 16,484 passes 1 ms apart, then one 5 ms later: 16,484 gaps, all 1 but the last.
    for (let i = 0; i < 16_484; i++) t.add(log, log.append(i));
    t.add(log, log.append(16_483 + 5));
    const s = new ItlSample();
    s.addTrack(t);
    // Mean (16,483 + 5) / 16,484; p99 index round(16,483 x 0.99) = 16,318 -> 1.
    expect(s.distribution()).toMatchObject({ count: 16_484, mean: 16_488 / 16_484, p50: 1, p99: 1, max: 5 });
  });
});

describe("ItlSample: counts swept from the runs", () => {
  it("a report, then more runs, then a report again: the counts follow the runs added", () => {
    // Passes at 0, 4, 5, 11 ms: entry gaps 4, 1, 6.
    const log = new PassLog();
    for (const t of [0, 4, 5, 11]) log.append(t);
    const a = new TokenTrack();
    for (const e of [0, 1, 2, 3]) a.add(log, e);
    const s = new ItlSample();
    s.addTrack(a);
    // A alone: gaps 4, 1, 6 -> sorted 1, 4, 6; p50 index round(2 x 0.5) = 1 -> 4.
    expect(s.distribution()).toMatchObject({ count: 3, min: 1, max: 6, p50: 4 });
    // B on entries 1, 2 (gap 1) and C on entries 2, 3 (gap 6), after the first report.
    const b = new TokenTrack();
    for (const e of [1, 2]) b.add(log, e);
    const c = new TokenTrack();
    for (const e of [2, 3]) c.add(log, e);
    s.addTrack(b);
    s.addTrack(c);
    // Gaps 4, 1, 6, 1, 6 -> sorted 1, 1, 4, 6, 6: p50 index 2 -> 4; p90 round(3.6) = 4 -> 6;
    // percentile 25: round(1) = 1 -> 1; mean 18 / 5 = 3.6.
    expect(s.distribution()).toMatchObject({ count: 5, mean: 18 / 5, min: 1, max: 6, p50: 4, p90: 6 });
    expect(s.percentiles([0, 25, 100])).toEqual([1, 1, 6]);
  });

  it("runs that start and end on the same entries and a run split by a skipped pass", () => {
    // Passes at 0, 2, 3, 7, 8 ms: entry gaps 2, 1, 4, 1.
    const log = new PassLog();
    for (const t of [0, 2, 3, 7, 8]) log.append(t);
    // D: entries 0, 1, 3, 4 (skipped pass 2): runs 0..1 (gap 2) and 3..4 (gap 1), and the jump
    // between them, 7 - 2 = 5. E: entries 0, 1 (gap 2).
    const d = new TokenTrack();
    for (const e of [0, 1, 3, 4]) d.add(log, e);
    const e = new TokenTrack();
    for (const k of [0, 1]) e.add(log, k);
    const s = new ItlSample();
    s.addTrack(d);
    s.addTrack(e);
    // Gaps 2, 5, 1, 2 -> sorted 1, 2, 2, 5: mean 10 / 4 = 2.5; p50 round(1.5) = 2 -> 2; p99 round(2.97) = 3 -> 5.
    expect(s.distribution()).toMatchObject({ count: 4, mean: 2.5, min: 1, max: 5, p50: 2, p99: 5 });
  });
});

describe("weightedRanks", () => {
  it("[3 x 2, 1 x 1, 7 x 3] is 1, 3, 3, 7, 7, 7: rank 0 -> 1, ranks 1-2 -> 3, ranks 3-5 -> 7", () => {
    expect(weightedRanks(arrayEntries(Float64Array.from([3, 1, 7]), Float64Array.from([2, 1, 3])), 3, [0, 1, 2, 3, 4, 5])).toEqual([1, 3, 3, 7, 7, 7]);
  });

  it("past the sort threshold: values 0..999 each of weight 2 (and one 10^9 outlier of weight 1)", () => {
    // Sorted: 0, 0, 1, 1, ..., 999, 999, 1e9: rank 2k and 2k + 1 are k; rank 2,000 is the outlier.
    const v = Float64Array.from([...Array.from({ length: 1000 }, (_, i) => 999 - i), 1e9]);
    const w = Float64Array.from([...Array.from({ length: 1000 }, () => 2), 1]);
    expect(weightedRanks(arrayEntries(v, w), v.length, [0, 1, 2, 1001, 1998, 1999, 2000])).toEqual([0, 0, 1, 500, 999, 999, 1e9]);
  });
});

describe("GapHistogram: power-of-two buckets built as gaps come", () => {
  it("the first gap sets a width of 2^-20 of it; a gap twice as large merges to 2^-12", () => {
    const h = new GapHistogram();
    h.add(1);
    // floor(log2 1) - 20 = -20: gap 1 is index 2^20, centred: base 2^20 - floor((16,384 - 1) / 2).
    expect([h.shift, h.base, h.bucketOf(1)]).toEqual([-20, 2 ** 20 - 8191, 8191]);
    h.add(2);
    // Indices 2^-s and 2^(1-s) are 2^-s apart, under 8,192 from s = -12: 4,096 and 8,192, spread
    // (16,384 - 4,097) / 2 = 6,143 below, clamped at 0.
    expect([h.shift, h.base, h.bucketOf(1), h.bucketOf(2)]).toEqual([-12, 0, 4096, 8192]);
    h.add(1.5);
    expect([h.total[4096], h.total[6144], h.total[8192], h.min, h.max]).toEqual([1, 1, 1, 1, 2]);
    // Ranks 0, 1, 2 are the first of each bucket.
    expect(h.targets([2, 0, 1])).toEqual([
      { b: 8192, r: 0 },
      { b: 4096, r: 0 },
      { b: 6144, r: 0 },
    ]);
    expect(h.irregular).toBe(false);
  });

  it("zero is a regular gap; -0, negatives, infinities and NaN make it irregular", () => {
    const zero = new GapHistogram();
    zero.add(0);
    // log2(0) is -Infinity: the finest width, 2^-1000; 0 is index 0, bucket 0.
    expect([zero.shift, zero.bucketOf(0), zero.total[0], zero.irregular]).toEqual([-1000, 0, 1, false]);
    for (const v of [-0, -1, Infinity, NaN]) {
      const h = new GapHistogram();
      h.add(3);
      h.add(v);
      expect(h.irregular).toBe(true);
    }
  });
});

describe("ItlSample: the histogram's fallbacks give the same figures", () => {
  it("gaps from 0 to 1e300 (one bucket holds all but the largest)", () => {
    const s = new ItlSample();
    s.addValues(Float64Array.from([1e-300, 5, 1e300, 0, 5]));
    // Sorted 0, 1e-300, 5, 5, 1e300: p50 index 2 -> 5; p90 round(3.6) = 4 -> 1e300; p25 index 1 -> 1e-300.
    expect(s.distribution()).toMatchObject({ count: 5, min: 0, max: 1e300, p50: 5, p90: 1e300, p99: 1e300 });
    expect(s.percentiles([0, 25, 75])).toEqual([0, 1e-300, 5]);
  });

  it("a pass log whose times go back: a negative gap, found by passes over the entries", () => {
    // Times 0, 10, 4, 6: gaps 10, -6, 2 -> sorted -6, 2, 10; mean 6 / 3 = 2; p50 index 1 -> 2.
    const log = new PassLog();
    const t = new TokenTrack();
    for (const time of [0, 10, 4, 6]) t.add(log, log.append(time));
    const s = new ItlSample();
    s.addTrack(t);
    expect(s.distribution()).toMatchObject({ count: 3, mean: 2, min: -6, max: 10, p50: 2, p90: 10 });
  });

  it("a bucket heavy with gaps many requests share copies out its few entries", () => {
    // 1,000 requests on the same 101 passes, one each 1 ms: 100,000 gaps of 1 in 100 log entries,
    // then one gap of 5 given as a value. p50, p90 and p99 fall among the gaps of 1; the largest is 5.
    const log = new PassLog();
    for (let j = 0; j <= 100; j++) log.append(j);
    const s = new ItlSample();
    for (let k = 0; k < 1000; k++) {
      const t = new TokenTrack();
      for (let j = 0; j <= 100; j++) t.add(log, j);
      s.addTrack(t);
    }
    s.addValues(Float64Array.of(5));
    expect(s.distribution()).toMatchObject({ count: 100_001, min: 1, max: 5, p50: 1, p90: 1, p99: 1 });
    expect(s.percentiles([0, 99.999, 100])).toEqual([1, 1, 5]);
  });

  it("a heavy bucket is copied out whole: 35,000 gaps of 1 and 35,000 of 1 + 2^-52 share one", () => {
    const eps = 2 ** -52;
    const s = new ItlSample();
    s.addValues(Float64Array.from({ length: 70_000 }, (_, i) => (i < 35_000 ? 1 : 1 + eps)));
    s.addValues(Float64Array.of(2));
    // 70,001 gaps: indices 0..34,999 are 1, 35,000..69,999 are 1 + 2^-52, 70,000 is 2. p50 index
    // round(35,000) = 35,000; p90 round(63,000); p99 round(69,300): all 1 + 2^-52.
    expect(s.distribution()).toMatchObject({ count: 70_001, min: 1, max: 2, p50: 1 + eps, p90: 1 + eps, p99: 1 + eps });
    // Percentile 49.99: index round(70,000 x 0.4999) = 34,993 -> 1.
    expect(s.percentiles([0, 49.99, 100])).toEqual([1, 1, 2]);
  });
});
