import { describe, expect, it } from "vitest";
import { arrayEntries, ItlSample, PassLog, TokenTrack, weightedRanks } from "./itl.js";

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
