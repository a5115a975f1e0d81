import type { Spec } from "@kvsim/profile-schema";
import type { PointExecutor, PointTask, SweepRow } from "@kvsim/sweep";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Candidate } from "./candidates.js";
import { planWarnings, rankPlan } from "./rank.js";
import { ladderSearch, RateLadder, searchPlan, type PlanGoal } from "./search.js";
import type { Deployment } from "./space.js";

/**
 * Candidates whose SLA holds exactly up to a known rate: the fake executor replays nothing, it
 * reports p90 TTFT 50 ms at or below the candidate's true rate and 500 ms above it.
 */
const engine = { max_num_seqs: 64, max_num_batched_tokens: 2048 };
function candidate(id: number, gpus: number, trueRps: number, estimateRps: number): Candidate {
  const deployment: Deployment = { topology: "aggregated", pool: { workers: gpus, tp: 1 }, engine };
  const spec = { workload: { synthetic: { requests: 10, input_tokens: 10, output_tokens: 10, seed: 0, shared_prefix_ratio: 0 } }, truth: trueRps };
  return { id, deployment, label: `c${id}`, gpus, spec: spec as unknown as Spec, estimate: { rps: estimateRps }, kvTokens: {} };
}

function fakeExecutor(parallelism: number): PointExecutor & { runs: number } {
  const ex = {
    parallelism,
    runs: 0,
    async run(task: PointTask): Promise<SweepRow> {
      ex.runs++;
      await new Promise((r) => setTimeout(r, (task.point * 7) % 3)); // finish out of order
      const spec = task.spec as { workload: { synthetic: { rate_per_s: number } }; truth: number };
      const meets = spec.workload.synthetic.rate_per_s <= spec.truth;
      const report = {
        num_requests: 10,
        completed_requests: 10,
        p90_ttft_ms: meets ? 50 : 500,
        output_throughput_tok_s: spec.workload.synthetic.rate_per_s * 10,
      };
      return { point: task.point, settings: {}, status: "ok", reason: null, report: report as unknown as SweepRow["report"], digest: "x", wall_time_ms: 0 };
    },
    close: () => Promise.resolve(),
  };
  return ex;
}

const stats = { requests: 10, meanInputTokens: 10, meanOutputTokens: 10, minInputTokens: 10, maxRequestTokens: 20 };
const sla = [{ metric: "p90_ttft_ms", op: "<=" as const, value: 100 }];
const task = (point: number, spec: Spec) => Promise.resolve({ point, settings: {}, spec, trace: null } satisfies PointTask);
const maxRate: PlanGoal = { kind: "max-rate", tolerance: 0.01 };

describe("searchPlan, max-rate", () => {
  it("prunes with one replay a candidate that fails within 5% of the best rate per GPU", async () => {
    // c0 (estimated best) truly serves 8 req/s on 2 GPUs: 4 per GPU. c1 serves 3 on 1 GPU.
    const cs = [candidate(0, 2, 8, 20), candidate(1, 1, 3, 5)];
    const r = await searchPlan({ candidates: cs, stats, sla, goal: maxRate, executor: fakeExecutor(1), task, roundSize: 1 });
    const [c0, c1] = r.outcomes;
    expect(c0!.status).toBe("searched");
    // The highest rung 1.01^k at or below 8: k = 208 (1.01^208 = 7.922, 1.01^209 = 8.001).
    expect(c0!.rateRps).toBe(7.922);
    // c1's bar: the highest rung at or below 0.95 x 3.961 per GPU x 1 GPU = 3.763: 1.01^133 = 3.7563, shown 3.756.
    const bar = 3.756;
    expect(c1).toMatchObject({ status: "pruned", replays: 1, failingRps: bar, brokenAtFailing: ["p90_ttft_ms 500 > 100"] });
  });

  it("searches a candidate that passes the bar from the bar upwards", async () => {
    const cs = [candidate(0, 1, 4, 8), candidate(1, 1, 6, 4)];
    const r = await searchPlan({ candidates: cs, stats, sla, goal: maxRate, executor: fakeExecutor(2), task, roundSize: 1 });
    expect(r.outcomes[1]!.status).toBe("searched");
    // The highest rung at or below 6: 1.01^180 = 5.996.
    expect(r.outcomes[1]!.rateRps).toBe(5.996);
    const ranked = rankPlan(r.outcomes, [], sla, maxRate);
    expect(ranked.map((x) => [x.label, x.rank])).toEqual([
      ["c1", 1],
      ["c0", 2],
    ]);
  });

  it("never prunes the true best: the pruned search names the exhaustive search's winner (fixed seed)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            gpus: fc.integer({ min: 1, max: 8 }),
            rate: fc.double({ min: 0.5, max: 50, noNaN: true }),
            est: fc.double({ min: 0.5, max: 80, noNaN: true }),
          }),
          {
            minLength: 1,
            maxLength: 7,
          },
        ),
        fc.integer({ min: 1, max: 3 }),
        async (spec, jobs) => {
          const cs = spec.map((s, i) => candidate(i, s.gpus, s.rate, s.est));
          const run = async (roundSize: number) => {
            const r = await searchPlan({ candidates: cs, stats, sla, goal: maxRate, executor: fakeExecutor(jobs), task, roundSize });
            return { ranked: rankPlan(r.outcomes, [], sla, maxRate), replays: r.replays };
          };
          const exhaustive = await run(cs.length); // one round: no candidate is pruned
          const pruned = await run(1);
          // The same winner at the same rate, and every candidate the two rank both at the same rate.
          expect(pruned.ranked[0]!.label).toBe(exhaustive.ranked[0]!.label);
          expect(pruned.ranked[0]!.rate_rps).toBe(exhaustive.ranked[0]!.rate_rps);
          for (const row of pruned.ranked.filter((x) => x.rank !== null)) {
            expect(row.rate_rps).toBe(exhaustive.ranked.find((x) => x.label === row.label)!.rate_rps);
          }
          expect(pruned.replays).toBeLessThanOrEqual(exhaustive.replays + cs.length);
        },
      ),
      { seed: 39, numRuns: 60 },
    );
  });

  it("gives the same outcomes whatever the executor's parallelism", async () => {
    const cs = [candidate(0, 2, 8, 20), candidate(1, 1, 3, 5), candidate(2, 4, 17, 10), candidate(3, 1, 4.1, 4), candidate(4, 3, 11, 9)];
    const run = async (jobs: number) =>
      (await searchPlan({ candidates: cs, stats, sla, goal: maxRate, executor: fakeExecutor(jobs), task, roundSize: 2 })).outcomes;
    const strip = (o: Awaited<ReturnType<typeof run>>) =>
      o.map((x) => ({ id: x.candidate.id, status: x.status, rate: x.rateRps, failing: x.failingRps, replays: x.replays }));
    expect(strip(await run(3))).toEqual(strip(await run(1)));
  });
});

describe("RateLadder and ladderSearch", () => {
  it("answers the highest rung meeting the SLA whatever rung it starts from", async () => {
    const ladder = new RateLadder(0.05);
    // 1.05^k: k = 14 gives 1.980, k = 15 gives 2.079; the SLA holds up to 2 req/s.
    expect([ladder.rate(14), ladder.rate(15), ladder.below(2)]).toEqual([1.98, 2.079, 14]);
    for (const start of [-40, 0, 14, 15, 60]) {
      const tried: number[] = [];
      const r = await ladderSearch(ladder, start, (x) => {
        tried.push(x);
        return Promise.resolve(x <= 2);
      });
      expect(r).toEqual({ answer: 1.98, failing: 2.079 });
      expect(new Set(tried).size).toBe(tried.length); // no rate twice
    }
  });
});

describe("searchPlan, saturation and the ceiling", () => {
  it("does not count a rate the candidate falls behind at, even when its latencies pass", async () => {
    // p90 TTFT passes below 4 and again above 8 (saturated, the workload ends first): the answer is below 4.
    const r = await searchPlan({ candidates: [candidate(0, 1, 4, 40)], stats, sla, goal: maxRate, executor: fakeExecutor(1), task });
    expect(r.outcomes[0]!.rateRps).toBe(3.987); // 1.01^139 = 3.9869, the highest rung at or below 4
  });

  it("stops climbing where requests arrive 1 ms apart and says the workload is too small", async () => {
    // Ten requests: the ceiling is 9 x 1,000 req/s; a candidate true up to 10^6 never fails below it.
    const r = await searchPlan({ candidates: [candidate(0, 1, 1e6, 1e4)], stats, sla, goal: maxRate, executor: fakeExecutor(1), task });
    expect(r.outcomes[0]!.failingRps).toBeNull();
    expect(r.outcomes[0]!.rateRps).toBeLessThanOrEqual(9000);
    expect(r.outcomes[0]!.reason).toContain("too small to load");
    expect(planWarnings(rankPlan(r.outcomes, [], sla, maxRate))[0]).toContain("#1 met the SLA at every rate tried");
  });
});

describe("searchPlan, a given rate", () => {
  it("replays by GPU count and skips what costs more than the first deployment that meets the rate", async () => {
    // At 5 req/s: c0 (1 GPU) fails, c1 and c2 (2 GPUs) meet, c3 (3 GPUs) is skipped unreplayed.
    const cs = [candidate(0, 1, 4, 4), candidate(1, 2, 9, 9), candidate(2, 2, 6, 7), candidate(3, 3, 20, 20)];
    const exec = fakeExecutor(2);
    const r = await searchPlan({ candidates: cs, stats, sla, goal: { kind: "rate", rps: 5 }, executor: exec, task });
    expect(r.outcomes.map((o) => [o.candidate.id, o.status])).toEqual([
      [0, "fails"],
      [1, "searched"],
      [2, "searched"],
      [3, "skipped"],
    ]);
    expect(exec.runs).toBe(3);
    const ranked = rankPlan(r.outcomes, [], sla, { kind: "rate", rps: 5 });
    expect(ranked.filter((x) => x.rank !== null).map((x) => x.gpus)).toEqual([2, 2]);
  });
});
