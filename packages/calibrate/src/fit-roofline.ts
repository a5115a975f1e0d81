/**
 * The fit of the roofline timing's efficiencies and overheads (never free coefficients) to one or
 * more measured runs of one GPU, each replayed with its own spec: Nelder-Mead over the log of the
 * parameters, seeded from the shipped defaults or the spec's values, minimising the fit parts'
 * TPOT, TTFT and E2E errors. For runs timed at the client, the front end's overhead is fitted too.
 */
import { engineSettings, type Profile, type Spec, type Timing, type TraceRecord } from "@kvsim/profile-schema";
import type { RequestRecord } from "@kvsim/replay-engine";
import { ROOFLINE_PARAM_NAMES, rooflineParams, rooflineRank, type RooflineParams } from "@kvsim/vllm-scheduler";
import { compareRuns, type Comparison } from "./compare.js";
import { identifiabilityWarnings, missedTargetWarnings, type FitWarning, type OwnTargets } from "./fit-diagnostics.js";
import { clockStartFor, FIT_TARGETS, replayTiming, simulatedRun } from "./fit.js";
import type { MeasuredRun } from "./measured.js";
import { nelderMead } from "./nelder-mead.js";
import type { StageRun } from "./stage-summary.js";
import { stageMetrics, type StageComparison } from "./stage-workload.js";

/** What one run's fit part is: measured requests (their workload's records), or stage summaries (the records stageWorkload built). */
export type CalibrationData =
  | { readonly kind: "requests"; readonly fit: MeasuredRun; readonly records?: readonly TraceRecord[]; readonly traceFile?: string }
  | { readonly kind: "stages"; readonly run: StageRun; readonly records: readonly TraceRecord[] };

/** One measured run and the spec that replays it. */
export interface CalibrationRun {
  /** Names the run in tables and warnings (its measured file). */
  readonly label: string;
  readonly spec: Spec;
  readonly specFile?: string;
  readonly profiles?: ReadonlyMap<string, Profile>;
  readonly data: CalibrationData;
}

/** The front end's overhead as a fitted term (its name in results and warnings). */
export const FRONTEND_TERM = "frontend.overhead_ms";
/** Where a fitted front end starts when no spec sets one, ms. */
export const FRONTEND_START_MS = 5;

/** What data pins each term down (for warnings). */
export const ROOFLINE_ADVICE: Readonly<Record<string, string>> = {
  compute_efficiency: "a run with long prompts at low load (prefill GEMMs then dominate TTFT)",
  attention_efficiency: "a run with long prompts (several thousand tokens: prefill attention grows with the square of the length)",
  memory_efficiency: "runs at a lower load with long contexts (decode steps then read mostly weights and KV)",
  moe_efficiency: "a run of a mixture-of-experts model",
  link_efficiency: "a run at tensor parallelism 2 or more",
  step_overhead_ms: "a run at lower load (few running requests: the per-step cost then dominates TPOT)",
  layer_overhead_us: "a run with short prompts at low load (the mixed step's per-layer cost then shows in TTFT)",
  per_sequence_us: "runs at a lower and a higher load (the per-request cost grows with the batch)",
  [FRONTEND_TERM]: "a run at very low load (TTFT is then the front end and one prefill)",
};

export interface RooflineFitInput {
  readonly runs: readonly CalibrationRun[];
  /** Replays to spend on the search, each replaying every run (default 150). */
  readonly maxEvaluations?: number;
  /** Check which terms the data determine (one more replay of every run per term; default true). */
  readonly diagnose?: boolean;
  readonly onEvaluation?: (e: { readonly evaluation: number; readonly objective: number; readonly best: number }) => void;
}

/** One run's fit part at the fitted parameters. */
export interface RunFit {
  readonly label: string;
  readonly kind: CalibrationData["kind"];
  /** Requests: the fit part's comparison. */
  readonly comparison?: Comparison;
  /** Stages: each stage's comparison (excluded ones marked). */
  readonly stages?: readonly StageComparison[];
  readonly objective: number;
}

export interface RooflineFitResult {
  /** The fitted roofline (every parameter, rounded to 4 significant digits). */
  readonly params: RooflineParams;
  readonly start: RooflineParams;
  /** The fitted front end, ms; undefined when no run is timed at the client. */
  readonly frontendMs: number | undefined;
  /** The terms searched (the others are unused by these runs and stay at their start). */
  readonly fitted: readonly string[];
  readonly evaluations: number;
  readonly objective: number;
  readonly runs: readonly RunFit[];
  readonly warnings: readonly FitWarning[];
}

const EFFICIENCIES = new Set<string>(["compute_efficiency", "attention_efficiency", "memory_efficiency", "moe_efficiency", "link_efficiency"]);
/** Weight of the pull towards the start (per squared log-unit): keeps terms the data do not see where they started. */
const PRIOR_WEIGHT = 1e-3;
/** Finite-difference step of the identifiability check, in log units. */
const DIAGNOSTIC_STEP = 0.1;

/** Scales for zero starts (a zero overhead starts at 1e-3 of this). */
const ZERO_START_SCALE: Readonly<Record<string, number>> = { step_overhead_ms: 1, layer_overhead_us: 10, per_sequence_us: 10 };

const round4 = (v: number): number => (v === 0 ? 0 : Number(v.toPrecision(4)));

function profileOf(run: CalibrationRun): Profile | undefined {
  const ref = run.spec.profile;
  return typeof ref === "string" ? run.profiles?.get(ref) : ref;
}

/** Whether a run's TTFT is on the client's clock (what the front end's overhead adds to). */
export function clientClock(data: CalibrationData): boolean {
  return data.kind === "stages" || data.fit.format === "vllm-bench";
}

/** The terms no run exercises: experts without an MoE model, the link without TP or EP. */
function unusedTerms(runs: readonly CalibrationRun[]): Set<string> {
  let moe = false;
  let link = false;
  for (const r of runs) {
    const p = profileOf(r);
    if (p?.model_shape?.moe !== undefined && p.model_shape.moe.layers > 0) moe = true;
    if (p === undefined) {
      moe = link = true;
      continue;
    }
    try {
      const rank = rooflineRank(p, engineSettings(r.spec.engine));
      if (rank.tp > 1 || rank.ep > 1) link = true;
    } catch {
      link = true;
    }
  }
  const out = new Set<string>();
  if (!moe) out.add("moe_efficiency");
  if (!link) out.add("link_efficiency");
  return out;
}

/** One run's relative errors (the fitted targets) and objective at one candidate. */
interface RunEvaluation {
  readonly residuals: number[];
  readonly objective: number;
  readonly fit: RunFit;
}

function evaluateRequests(label: string, fit: MeasuredRun, records: readonly RequestRecord[] | undefined): RunEvaluation {
  if (records === undefined) return { residuals: FIT_TARGETS.map(() => 1), objective: 1e6, fit: { label, kind: "requests", objective: 1e6 } };
  const c = compareRuns(fit, simulatedRun(records, undefined, clockStartFor(fit)));
  const residuals = FIT_TARGETS.map((t) => c.latency.find((l) => l.metric === t.metric && l.stat === t.stat)?.error ?? 1);
  const objective = residuals.reduce((s, e) => s + e * e, 0) + (c.selected === 0 ? 0 : (10 * c.missingCount) / c.selected);
  return { residuals, objective, fit: { label, kind: "requests", comparison: c, objective } };
}

function evaluateStages(label: string, run: StageRun, records: readonly RequestRecord[] | undefined): RunEvaluation {
  const fitted = run.stages.filter((s) => !s.excluded);
  if (records === undefined) {
    const residuals = fitted.flatMap(() => [1, 1, 1, 1]);
    return { residuals, objective: 1e6, fit: { label, kind: "stages", objective: 1e6 } };
  }
  const stages = stageMetrics(records, run);
  const residuals: number[] = [];
  let penalty = 0;
  for (const s of stages) {
    if (s.excluded) continue;
    for (const v of [s.ttftMean, s.ttftP90, s.tpot, s.e2eMean]) if (v.measured !== null) residuals.push(v.error ?? 1);
    const total = s.simulatedRequests + s.simulatedIncomplete;
    if (total > 0) penalty += (10 * s.simulatedIncomplete) / total;
  }
  const objective = residuals.reduce((a, e) => a + e * e, 0) + penalty;
  return { residuals, objective, fit: { label, kind: "stages", stages, objective } };
}

/** The spec a run replays with: its workload the records (stage runs), its front end per its clock. */
function replayInput(run: CalibrationRun): { spec: Spec; specFile?: string; profiles?: ReadonlyMap<string, Profile>; records?: readonly TraceRecord[]; traceFile?: string } {
  const d = run.data;
  const base = { ...(run.specFile === undefined ? {} : { specFile: run.specFile }), ...(run.profiles === undefined ? {} : { profiles: run.profiles }) };
  if (d.kind === "stages") {
    const spec: Spec = { ...run.spec, workload: { trace: d.run.file, format: "kvsim", trace_block_size: 512, speedup: 1 } };
    return { ...base, spec, records: d.records, traceFile: d.run.file };
  }
  return { ...base, spec: run.spec, ...(d.records === undefined ? {} : { records: d.records }), ...(d.traceFile === undefined ? {} : { traceFile: d.traceFile }) };
}

/** Virtual time after which a run's replay cannot change its fit part. */
function capOf(d: CalibrationData): number {
  if (d.kind === "requests") return Math.max(...d.fit.requests.map((r) => (r.arrivalMs ?? 0) + r.e2eMs)) * 1.5 + 1000;
  const last = d.records.reduce((m, r) => Math.max(m, r.arrivalMs), 0);
  return last * 2 + 300_000;
}

/** The roofline's own-target rows (TPOT and TTFT means of each fit part) for the missed-target check. */
export function ownTargets(runs: readonly RunFit[]): OwnTargets[] {
  const rows: OwnTargets[] = [];
  for (const r of runs) {
    if (r.comparison !== undefined) {
      const get = (m: "tpot" | "ttft") => r.comparison!.latency.find((l) => l.metric === m && l.stat === "mean")?.error ?? null;
      rows.push({ label: r.label, tpotMeanError: get("tpot"), ttftMeanError: get("ttft") });
    }
    for (const s of r.stages ?? []) {
      if (!s.excluded) rows.push({ label: `${r.label} stage ${s.stage} (${s.rate} req/s)`, tpotMeanError: s.tpot.error, ttftMeanError: s.ttftMean.error });
    }
  }
  return rows;
}

/**
 * Fits the roofline to every run together. Efficiencies are searched as log e, capped at 1 (a
 * candidate above pays a penalty pulling it back); overheads as their log, so they stay positive.
 * Terms no run exercises (moe_efficiency without an MoE model, link_efficiency without TP) keep
 * their start. A weak pull towards the start (1e-3 per squared log-unit) keeps terms the data do
 * not see where they began. Deterministic.
 */
export async function fitRoofline(input: RooflineFitInput): Promise<RooflineFitResult> {
  const runs = input.runs;
  if (runs.length === 0) throw new RangeError("fitRoofline needs at least one run");
  const first = runs[0]!.spec.timing;
  const start = rooflineParams(first.type === "roofline" ? first : { type: "roofline" });
  const fitFrontend = runs.some((r) => clientClock(r.data));
  const frontendStart = runs.map((r) => r.spec.frontend?.overhead_ms).find((v) => v !== undefined) ?? FRONTEND_START_MS;
  const unused = unusedTerms(runs);
  const names: string[] = ROOFLINE_PARAM_NAMES.filter((n) => !unused.has(n));
  if (fitFrontend) names.push(FRONTEND_TERM);
  const startValue = (n: string): number => (n === FRONTEND_TERM ? frontendStart : start[n as keyof RooflineParams]);
  // A zero start has no log: it starts at a small positive value instead.
  const theta0 = names.map((n) => Math.log(Math.max(startValue(n), n === FRONTEND_TERM ? 0.01 : 1e-3 * (ZERO_START_SCALE[n] ?? 1))));

  const decode = (theta: readonly number[]): { params: RooflineParams; frontendMs: number | undefined; penalty: number } => {
    const out: Record<string, number> = { ...start };
    let penalty = 0;
    let frontendMs: number | undefined;
    names.forEach((n, i) => {
      const x = theta[i]!;
      penalty += PRIOR_WEIGHT * (x - theta0[i]!) ** 2;
      if (n === FRONTEND_TERM) frontendMs = round4(Math.exp(x));
      else if (EFFICIENCIES.has(n)) {
        if (x > 0) penalty += x * x;
        out[n] = round4(Math.min(1, Math.exp(x)));
      } else out[n] = round4(Math.exp(x));
    });
    return { params: out as unknown as RooflineParams, frontendMs, penalty };
  };

  const inputs = runs.map(replayInput);
  const caps = runs.map((r) => capOf(r.data));
  const cache = new Map<string, { f: number; evals: RunEvaluation[] }>();
  let evaluations = 0;
  let best = Infinity;
  const evaluate = async (theta: readonly number[]) => {
    const key = theta.map((v) => v.toFixed(6)).join(",");
    const hit = cache.get(key);
    if (hit !== undefined) return hit;
    const { params, frontendMs, penalty } = decode(theta);
    const timing: Timing = { type: "roofline", ...params };
    const evals: RunEvaluation[] = [];
    for (let i = 0; i < runs.length; i++) {
      const run = runs[i]!;
      const d = run.data;
      // A run timed at the engine replays without a front end; one at the client with the fitted one.
      const frontend = clientClock(d) ? (frontendMs ?? null) : d.kind === "requests" && d.fit.format === "vllm-requests" ? null : undefined;
      const records = await replayTiming(inputs[i]!, timing, caps[i], frontend);
      evals.push(d.kind === "requests" ? evaluateRequests(run.label, d.fit, records) : evaluateStages(run.label, d.run, records));
    }
    evaluations++;
    const f = evals.reduce((s, e) => s + e.objective, 0) + penalty;
    best = Math.min(best, f);
    input.onEvaluation?.({ evaluation: evaluations, objective: f, best });
    const out = { f, evals };
    cache.set(key, out);
    return out;
  };

  const res = await nelderMead(async (x) => (await evaluate(x)).f, theta0, { step: 0.3, maxEvaluations: input.maxEvaluations ?? 150, tolerance: 1e-5 });
  const final = await evaluate(res.x);
  const { params, frontendMs } = decode(res.x);
  const runFits = final.evals.map((e) => e.fit);

  const warnings: FitWarning[] = [];
  for (const r of runs) {
    if (r.data.kind !== "stages") continue;
    for (const s of r.data.run.stages) if (s.excluded) warnings.push({ kind: "excluded", message: `${r.label} stage ${s.stage} (${s.rate} req/s): ${s.excludedReason ?? "excluded"}` });
    if (r.data.run.stages.every((s) => s.excluded)) warnings.push({ kind: "excluded", message: `${r.label}: every stage is excluded, so this run does not inform the fit`, settle: "a run at a load the server sustains (no failed requests)" });
  }
  for (const n of unused) warnings.push({ kind: "unused", message: `${n} is not exercised by these runs and stays at ${start[n as keyof RooflineParams]}`, settle: ROOFLINE_ADVICE[n]!, terms: [n] });
  warnings.push(...missedTargetWarnings(ownTargets(runFits)));
  if (input.diagnose ?? true) {
    const base = final.evals.flatMap((e) => e.residuals);
    const columns: number[][] = [];
    for (let j = 0; j < names.length; j++) {
      const x = [...res.x];
      x[j]! += DIAGNOSTIC_STEP;
      const moved = (await evaluate(x)).evals.flatMap((e) => e.residuals);
      columns.push(moved.map((v, k) => (v - (base[k] ?? 0)) / DIAGNOSTIC_STEP));
    }
    const jacobian = base.map((_, k) => columns.map((c) => c[k] ?? 0));
    warnings.push(...identifiabilityWarnings(jacobian, names, ROOFLINE_ADVICE, "roofline fit"));
  }
  return {
    params,
    start,
    frontendMs: fitFrontend ? frontendMs : undefined,
    fitted: names,
    evaluations,
    objective: final.f,
    runs: runFits,
    warnings,
  };
}
