import { MIN_RATE_PER_S, type Spec } from "@kvsim/profile-schema";
import {
  mapLimit,
  meetsSla,
  metricValue,
  roundRate,
  DEFAULT_RATE_TOLERANCE,
  MAX_RATE_DOUBLINGS,
  type PointExecutor,
  type PointTask,
  type SlaTerm,
  type SweepRow,
} from "@kvsim/sweep";
import type { Candidate } from "./candidates.js";
import { specAtRate, type WorkloadStats } from "./workload.js";

/** What a plan searches for: the highest rate meeting the SLA per GPU, or the fewest GPUs meeting it at a given rate. */
export type PlanGoal = { readonly kind: "max-rate"; readonly tolerance?: number } | { readonly kind: "rate"; readonly rps: number };

/** How one candidate ended. */
export interface CandidateOutcome {
  readonly candidate: Candidate;
  /**
   * `searched`: its rate search ran (max-rate) or it met the SLA (rate); `pruned`: one replay
   * showed it cannot beat the best (see `reason`); `fails`: it does not meet the SLA at the given
   * rate (or at any rate tried); `skipped`: not replayed, it uses more GPUs than a deployment that
   * meets the SLA at the given rate.
   */
  readonly status: "searched" | "pruned" | "fails" | "skipped";
  /** max-rate: the highest rate found meeting the SLA (req/s); rate: the given rate when it meets it. */
  readonly rateRps: number | null;
  /** The replay at `rateRps` (its report holds the SLA metrics there). */
  readonly row: SweepRow | null;
  /** The lowest rate tried that did not meet the SLA (req/s), and which SLA terms it broke there. */
  readonly failingRps: number | null;
  readonly brokenAtFailing: readonly string[];
  readonly reason: string | null;
  readonly replays: number;
}

export interface PlanSearchOptions {
  readonly candidates: readonly Candidate[];
  readonly stats: WorkloadStats;
  readonly sla: readonly SlaTerm[];
  readonly goal: PlanGoal;
  readonly executor: PointExecutor;
  /** The runnable task of a spec (the caller adds the trace reference and percentiles), or its refused row. */
  readonly task: (point: number, spec: Spec) => Promise<PointTask | SweepRow>;
  /**
   * max-rate: a candidate is pruned when it fails the SLA at (1 - margin) x the best rate per GPU
   * found so far x its GPUs, so every candidate within `margin` of the winner is searched in
   * full and the runner-up can be named (default 0.05).
   */
  readonly margin?: number;
  /**
   * Candidates searched between two updates of the pruning threshold (default 4). A constant, not
   * the executor's parallelism: the same inputs prune the same candidates with any executor.
   */
  readonly roundSize?: number;
  /** Told after every replay. */
  readonly onReplay?: (row: SweepRow) => void;
}

export interface PlanSearchResult {
  readonly outcomes: CandidateOutcome[];
  readonly replays: number;
}

/** The SLA terms a report breaks, as `p90_tpot_ms 56.1 > 50` (or `incomplete` when requests did not finish). */
function brokenTerms(row: SweepRow, sla: readonly SlaTerm[]): string[] {
  const r = row.report;
  // A replay stopped once its SLA was lost says which bound, after "the SLA is lost: ".
  if (r === null && row.status === "stopped" && row.reason !== null) return [`${row.reason.replace(/^.*?the SLA is lost: /, "")} (replay stopped early)`];
  if (r === null) return [row.reason ?? row.status];
  const out: string[] = [];
  if (r.completed_requests !== r.num_requests) out.push(`${r.num_requests - r.completed_requests} of ${r.num_requests} requests did not complete`);
  const sat = r.saturation;
  if (sat?.saturated === true)
    out.push(`saturated (serves ${Number((sat.served_rps ?? 0).toPrecision(3))} of ${Number((sat.offered_rps ?? 0).toPrecision(3))} req/s offered)`);
  for (const t of sla) {
    const v = metricValue(r, t.metric);
    if (v === undefined) out.push(`${t.metric} missing`);
    else if (t.op === "<=" ? v > t.value : v < t.value) out.push(`${t.metric} ${Number(v.toPrecision(4))} ${t.op === "<=" ? ">" : "<"} ${t.value}`);
  }
  return out;
}

/**
 * The rates a max-rate search may answer: (1 + tolerance)^k req/s for integer k, rounded to 4
 * significant digits. On this fixed ladder the search's answer is the highest rung meeting the SLA
 * whatever rung it starts from, so a candidate searched from a pruning bar and the same candidate
 * searched from its estimate give the same answer (the pruned and the exhaustive plan agree).
 */
export class RateLadder {
  private readonly step: number;
  constructor(readonly tolerance: number) {
    if (!(tolerance > 0 && tolerance < 1)) throw new RangeError(`the tolerance must be in (0, 1), got ${tolerance}`);
    this.step = Math.log1p(tolerance);
  }
  rate(k: number): number {
    return roundRate(Math.exp(k * this.step));
  }
  /** The highest rung at or below `rps`. */
  below(rps: number): number {
    let k = Math.floor(Math.log(rps) / this.step);
    while (this.rate(k + 1) <= rps) k++;
    while (this.rate(k) > rps) k--;
    return k;
  }
  /** Rungs per doubling of the rate (at least 1). */
  get doubling(): number {
    return Math.max(1, Math.round(Math.LN2 / this.step));
  }
}

/**
 * The highest rung of `ladder` meeting the SLA, assuming it holds below a rate where it holds:
 * from `start` (a rung), up or down a doubling at a time (at most MAX_RATE_DOUBLINGS), then
 * bisection over the rungs between the last rung that met it and the first that did not. It does
 * not climb past `ceiling`: there the answer is the last rung that met it, with no failing rate.
 */
export async function ladderSearch(
  ladder: RateLadder,
  start: number,
  meets: (rps: number) => Promise<boolean>,
  ceiling = Number.POSITIVE_INFINITY,
): Promise<{ answer: number | null; failing: number | null }> {
  const jump = ladder.doubling;
  let lo: number | undefined;
  let hi: number | undefined;
  if (await meets(ladder.rate(start))) {
    lo = start;
    for (let i = 0; i < MAX_RATE_DOUBLINGS && hi === undefined; i++) {
      // Above the ceiling more rate changes nothing worth searching: the answer is "at least lo".
      if (ladder.rate(lo + jump) > ceiling) break;
      if (await meets(ladder.rate(lo + jump))) lo += jump;
      else hi = lo + jump;
    }
    if (hi === undefined) return { answer: ladder.rate(lo), failing: null };
  } else {
    hi = start;
    for (let i = 0; i < MAX_RATE_DOUBLINGS && lo === undefined; i++) {
      if (ladder.rate(hi - jump) < MIN_RATE_PER_S) break;
      if (await meets(ladder.rate(hi - jump))) lo = hi - jump;
      else hi -= jump;
    }
    if (lo === undefined) return { answer: null, failing: ladder.rate(hi) };
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await meets(ladder.rate(mid))) lo = mid;
    else hi = mid;
  }
  return { answer: ladder.rate(lo), failing: ladder.rate(hi) };
}

/** One candidate's replays at given rates, each rate replayed once. */
class RateProbe {
  private readonly rows = new Map<number, SweepRow>();
  replays = 0;
  constructor(
    private readonly c: Candidate,
    private readonly opts: PlanSearchOptions,
  ) {}

  async at(rps: number): Promise<SweepRow> {
    const known = this.rows.get(rps);
    if (known !== undefined) return known;
    const spec = specAtRate(this.c.spec, this.opts.stats, rps);
    // Numbered by candidate and probe: the same for any executor.
    const task = await this.opts.task(this.c.id * 1000 + this.replays, spec);
    const row = "status" in task ? task : await this.opts.executor.run(task);
    this.replays++;
    this.opts.onReplay?.(row);
    this.rows.set(rps, row);
    return row;
  }

  /**
   * Whether the candidate meets the SLA at a rate and keeps up with it: a replay kvsim finds
   * saturated (it completes under 90% of the offered rate while TTFT keeps growing) does not
   * count, even when the workload ends before its latencies break the SLA.
   */
  meets = async (rps: number): Promise<boolean> => {
    if (rps < MIN_RATE_PER_S) return false;
    const report = (await this.at(rps)).report;
    return meetsSla(report, this.opts.sla) && report?.saturation?.saturated !== true;
  };

  row(rps: number | null): SweepRow | null {
    return rps === null ? null : (this.rows.get(rps) ?? null);
  }
}

/**
 * Searches the candidates, pruning what cannot win. Both goals assume what the sweep's searches
 * assume: a deployment that meets the SLA at a rate meets it at every lower rate, and one that
 * meets it with some workers meets it with more.
 *
 * max-rate: candidates in order of estimated rate per GPU, in rounds of `roundSize`. The first
 * round's candidates are searched in full (`ladderSearch` from half their estimate). Later, a
 * candidate first replays at the rate that would put it within `margin` of the best rate per GPU
 * so far; failing there, it cannot win and is pruned; meeting it, its search starts there.
 *
 * rate: one replay per candidate at the given rate, in order of GPUs (then estimate): once a
 * deployment meets the SLA, every candidate with more GPUs is skipped (it costs more); those
 * with as many GPUs are still replayed, to rank the ties.
 */
export async function searchPlan(opts: PlanSearchOptions): Promise<PlanSearchResult> {
  let replays = 0;
  const parallelism = Number.isFinite(opts.executor.parallelism) ? opts.executor.parallelism : opts.candidates.length;
  const roundSize = Math.max(1, opts.roundSize ?? 4);
  const goal = opts.goal;
  const outcomes: CandidateOutcome[] = [];

  if (goal.kind === "rate") {
    const order = [...opts.candidates].sort((a, b) => a.gpus - b.gpus || b.estimate.rps - a.estimate.rps || a.id - b.id);
    let cheapest: number | undefined;
    for (let i = 0; i < order.length;) {
      // One level: the candidates with the same GPU count run together.
      const gpus = order[i]!.gpus;
      let j = i;
      while (j < order.length && order[j]!.gpus === gpus) j++;
      const level = order.slice(i, j);
      i = j;
      if (cheapest !== undefined) {
        for (const c of level) {
          outcomes.push({
            candidate: c,
            status: "skipped",
            rateRps: null,
            row: null,
            failingRps: null,
            brokenAtFailing: [],
            reason: `uses ${c.gpus} GPUs; a deployment with ${cheapest} meets the SLA at ${goal.rps} req/s`,
            replays: 0,
          });
        }
        continue;
      }
      const results = await mapLimit(level, parallelism, async (c) => {
        const probe = new RateProbe(c, opts);
        const meets = await probe.meets(goal.rps);
        const row = probe.row(goal.rps);
        return {
          candidate: c,
          status: meets ? "searched" : "fails",
          rateRps: meets ? goal.rps : null,
          row,
          failingRps: meets ? null : goal.rps,
          brokenAtFailing: meets || row === null ? [] : brokenTerms(row, opts.sla),
          reason: meets ? null : `does not meet the SLA at ${goal.rps} req/s`,
          replays: probe.replays,
        } satisfies CandidateOutcome;
      });
      for (const r of results) {
        replays += r.replays;
        outcomes.push(r);
      }
      if (results.some((r) => r.status === "searched")) cheapest = gpus;
    }
    return { outcomes, replays };
  }

  const ladder = new RateLadder(goal.tolerance ?? DEFAULT_RATE_TOLERANCE);
  // Arrivals 1 ms apart on average: a higher rate replays nearly the same burst.
  const ceiling = Math.max(MIN_RATE_PER_S, (opts.stats.requests - 1) * 1000);
  const margin = opts.margin ?? 0.05;
  const perGpu = (c: Candidate) => c.estimate.rps / c.gpus;
  const order = [...opts.candidates].sort((a, b) => perGpu(b) - perGpu(a) || a.gpus - b.gpus || a.id - b.id);
  let best: number | undefined; // the best rate per GPU found
  for (let i = 0; i < order.length; i += roundSize) {
    const round = order.slice(i, i + roundSize);
    const threshold = best;
    const results = await mapLimit(round, parallelism, async (c): Promise<CandidateOutcome> => {
      const probe = new RateProbe(c, opts);
      let start = ladder.below(Math.max(MIN_RATE_PER_S, c.estimate.rps / 2));
      if (threshold !== undefined) {
        const rung = ladder.below(Math.max(MIN_RATE_PER_S, threshold * (1 - margin) * c.gpus));
        const bar = ladder.rate(rung);
        if (!(await probe.meets(bar))) {
          const row = probe.row(bar);
          return {
            candidate: c,
            status: "pruned",
            rateRps: null,
            row: null,
            failingRps: bar,
            brokenAtFailing: row === null ? [] : brokenTerms(row, opts.sla),
            reason: `fails the SLA at ${bar} req/s, ${Math.round(margin * 100)}% below the best rate per GPU found (${Number(threshold.toPrecision(4))} req/s per GPU)`,
            replays: probe.replays,
          };
        }
        start = rung;
      }
      const r = await ladderSearch(ladder, start, probe.meets, ceiling);
      const failingRow = probe.row(r.failing);
      return {
        candidate: c,
        status: r.answer === null ? "fails" : "searched",
        rateRps: r.answer,
        row: probe.row(r.answer),
        failingRps: r.failing,
        brokenAtFailing: failingRow === null ? [] : brokenTerms(failingRow, opts.sla),
        reason:
          r.answer === null
            ? `meets the SLA at no rate tried (down to ${r.failing} req/s)`
            : r.failing === null
              ? `meets the SLA up to ${r.answer} req/s, where the workload's requests arrive about 1 ms apart: the workload is too small to load this deployment (give a longer trace or more requests)`
              : null,
        replays: probe.replays,
      };
    });
    for (const r of results) {
      replays += r.replays;
      outcomes.push(r);
      if (r.rateRps !== null) best = Math.max(best ?? 0, r.rateRps / r.candidate.gpus);
    }
  }
  return { outcomes, replays };
}
