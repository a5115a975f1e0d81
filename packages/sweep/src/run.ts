import type { Spec } from "@kvsim/profile-schema";
import type { PointExecutor } from "./executor.js";
import type { GridPoint } from "./grid.js";
import type { SpecOverride } from "./overrides.js";
import type { PointTask } from "./point.js";
import type { SweepRow } from "./rows.js";
import { findMaxRate, findMinAggregatedWorkers, findMinPdWorkers, DEFAULT_RATE_TOLERANCE, type Probe, type WorkerCounts } from "./search.js";
import { meetsSla, type SlaTerm } from "./sla.js";

/** A search's kind: the highest rate meeting the SLA, or the fewest workers (GPUs) meeting it. */
export type SearchKind = "max-rate" | "min-workers";

/** One search's result: the answer, the probes, and which rows the search ran. */
export interface SearchOutcome {
  /** The grid point the search ran at (empty without a grid). */
  readonly settings: Readonly<Record<string, unknown>>;
  /** The spec path(s) searched. */
  readonly variable: string;
  readonly answer: number | WorkerCounts | null;
  /** max-rate: the lowest rate tried above the answer that did not meet the SLA. */
  readonly failing?: number | null;
  /**
   * max-rate: the answer and the failing rate as arrival rates in requests per second (for a
   * trace, the offered rate of the replay at that speedup: requests - 1 over the arrival span).
   */
  readonly answer_rps?: number | null;
  readonly failing_rps?: number | null;
  readonly tolerance?: number;
  /** min-workers: GPUs of the answer. */
  readonly gpus?: number | null;
  readonly probes: readonly Probe<number>[] | readonly Probe<WorkerCounts>[];
  /** Indices of this search's rows. */
  readonly rows: readonly number[];
}

/** A search that cannot run on this spec (max-rate over a synthetic workload without a rate). */
export class SearchSetupError extends Error {
  override readonly name = "SearchSetupError";
}

/**
 * Tensor parallelism of a spec's profile: an inline profile's own; one given by path through
 * `profileTp` (the caller reads files; this package reads none).
 */
export type ProfileTp = (path: string) => number;

const tpOf = (ref: Spec["profile"], profileTp: ProfileTp): number => (typeof ref === "string" ? profileTp(ref) : ref.tensor_parallel_size);

const noPaths: ProfileTp = (path) => {
  throw new SearchSetupError(`the profile ${path} is given by path: pass profileTp to read its tensor_parallel_size`);
};

/** GPUs a spec uses: workers x TP of each pool (prefill and decode added for P/D). */
export function gpuCount(spec: Spec, profileTp: ProfileTp = noPaths): number {
  const t = spec.topology;
  if (t.kind === "aggregated") return t.workers * tpOf(spec.profile, profileTp);
  return t.prefill.workers * tpOf(spec.prefill?.profile ?? spec.profile, profileTp) + t.decode.workers * tpOf(spec.decode?.profile ?? spec.profile, profileTp);
}

/** The searched variable of max-rate: a synthetic workload's rate, or a trace's speedup. */
export function rateVariable(spec: Spec): { path: string; start: number } {
  const synthetic = spec.workload.synthetic;
  if (synthetic !== undefined) {
    if (synthetic.rate_per_s === undefined)
      throw new SearchSetupError("--find max-rate scales workload.synthetic.rate_per_s, but this workload has none (all requests arrive at 0)");
    return { path: "workload.synthetic.rate_per_s", start: synthetic.rate_per_s };
  }
  return { path: "workload.speedup", start: spec.workload.speedup };
}

interface SearchOptions {
  readonly tolerance: number;
  readonly maxWorkers: number;
  readonly profileTp: ProfileTp;
}

/** One search over one spec; `evaluate` runs a point with the given settings. */
async function searchSpec(
  find: SearchKind,
  spec: Spec,
  evaluate: (settings: Record<string, unknown>) => Promise<SweepRow>,
  sla: readonly SlaTerm[],
  options: SearchOptions,
): Promise<Omit<SearchOutcome, "settings" | "rows">> {
  if (find === "max-rate") {
    const variable = rateVariable(spec);
    // The arrival rate each probe offered (req/s): a speedup is a factor, the user asks for a rate.
    const offered = new Map<number, number | null>();
    const r = await findMaxRate(
      variable.start,
      async (x) => {
        const row = await evaluate({ [variable.path]: x });
        offered.set(x, row.report?.saturation?.offered_rps ?? null);
        return { meets: meetsSla(row.report, sla) };
      },
      { tolerance: options.tolerance },
    );
    // rate_per_s is a rate already; a trace's speedup gives the rate its requests arrived at.
    const rps = (x: number | null) => (x === null ? null : variable.path === "workload.speedup" ? (offered.get(x) ?? null) : x);
    return {
      variable: variable.path,
      answer: r.answer,
      answer_rps: rps(r.answer),
      failing: r.failing,
      failing_rps: rps(r.failing),
      probes: r.probes,
      tolerance: options.tolerance,
    };
  }
  const goodput = (row: SweepRow) => row.report?.goodput_rps;
  if (spec.topology.kind === "aggregated") {
    const r = await findMinAggregatedWorkers(
      async (c) => {
        const row = await evaluate({ "topology.workers": (c as { workers: number }).workers });
        return { meets: meetsSla(row.report, sla), goodput: goodput(row) };
      },
      { maxWorkers: options.maxWorkers, tp: tpOf(spec.profile, options.profileTp) },
    );
    return { variable: "topology.workers", answer: r.answer, gpus: r.gpus, probes: r.probes };
  }
  const r = await findMinPdWorkers(
    async (c) => {
      const pair = c as { prefill: number; decode: number };
      const row = await evaluate({ "topology.prefill.workers": pair.prefill, "topology.decode.workers": pair.decode });
      return { meets: meetsSla(row.report, sla), goodput: goodput(row) };
    },
    {
      maxWorkers: options.maxWorkers,
      tpPrefill: tpOf(spec.prefill?.profile ?? spec.profile, options.profileTp),
      tpDecode: tpOf(spec.decode?.profile ?? spec.profile, options.profileTp),
    },
  );
  return { variable: "topology.prefill.workers, topology.decode.workers", answer: r.answer, gpus: r.gpus, probes: r.probes };
}

/** Runs `fn` over `items` with at most `limit` calls in flight; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(lanes);
  return out;
}

const searchOverride = (text: string, value: unknown): SpecOverride => ({ path: text.split("."), value, source: `--find (${text}=${String(value)})` });

/** Told as points run: a search's total grows with each probe. */
export interface SweepProgressHooks {
  readonly setTotal?: (total: number) => void;
  readonly done?: (failed: boolean) => void;
}

/** What a sweep or a search runs. */
export interface SweepPlan {
  /** The grid's points (`expandGrid`); without one, a single point with no settings. */
  readonly points?: readonly GridPoint[];
  /**
   * The runnable task of a point whose spec is the base with `overrides` applied, or its row
   * when it is refused before running (`pointTask` over `specWithOverrides`, for example).
   */
  readonly task: (point: number, settings: Readonly<Record<string, unknown>>, overrides: readonly SpecOverride[]) => Promise<PointTask | SweepRow>;
  readonly executor: PointExecutor;
  /** Each row gets `sla_met`; a search needs one. */
  readonly sla?: readonly SlaTerm[];
  /** Search at each point instead of running it once. */
  readonly find?: SearchKind;
  /** With `find`: a point's spec (the searched variable's start, the topology, the TP). */
  readonly spec?: (overrides: readonly SpecOverride[]) => Spec;
  /** max-rate: relative width of the final bracket (default 1%). */
  readonly tolerance?: number;
  /** min-workers: the most workers of a pool tried (default 16). */
  readonly maxWorkers?: number;
  /** min-workers: TP of a profile given by path. */
  readonly profileTp?: ProfileTp;
  readonly progress?: SweepProgressHooks;
}

/** Rows by point index; with `find`, one search outcome per grid point. */
export interface SweepResult {
  readonly rows: SweepRow[];
  readonly searches?: SearchOutcome[];
}

/**
 * Runs a sweep: every point once, at most the executor's queue depth at a time; or, with `find`,
 * one search per point, whose rows are numbered in grid order, then in each search's order (the
 * same for any parallelism).
 */
export async function runSweep(plan: SweepPlan): Promise<SweepResult> {
  const { executor, sla } = plan;
  const points = plan.points ?? [{ index: 0, settings: {}, overrides: [] }];
  const annotate = (row: SweepRow): SweepRow => (sla === undefined ? row : { ...row, sla_met: meetsSla(row.report, sla) });
  const runTask = async (point: number, settings: Readonly<Record<string, unknown>>, overrides: readonly SpecOverride[]): Promise<SweepRow> => {
    const t = await plan.task(point, settings, overrides);
    return annotate("status" in t ? t : await executor.run(t));
  };
  if (plan.find === undefined) {
    const limit = Number.isFinite(executor.parallelism) ? (executor.queueDepth ?? executor.parallelism) : points.length;
    const rows = await mapLimit(points, limit, async (p) => {
      const row = await runTask(p.index, p.settings, p.overrides);
      plan.progress?.done?.(row.status !== "ok");
      return row;
    });
    return { rows: rows.sort((a, b) => a.point - b.point) };
  }
  const find = plan.find;
  if (sla === undefined) throw new SearchSetupError(`--find ${find} needs an SLA`);
  if (plan.spec === undefined) throw new SearchSetupError(`--find ${find} needs the spec of each point`);
  const specOf = plan.spec;
  const options: SearchOptions = {
    tolerance: plan.tolerance ?? DEFAULT_RATE_TOLERANCE,
    maxWorkers: plan.maxWorkers ?? 16,
    profileTp: plan.profileTp ?? noPaths,
  };
  let total = 0;
  const perPoint = Number.isFinite(executor.parallelism) ? Math.max(1, Math.floor(executor.parallelism / (find === "max-rate" ? 1 : 2))) : points.length;
  const outcomes = await mapLimit(points, perPoint, async (p) => {
    const evaluated: SweepRow[] = [];
    const evaluate = async (settings: Record<string, unknown>) => {
      plan.progress?.setTotal?.(++total);
      const overrides = Object.entries(settings).map(([k, v]) => searchOverride(k, v));
      const row = await runTask(0, { ...p.settings, ...settings }, [...p.overrides, ...overrides]);
      plan.progress?.done?.(row.status !== "ok");
      evaluated.push(row);
      return row;
    };
    const outcome = await searchSpec(find, specOf(p.overrides), evaluate, sla, options);
    return { point: p, outcome, evaluated };
  });
  // Rows numbered in grid order, then in each search's order: the same for any parallelism.
  const rows: SweepRow[] = [];
  const searches = outcomes.map(({ point, outcome, evaluated }) => {
    const first = rows.length;
    for (const r of evaluated) rows.push({ ...r, point: rows.length });
    return { ...outcome, settings: point.settings, rows: evaluated.map((_, i) => first + i) };
  });
  return { rows, searches };
}
