import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { percentileRank, summarize } from "./stats.js";

/**
 * docs/rules/decisions.md §11: the nearest-rank index round((n - 1) x p / 100), half away from
 * zero. For whole p and a product that is never negative, that is floor(((n - 1) x p + 50) / 100)
 * in integer arithmetic.
 */
const documentedRank = (n: number, p: number) => Math.floor(((n - 1) * p + 50) / 100);

describe("percentileRank", () => {
  it("is the documented nearest rank for every whole percentile", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 0, max: 100 }), (n, p) => {
        expect(percentileRank(n, p)).toBe(documentedRank(n, p));
      }),
    );
  });
});

describe("summarize by selection", () => {
  it("gives the nearest-rank values: the (k + 1)-th smallest value for k = round((n - 1) x p / 100)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.double({ min: -1e6, max: 1e6, noNaN: true }).map((x) => x + 0),
          { minLength: 1, maxLength: 300 },
        ),
        (xs) => {
          const sorted = [...xs].sort((a, b) => a - b);
          const d = summarize(Float64Array.from(xs));
          expect(d.min).toBe(sorted[0]);
          expect(d.max).toBe(sorted[sorted.length - 1]);
          for (const [p, value] of [
            [50, d.p50],
            [90, d.p90],
            [99, d.p99],
          ] as const) {
            const k = documentedRank(xs.length, p);
            expect(value).toBe(sorted[k]);
            // The (k + 1)-th smallest, stated without the sort: at most k values lie below it and
            // at least k + 1 lie at or below it.
            expect(xs.filter((x) => x < value).length).toBeLessThanOrEqual(k);
            expect(xs.filter((x) => x <= value).length).toBeGreaterThanOrEqual(k + 1);
          }
          expect(d.count).toBe(xs.length);
        },
      ),
    );
  });
});
