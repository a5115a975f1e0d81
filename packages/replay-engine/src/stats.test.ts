import { describe, expect, it } from "vitest";
import { percentile, percentileRank, Sample, summarize } from "./stats.js";

describe("percentileRank: round((n - 1) x p / 100), half away from zero", () => {
  it("n = 10: p50 -> round(4.5) = 5, p90 -> round(8.1) = 8, p99 -> round(8.91) = 9", () => {
    expect(percentileRank(10, 50)).toBe(5);
    expect(percentileRank(10, 90)).toBe(8);
    expect(percentileRank(10, 99)).toBe(9);
  });
  it("n = 4: p50 -> round(1.5) = 2 (half goes up, away from zero)", () => {
    expect(percentileRank(4, 50)).toBe(2);
  });
  it("n = 1: every percentile is the only value", () => {
    expect(percentileRank(1, 0)).toBe(0);
    expect(percentileRank(1, 100)).toBe(0);
  });
  it("refuses an empty sample", () => {
    expect(() => percentileRank(0, 50)).toThrow(/empty/);
  });
});

describe("summarize", () => {
  it("values 1..10 (unsorted): mean 5.5, p50 = 6th smallest = 6, p90 = 9, p99 = 10, population std sqrt(8.25)", () => {
    // Population variance of 1..10: sum (k - 5.5)^2 / 10 = 82.5 / 10 = 8.25.
    const d = summarize(Float64Array.from([7, 3, 10, 1, 5, 9, 2, 8, 6, 4]));
    expect(d).toEqual({ count: 10, mean: 5.5, min: 1, max: 10, p50: 6, p90: 9, p99: 10, std: Math.sqrt(8.25) });
  });
  it("orders numerically, not as strings: [10, 9, 100] -> p50 = 2nd smallest (index round(1) = 1) = 10", () => {
    const v = Float64Array.from([10, 9, 100]);
    expect(summarize(v)).toMatchObject({ min: 9, p50: 10, p90: 100, max: 100 });
    expect(percentile(Float64Array.from([9, 10, 100]), 100)).toBe(100);
  });
  it("handles ties and many equal values: [5 x 7, 1, 9] -> p50 = 5th smallest of 9 = 5", () => {
    // Sorted: 1, 5, 5, 5, 5, 5, 5, 5, 9. p50 index round(8 x 0.5) = 4 -> 5; p99 index round(7.92) = 8 -> 9.
    const d = summarize(Float64Array.from([5, 5, 9, 5, 5, 1, 5, 5, 5]));
    expect([d.min, d.p50, d.p90, d.p99, d.max]).toEqual([1, 5, 5, 9, 9]);
  });
  it("an empty sample gives zeros", () => {
    expect(summarize(new Float64Array(0))).toEqual({ count: 0, mean: 0, min: 0, max: 0, p50: 0, p90: 0, p99: 0, std: 0 });
  });
});

describe("Sample", () => {
  it("grows past its first buffer and keeps order", () => {
    const s = new Sample();
    for (let i = 0; i < 200; i++) s.push(i * 0.5);
    expect(s.length).toBe(200);
    const v = s.values();
    expect(v.length).toBe(200);
    expect(v[0]).toBe(0);
    expect(v[199]).toBe(99.5);
  });
});
