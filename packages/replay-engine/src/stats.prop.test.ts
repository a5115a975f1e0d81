import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { percentileRank, summarize } from "./stats.js";

describe("summarize by selection", () => {
  it("gives the nearest-rank values of a full sort: sorted[round((n - 1) x p / 100)]", () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }).map((x) => x + 0), { minLength: 1, maxLength: 300 }), (xs) => {
        const sorted = [...xs].sort((a, b) => a - b);
        const d = summarize(Float64Array.from(xs));
        expect(d.min).toBe(sorted[0]);
        expect(d.max).toBe(sorted[sorted.length - 1]);
        expect(d.p50).toBe(sorted[percentileRank(xs.length, 50)]);
        expect(d.p90).toBe(sorted[percentileRank(xs.length, 90)]);
        expect(d.p99).toBe(sorted[percentileRank(xs.length, 99)]);
        expect(d.count).toBe(xs.length);
      }),
    );
  });
});
