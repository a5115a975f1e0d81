import type { Sla } from "@kvsim/profile-schema";
import { latencyStat, metricValue, type SlaTerm } from "@kvsim/sweep";
import type { Refusal } from "./candidates.js";
import type { CandidateOutcome, PlanGoal } from "./search.js";
import type { PlanTopology } from "./space.js";

/** One candidate of a plan, as `--out` writes it (one JSON line each, best first). */
export interface PlanRow {
  /** 1 for the best; null for a candidate that does not meet the SLA or was not searched. */
  readonly rank: number | null;
  readonly label: string;
  readonly topology: PlanTopology;
  readonly gpus: number;
  readonly tp: number | { readonly prefill: number; readonly decode: number };
  readonly workers: number | { readonly prefill: number; readonly decode: number };
  readonly max_num_seqs: number;
  readonly max_num_batched_tokens: number;
  /** The router policy when the plan varied it (absent: the base spec's). */
  readonly router?: string;
  /** `searched` (ranked when it meets the SLA), `pruned`, `fails`, `skipped`, or why it was not replayed (`does-not-fit`, `refused`, `infeasible`). */
  readonly status: CandidateOutcome["status"] | Refusal["kind"];
  /** The highest rate meeting the SLA (max-rate), or the given rate (rate), req/s; null when not met. */
  readonly rate_rps: number | null;
  readonly rate_rps_per_gpu: number | null;
  readonly meets_sla: boolean;
  /** Each SLA metric at `rate_rps`. */
  readonly sla_metrics: Readonly<Record<string, number | null>>;
  readonly p90_ttft_ms: number | null;
  readonly p90_tpot_ms: number | null;
  readonly goodput_rps_per_gpu: number | null;
  readonly output_tokens_per_s_per_gpu: number | null;
  /** With a GPU price: GPUs x price per hour / output tokens per hour, per million output tokens. */
  readonly cost_per_million_output_tokens: number | null;
  /** The lowest rate tried that broke the SLA, and the terms it broke there (what limits this deployment). */
  readonly failing_rps: number | null;
  readonly limited_by: readonly string[];
  /** The capacity estimate that ordered the search (not a prediction). */
  readonly estimate_rps: number | null;
  /** KV cache tokens of one rank per role. */
  readonly kv_cache_tokens: Readonly<Record<string, number>>;
  readonly replays: number;
  readonly reason: string | null;
}

const num = (v: number | undefined | null): number | null => (v === undefined || v === null || !Number.isFinite(v) ? null : v);

function shape(
  d: CandidateOutcome["candidate"]["deployment"],
): Pick<PlanRow, "topology" | "tp" | "workers" | "max_num_seqs" | "max_num_batched_tokens" | "router"> {
  const engine = {
    max_num_seqs: d.engine.max_num_seqs,
    max_num_batched_tokens: d.engine.max_num_batched_tokens,
    ...(d.engine.router === undefined ? {} : { router: d.engine.router }),
  };
  return d.topology === "aggregated"
    ? { topology: d.topology, tp: d.pool.tp, workers: d.pool.workers, ...engine }
    : {
        topology: d.topology,
        tp: { prefill: d.prefill.tp, decode: d.decode.tp },
        workers: { prefill: d.prefill.workers, decode: d.decode.workers },
        ...engine,
      };
}

/**
 * The plan's rows, best first: the candidates meeting the SLA ranked (max-rate: by rate per GPU,
 * then fewer GPUs; rate: by fewer GPUs, then the most headroom under the SLA's tightest term),
 * then the rest in the order searched, then those not replayed.
 */
export function rankPlan(
  outcomes: readonly CandidateOutcome[],
  refused: readonly Refusal[],
  sla: readonly SlaTerm[],
  goal: PlanGoal,
  pricePerGpuHour?: number,
): PlanRow[] {
  const rows = outcomes.map((o): PlanRow & { tightness: number; id: number } => {
    const c = o.candidate;
    const r = o.row?.report ?? null;
    const meets = o.rateRps !== null;
    const metrics: Record<string, number | null> = {};
    let tightness = 0;
    for (const t of sla) {
      const v = r === null ? null : num(metricValue(r, t.metric));
      metrics[t.metric] = v;
      if (v !== null && t.value !== 0) tightness = Math.max(tightness, t.op === "<=" ? v / t.value : t.value / v);
    }
    const outTokS = meets && r !== null ? num(r.output_throughput_tok_s) : null;
    return {
      rank: null,
      label: c.label,
      ...shape(c.deployment),
      gpus: c.gpus,
      status: o.status,
      rate_rps: o.rateRps,
      rate_rps_per_gpu: o.rateRps === null ? null : o.rateRps / c.gpus,
      meets_sla: meets,
      sla_metrics: metrics,
      p90_ttft_ms: r === null ? null : num(r.p90_ttft_ms),
      p90_tpot_ms: r === null ? null : num(r.p90_tpot_ms),
      goodput_rps_per_gpu: meets && r !== null ? (num(r.goodput_rps) ?? 0) / c.gpus : null,
      output_tokens_per_s_per_gpu: outTokS === null ? null : outTokS / c.gpus,
      cost_per_million_output_tokens:
        pricePerGpuHour === undefined || outTokS === null || outTokS <= 0 ? null : (c.gpus * pricePerGpuHour * 1e6) / (outTokS * 3600),
      failing_rps: o.failingRps,
      limited_by: o.brokenAtFailing,
      estimate_rps: c.estimate.rps,
      kv_cache_tokens: c.kvTokens,
      replays: o.replays,
      reason: o.reason,
      tightness,
      id: c.id,
    };
  });
  const met = rows.filter((r) => r.meets_sla);
  met.sort((a, b) =>
    goal.kind === "max-rate"
      ? b.rate_rps_per_gpu! - a.rate_rps_per_gpu! || a.gpus - b.gpus || a.id - b.id
      : a.gpus - b.gpus || a.tightness - b.tightness || a.id - b.id,
  );
  const rest = rows.filter((r) => !r.meets_sla);
  const ranked = [...met.map((r, i) => ({ ...r, rank: i + 1 })), ...rest];
  const strip = (r: PlanRow & { tightness: number; id: number }): PlanRow => {
    const row: Partial<typeof r> = { ...r };
    delete row.tightness;
    delete row.id;
    return row as PlanRow;
  };
  const notRun = refused.map((f): PlanRow => ({
    rank: null,
    label: f.label,
    ...shape(f.deployment),
    gpus: f.gpus,
    status: f.kind,
    rate_rps: null,
    rate_rps_per_gpu: null,
    meets_sla: false,
    sla_metrics: {},
    p90_ttft_ms: null,
    p90_tpot_ms: null,
    goodput_rps_per_gpu: null,
    output_tokens_per_s_per_gpu: null,
    cost_per_million_output_tokens: null,
    failing_rps: null,
    limited_by: [],
    estimate_rps: null,
    kv_cache_tokens: {},
    replays: 0,
    reason: f.reason,
  }));
  return [...ranked.map(strip), ...notRun];
}

/**
 * Why the top candidates win, one line each: the margin over the next, and what limits each
 * (the SLA terms its lowest failing rate broke).
 */
export function whyLines(rows: readonly PlanRow[], goal: PlanGoal, top = 3): string[] {
  const met = rows.filter((r) => r.rank !== null);
  return met.slice(0, top).map((r, i) => {
    const next = met[i + 1];
    let margin: string;
    if (next === undefined) margin = met.length === 1 ? "the only candidate meeting the SLA" : "the last candidate meeting the SLA";
    else if (goal.kind === "max-rate") {
      const gain = (r.rate_rps_per_gpu! / next.rate_rps_per_gpu! - 1) * 100;
      margin = gain < 0.05 ? `ties #${next.rank} on rate per GPU` : `${gain.toFixed(1)}% more req/s per GPU than #${next.rank}`;
    } else margin = r.gpus < next.gpus ? `${next.gpus - r.gpus} fewer GPUs than #${next.rank}` : `as many GPUs as #${next.rank}, more headroom under the SLA`;
    const limit = r.limited_by.length === 0 ? "" : `; at ${r.failing_rps} req/s: ${r.limited_by.join(", ")}`;
    return `#${r.rank} ${r.label}: ${margin}${limit}`;
  });
}

/** The runner-up within `share` of the winner (max-rate: rate per GPU; rate: same GPUs), or undefined. */
export function runnerUp(rows: readonly PlanRow[], goal: PlanGoal, share = 0.05): PlanRow | undefined {
  const [first, second] = rows.filter((r) => r.rank !== null);
  if (first === undefined || second === undefined) return undefined;
  if (goal.kind === "max-rate") return second.rate_rps_per_gpu! >= first.rate_rps_per_gpu! * (1 - share) ? second : undefined;
  return second.gpus <= first.gpus * (1 + share) ? second : undefined;
}

/**
 * The spec's per-request SLA for goodput from the plan's terms: each latency the terms bound
 * (`p90_ttft_ms<=2000` gives ttft_ms 2000; TPOT and ITL give itl_ms), the tightest bound of each.
 */
export function goodputSla(terms: readonly SlaTerm[]): Sla | undefined {
  const out: { ttft_ms?: number; itl_ms?: number; e2e_ms?: number } = {};
  for (const t of terms) {
    if (t.op !== "<=" || !(t.value > 0)) continue;
    const l = latencyStat(t.metric);
    // A bound on a spread (std_*) says nothing of one request's latency.
    if (l === undefined || l.stat === "std") continue;
    const key = l.latency === "ttft" ? "ttft_ms" : l.latency === "e2e" ? "e2e_ms" : "itl_ms";
    out[key] = Math.min(out[key] ?? Number.POSITIVE_INFINITY, t.value);
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/**
 * The Pareto front of the ranked candidates: output tokens per second per GPU against tokens per
 * second per user (1000 / p90 TPOT), each point one candidate at its rate; no point on the front
 * is beaten on both. Sorted by tokens per user.
 */
export function paretoFront(rows: readonly PlanRow[]): PlanRow[] {
  const pts = rows.filter((r) => r.rank !== null && r.output_tokens_per_s_per_gpu !== null && r.p90_tpot_ms !== null && r.p90_tpot_ms > 0);
  const user = (r: PlanRow) => 1000 / r.p90_tpot_ms!;
  return pts
    .filter(
      (a) =>
        !pts.some(
          (b) =>
            b !== a &&
            user(b) >= user(a) &&
            b.output_tokens_per_s_per_gpu! >= a.output_tokens_per_s_per_gpu! &&
            (user(b) > user(a) || b.output_tokens_per_s_per_gpu! > a.output_tokens_per_s_per_gpu!),
        ),
    )
    .sort((a, b) => user(a) - user(b));
}

/**
 * What a reader of the plan must know before trusting its ranking: candidates whose rate search
 * never found a failing rate (the workload is too small to load them, so their rates are lower
 * bounds), and a plan where nothing meets the SLA.
 */
export function planWarnings(rows: readonly PlanRow[]): string[] {
  const out: string[] = [];
  const ranked = rows.filter((r) => r.rank !== null);
  if (ranked.length === 0) out.push("no candidate meets the SLA: loosen it, raise the GPU budget or try other TPs and engine settings");
  const open = ranked.filter((r) => r.status === "searched" && r.failing_rps === null && r.reason !== null);
  if (open.length > 0) {
    out.push(
      `${open.map((r) => `#${r.rank}`).join(", ")} met the SLA at every rate tried, up to requests arriving about 1 ms apart: the workload is too small to load ${open.length === 1 ? "it" : "them"}, so ${open.length === 1 ? "its rate is a lower bound" : "their rates are lower bounds"} and the ranking among them is not meaningful (give a longer trace or more requests)`,
    );
  }
  return out;
}
