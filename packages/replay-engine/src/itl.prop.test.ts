import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ItlSample, TokenTrack } from "./itl.js";
import { PassLog } from "./pass-log.js";
import { arrayEntries, weightedRanks } from "./weighted-ranks.js";
import { percentileRank } from "./stats.js";

/**
 * The one-double-per-gap figures of a non-empty sample, as the replay computed them before pass
 * logs: the mean of the gaps summed in their order, the std summing (v - mean)^2 in the same order,
 * and the sorted sample's least, greatest and nearest-rank values.
 */
function naive(reference: readonly number[]): { mean: number; std: number; min: number; max: number; at: (p: number) => number } {
  let sum = 0;
  for (const g of reference) sum += g;
  const mean = sum / reference.length;
  let sq = 0;
  for (const g of reference) sq += (g - mean) * (g - mean);
  const sorted = [...reference].sort((a, b) => a - b);
  return { mean, std: Math.sqrt(sq / reference.length), min: sorted[0]!, max: sorted.at(-1)!, at: (p) => sorted[percentileRank(sorted.length, p)]! };
}

/**
 * Random small workloads: workers run passes at increasing times; each pass gives a token to some
 * of the requests on that worker; some requests complete (their gaps count), others do not. The
 * reference keeps every gap as a double, in completion and token order, as the replay did before
 * pass logs: the mean must be bit-for-bit equal and the percentiles the sorted sample's.
 */
describe("ItlSample equals the one-double-per-gap reference", () => {
  const workload = (minPasses: number, maxPasses: number) =>
    fc.record({
      workers: fc.integer({ min: 1, max: 3 }),
      requests: fc.integer({ min: 1, max: 12 }),
      passes: fc.array(
        fc.record({
          worker: fc.nat(),
          dtMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 40 }), fc.double({ min: 0.01, max: 30, noNaN: true })),
          served: fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
        }),
        { minLength: minPasses, maxLength: maxPasses },
      ),
      completionOrder: fc.array(fc.nat(), { minLength: 12, maxLength: 12 }),
      completes: fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
    });

  const check = (minPasses: number, maxPasses: number, seed: number, numRuns: number): void => {
    fc.assert(
      fc.property(workload(minPasses, maxPasses), fc.nat(), (w, askAt) => {
        const logs = Array.from({ length: w.workers }, () => new PassLog());
        const clocks = new Array<number>(w.workers).fill(0);
        // Request r lives on worker r mod workers.
        const tracks = Array.from({ length: w.requests }, () => new TokenTrack());
        const times: number[][] = Array.from({ length: w.requests }, () => []);
        for (const p of w.passes) {
          const k = p.worker % w.workers;
          clocks[k] = clocks[k]! + p.dtMs;
          let entry = -1;
          for (let r = k; r < w.requests; r += w.workers) {
            if (!p.served[r]!) continue;
            if (entry < 0) entry = logs[k]!.append(clocks[k]);
            tracks[r]!.add(logs[k]!, entry);
            times[r]!.push(clocks[k]);
          }
        }
        const order = Array.from({ length: w.requests }, (_, r) => r).sort((a, b) => w.completionOrder[a]! - w.completionOrder[b]! || a - b);
        const s = new ItlSample();
        const reference: number[] = [];
        for (const [i, r] of order.entries()) {
          // Asked once before every request completed: what it kept must not hide later runs.
          if (i === askAt % order.length) s.distribution();
          if (!w.completes[r]!) continue;
          s.addTrack(tracks[r]!);
          const t = times[r]!;
          for (let i = 1; i < t.length; i++) reference.push(t[i]! - t[i - 1]!);
        }
        const d = s.distribution();
        expect(d.count).toBe(reference.length);
        if (reference.length === 0) return;
        const ref = naive(reference);
        expect(d.mean).toBe(ref.mean);
        expect([d.min, d.max]).toEqual([ref.min, ref.max]);
        expect([d.p50, d.p90, d.p99]).toEqual([50, 90, 99].map(ref.at));
        expect(d.std).toBe(ref.std);
        const ps = [0, 25, 75, 95, 99.9, 100];
        expect(s.percentiles(ps)).toEqual(ps.map(ref.at));
      }),
      { seed, numRuns },
    );
  };

  it("same mean, std, percentiles, min, max and count", () => {
    check(0, 60, 1212, 400);
  });

  // 150 to 400 passes, so usually more than the 64 (gap, count) entries below which the ranks are
  // found by sorting: the logs' own histogram passes find them.
  it("the same past the histogram's threshold", () => {
    check(150, 400, 1213, 150);
  });
});

describe("weightedRanks equals expanding the weights and sorting", () => {
  it("on random values (with ties and outliers) and weights", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            v: fc.oneof(fc.integer({ min: 0, max: 20 }), fc.double({ min: 0, max: 1e4, noNaN: true }), fc.constant(1e12)),
            w: fc.integer({ min: 1, max: 4 }),
          }),
          { minLength: 1, maxLength: 400 },
        ),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 5 }),
        (entries, qs) => {
          const expanded = entries.flatMap((e) => Array.from({ length: e.w }, () => e.v)).sort((a, b) => a - b);
          const ranks = qs.map((q) => Math.min(expanded.length - 1, Math.floor(q * expanded.length)));
          const got = weightedRanks(
            arrayEntries(Float64Array.from(entries.map((e) => e.v)), Float64Array.from(entries.map((e) => e.w))),
            entries.length,
            ranks,
          );
          expect(got).toEqual(ranks.map((r) => expanded[r]));
        },
      ),
      { seed: 1214, numRuns: 300 },
    );
  });
});

/**
 * The incremental histogram against the naive sample on harder values: pass times stepping by
 * zero, equal, tiny and huge amounts, plain values mixed in (equal, zero, spanning 1e-300..1e300),
 * and, in the second property, negative values and -0 (the fallback to passes over the entries).
 * Figures are compared after `+ 0`, which maps -0 to 0: which zero of a tie comes first is not a
 * value of the sample.
 */
describe("ItlSample's histogram equals the one-double-per-gap reference on wide ranges", () => {
  const step = fc.oneof(fc.constant(0), fc.constant(7), fc.constantFrom(1e-9, 1e6, 1e12), fc.double({ min: 0, max: 1e9, noNaN: true }));
  const plain = (signed: boolean) =>
    signed
      ? fc.oneof(fc.constantFrom(0, -0, 5, -5), fc.double({ min: -1e300, max: 1e300, noNaN: true }))
      : fc.oneof(fc.constantFrom(0, 5, 1e-300, 1e300), fc.double({ min: 0, max: 1e300, noNaN: true }));
  const check = (signed: boolean, seed: number): void => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ dt: step, served: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }) }), { maxLength: 300 }),
        fc.array(fc.record({ after: fc.nat({ max: 4 }), v: plain(signed) }), { maxLength: 40 }),
        (passes, values) => {
          const log = new PassLog();
          let clock = 0;
          const tracks = Array.from({ length: 4 }, () => new TokenTrack());
          const times: number[][] = [[], [], [], []];
          for (const p of passes) {
            clock += p.dt;
            let entry = -1;
            p.served.forEach((on, r) => {
              if (!on) return;
              if (entry < 0) entry = log.append(clock);
              tracks[r]!.add(log, entry);
              times[r]!.push(clock);
            });
          }
          const s = new ItlSample();
          const reference: number[] = [];
          for (let r = 0; r <= 4; r++) {
            const mine = values.filter((x) => x.after === r).map((x) => x.v);
            s.addValues(Float64Array.from(mine));
            reference.push(...mine);
            if (r === 4) break;
            s.addTrack(tracks[r]!);
            const t = times[r]!;
            for (let i = 1; i < t.length; i++) reference.push(t[i]! - t[i - 1]!);
          }
          const d = s.distribution();
          expect(d.count).toBe(reference.length);
          if (reference.length === 0) return;
          const ref = naive(reference);
          const at = (p: number) => ref.at(p) + 0;
          expect([d.mean, d.std]).toEqual([ref.mean, ref.std]);
          expect([d.min + 0, d.max + 0, d.p50 + 0, d.p90 + 0, d.p99 + 0]).toEqual([ref.min + 0, ref.max + 0, at(50), at(90), at(99)]);
          const ps = [0, 10, 25, 75, 99.9, 100];
          expect(s.percentiles(ps).map((v) => v + 0)).toEqual(ps.map(at));
        },
      ),
      { seed, numRuns: 200 },
    );
  };

  it("non-negative gaps and values", () => {
    check(false, 1215);
  });
  it("with negative values and -0 (passes over the entries)", () => {
    check(true, 1216);
  });
});
