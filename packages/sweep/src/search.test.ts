import { describe, expect, it } from "vitest";
import { findMaxRate, findMinAggregatedWorkers, findMinPdWorkers, type WorkerCounts } from "./index.js";

const below = (limit: number) => (x: number) => Promise.resolve({ meets: x <= limit });

describe("max-rate search", () => {
  it("brackets by doubling, then bisects to 1%", async () => {
    // SLA holds up to 37.3. From 10: 10 ok, 20 ok, 40 fails -> [20, 40].
    // 30 ok -> [30, 40]; 35 ok -> [35, 40]; 37.5 fails -> [35, 37.5]; 36.25 ok -> [36.25, 37.5]
    // (1.25 / 36.25 = 3.4% > 1%); mid 36.875 rounds to 36.88, ok -> [36.88, 37.5] (1.7%);
    // mid 37.19 ok -> [37.19, 37.5]: 0.31 / 37.19 = 0.83% <= 1%, done.
    const r = await findMaxRate(10, below(37.3));
    expect(r.probes.map((p) => [p.candidate, p.meets, p.phase])).toEqual([
      [10, true, "start"],
      [20, true, "bracket"],
      [40, false, "bracket"],
      [30, true, "bisect"],
      [35, true, "bisect"],
      [37.5, false, "bisect"],
      [36.25, true, "bisect"],
      [36.88, true, "bisect"],
      [37.19, true, "bisect"],
    ]);
    expect([r.answer, r.failing]).toEqual([37.19, 37.5]);
  });

  it("halves from a start that fails", async () => {
    // Holds up to 3. 10 fails, 5 fails, 2.5 ok -> [2.5, 5]; 3.75 fails; 3.125 rounds to 3.125,
    // fails -> [2.5, 3.125]; 2.8125 -> 2.813 ok -> [2.813, 3.125] (11%); 2.969 ok (5.2%);
    // 3.047 fails -> [2.969, 3.047] (2.6%); 3.008 fails -> [2.969, 3.008] (1.3%);
    // 2.9885 -> 2.989 (2.9885 is stored below the half, so it rounds down to 2.988)...
    const r = await findMaxRate(10, below(3));
    expect(r.probes.slice(0, 3).map((p) => [p.candidate, p.meets])).toEqual([
      [10, false],
      [5, false],
      [2.5, true],
    ]);
    // Whatever the rounding of the last midpoints, the answer meets, the failing rate does not,
    // and they are within 1%.
    expect(r.answer! <= 3 && r.failing! > 3).toBe(true);
    expect((r.failing! - r.answer!) / r.answer!).toBeLessThanOrEqual(0.01);
  });

  it("says so when every rate tried meets the SLA, or none does", async () => {
    const always = await findMaxRate(1, () => Promise.resolve({ meets: true }));
    // 1, then 20 doublings, each rounded to 4 digits: exact up to 8,192; 16,384 -> 16,380, then
    // 32,760, 65,520, 131,040 -> 131,000, 262,000, 524,000 and 1,048,000 (the 20th).
    expect([always.answer, always.failing, always.probes.length]).toEqual([1_048_000, null, 21]);
    const never = await findMaxRate(1, () => Promise.resolve({ meets: false }));
    // Halving 1 twenty times, rounding each time: the last is within 0.1% of 2^-20 = 9.537e-7.
    expect([never.answer, never.probes.length]).toEqual([null, 21]);
    expect(Math.abs(never.failing! / 2 ** -20 - 1)).toBeLessThan(1e-3);
  });

  it("stops when no rounded midpoint lies inside the bracket", async () => {
    // Holds up to 1.0005: 1 ok, 2 fails; ... the bracket narrows until 4 digits cannot split it.
    const r = await findMaxRate(1, below(1.0005), { tolerance: 1e-9 });
    expect([r.answer, r.failing]).toEqual([1, 1.001]);
  });
});

describe("min-workers search", () => {
  it("aggregated: doubles from 1, then bisects between the last failing and the first meeting count", async () => {
    // Needs 5 workers: 1, 2, 4 fail, 8 meets -> bisect (4, 8]: 6 meets, 5 meets -> 5.
    const r = await findMinAggregatedWorkers((c) => Promise.resolve({ meets: "workers" in c && c.workers >= 5 }), { maxWorkers: 64, tp: 2 });
    expect(r.probes.map((p) => [p.candidate, p.meets])).toEqual([
      [{ workers: 1 }, false],
      [{ workers: 2 }, false],
      [{ workers: 4 }, false],
      [{ workers: 8 }, true],
      [{ workers: 6 }, true],
      [{ workers: 5 }, true],
    ]);
    expect([r.answer, r.gpus]).toEqual([{ workers: 5 }, 10]);
  });

  it("aggregated: stops at maxWorkers", async () => {
    const r = await findMinAggregatedWorkers(() => Promise.resolve({ meets: false }), { maxWorkers: 3 });
    expect(r.probes.map((p) => p.candidate)).toEqual([{ workers: 1 }, { workers: 2 }, { workers: 3 }]);
    expect(r.answer).toBeNull();
  });

  it("P/D: the pair with the fewest GPUs, ties by goodput then fewer prefill workers", async () => {
    // Meets when prefill >= 2 and decode >= 1, or decode >= 3. Goodput = 10 x decode + prefill.
    const meets = (c: WorkerCounts) => "prefill" in c && (c.prefill >= 2 || c.decode >= 3);
    const evaluate = (c: WorkerCounts) => Promise.resolve({ meets: meets(c), goodput: "prefill" in c ? 10 * c.decode + c.prefill : 0 });
    // TP 1: level 2 = (1,1) fails; level 3 = (1,2) fails, (2,1) meets -> (2,1), 3 GPUs.
    const r = await findMinPdWorkers(evaluate, { maxWorkers: 4 });
    expect(r.probes.map((p) => [p.candidate, p.meets])).toEqual([
      [{ prefill: 1, decode: 1 }, false],
      [{ prefill: 1, decode: 2 }, false],
      [{ prefill: 2, decode: 1 }, true],
    ]);
    expect([r.answer, r.gpus]).toEqual([{ prefill: 2, decode: 1 }, 3]);
    // Prefill TP 4, decode TP 1: levels 5 (1,1), 6 (1,2), 7 (1,3) meets -> 7 GPUs, before (2,1) at 9.
    const tp = await findMinPdWorkers(evaluate, { maxWorkers: 4, tpPrefill: 4, tpDecode: 1 });
    expect([tp.answer, tp.gpus]).toEqual([{ prefill: 1, decode: 3 }, 7]);
    // A level with two meeting pairs: goodput decides. With TP 1 and "prefill + decode >= 4":
    // level 4 has (1,3) g 31, (2,2) g 22, (3,1) g 13: (1,3) wins.
    const tie = await findMinPdWorkers(
      (c) => Promise.resolve({ meets: "prefill" in c && c.prefill + c.decode >= 4, goodput: "prefill" in c ? 10 * c.decode + c.prefill : 0 }),
      { maxWorkers: 4 },
    );
    expect(tie.answer).toEqual({ prefill: 1, decode: 3 });
  });
});
