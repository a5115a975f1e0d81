/**
 * The fit of the roofline timing's efficiencies and overheads (never free coefficients) to one or
 * more measured runs of one GPU, each replayed with its own spec: Nelder-Mead over the log of the
 * parameters, seeded from the shipped defaults or the spec's values, minimising the fit parts'
 * TPOT, TTFT and E2E errors. For runs timed at the client, the front end's overhead is fitted too,
 * per spec, in closed form: a constant delay of every arrival shifts each TTFT and E2E by exactly
 * that delay (the engine sees the same arrivals, later), so for each candidate the best overhead
 * is the weighted mean of the measured-minus-simulated gaps, floored at 0.
 */
import { engineSettings, resolveGpu, type Profile, type Spec, type Timing, type TraceRecord } from "@kvsim/profile-schema";
import type { RequestRecord } from "@kvsim/replay-engine";
import { ROOFLINE_PARAM_NAMES, rooflineParams, rooflineRank, type RooflineParams } from "@kvsim/vllm-scheduler";
import { compareRuns, type Comparison } from "./compare.js";
import { identifiabilityWarnings, missedTargetWarnings, type FitWarning, type OwnTargets } from "./fit-diagnostics.js";
import { clockStartFor, FIT_TARGETS, replayTiming, simulatedRun } from "./fit.js";
import type { MeasuredRun } from "./measured.js";
import { nelderMead } from "./nelder-mead.js";
import type { StageRun } from "./stage-summary.js";
import { maxOf } from "./stats.js";
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
const FRONTEND_TERM = "frontend.overhead_ms";

/** What data pins each term down (for warnings). */
const ROOFLINE_ADVICE: Readonly<Record<string, string>> = {
  compute_efficiency: "a run with long prompts at low load (prefill GEMMs then dominate TTFT)",
  attention_efficiency: "a run with long prompts (several thousand tokens: prefill attention grows with the square of the length)",
  memory_efficiency: "runs at a lower load with long contexts (decode steps then read mostly weights and KV)",
  moe_efficiency: "a run of a mixture-of-experts model",
  link_efficiency: "a run at tensor parallelism 2 or more",
  pcie_collective_gbps: "a run at tensor or expert parallelism over PCIe (no NVLink)",
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
  /** Per run (in input order): the fitted front end of its spec, ms; undefined for a spec none of whose runs is timed at the client. */
  readonly frontendMs: readonly (number | undefined)[];
  /** The terms searched (the others are unused by these runs and stay at their start; the front end is fitted in closed form). */
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
function clientClock(data: CalibrationData): boolean {
  return data.kind === "stages" || data.fit.format === "vllm-bench";
}

/** The terms no run exercises: experts without an MoE model, the link without TP or EP, the PCIe cap without TP or EP over PCIe. */
function unusedTerms(runs: readonly CalibrationRun[]): Set<string> {
  let moe = false;
  let link = false;
  let pcie = false;
  for (const r of runs) {
    const p = profileOf(r);
    if (p?.model_shape?.moe !== undefined && p.model_shape.moe.layers > 0) moe = true;
    if (p === undefined) {
      moe = link = pcie = true;
      continue;
    }
    try {
      const engine = engineSettings(r.spec.engine);
      const rank = rooflineRank(p, engine);
      if (rank.tp > 1 || rank.ep > 1) {
        link = true;
        if (resolveGpu(engine)?.link.kind !== "nvlink") pcie = true;
      }
    } catch {
      link = pcie = true;
    }
  }
  const out = new Set<string>();
  if (!moe) out.add("moe_efficiency");
  if (!link) out.add("link_efficiency");
  if (!pcie) out.add("pcie_collective_gbps");
  return out;
}

/** One fitted figure of a run: measured and simulated, and whether the front end's overhead adds to it (TTFT and E2E of a client-clock run). */
interface Target {
  readonly measured: number | null;
  readonly simulated: number | null;
  readonly shifts: boolean;
}

/** A run's targets at one candidate, its penalty for requests the replay lost, and its comparisons (at the replayed front end). */
interface RunEvaluation {
  readonly targets: readonly Target[];
  readonly penalty: number;
  readonly fit: RunFit;
}

/** The relative error of a target with `shift` ms more front end than was replayed (1 when either side is missing). */
const residual = (t: Target, shift: number): number =>
  t.measured === null || t.simulated === null || t.measured === 0 ? 1 : (t.simulated + (t.shifts ? shift : 0) - t.measured) / t.measured;

/** The shift minimising Σ squared relative errors of the shifting targets: Σ (m - s) / m² over Σ 1 / m², floored so the front end stays >= 0. */
function bestShift(targets: readonly Target[], replayedMs: number): number {
  let num = 0;
  let den = 0;
  for (const t of targets) {
    if (!t.shifts || t.measured === null || t.simulated === null || t.measured === 0) continue;
    num += (t.measured - t.simulated) / t.measured ** 2;
    den += 1 / t.measured ** 2;
  }
  return den === 0 ? 0 : Math.max(-replayedMs, num / den);
}

function evaluateRequests(label: string, fit: MeasuredRun, records: readonly RequestRecord[] | undefined, client: boolean): RunEvaluation {
  if (records === undefined)
    return {
      targets: FIT_TARGETS.map(() => ({ measured: null, simulated: null, shifts: false })),
      penalty: 1e6,
      fit: { label, kind: "requests", objective: 1e6 },
    };
  const c = compareRuns(fit, simulatedRun(records, undefined, clockStartFor(fit)));
  const targets = FIT_TARGETS.map((t) => {
    const row = c.latency.find((l) => l.metric === t.metric && l.stat === t.stat);
    return { measured: row?.measured ?? null, simulated: row?.simulated ?? null, shifts: client && t.metric !== "tpot" };
  });
  const penalty = c.selected === 0 ? 0 : (10 * c.missingCount) / c.selected;
  return { targets, penalty, fit: { label, kind: "requests", comparison: c, objective: targets.reduce((a, t) => a + residual(t, 0) ** 2, 0) + penalty } };
}

function evaluateStages(label: string, run: StageRun, records: readonly RequestRecord[] | undefined): RunEvaluation {
  const fitted = run.stages.filter((s) => !s.excluded);
  if (records === undefined) {
    return {
      targets: fitted.flatMap(() => [0, 1, 2, 3].map(() => ({ measured: null, simulated: null, shifts: false }))),
      penalty: 1e6,
      fit: { label, kind: "stages", objective: 1e6 },
    };
  }
  const stages = stageMetrics(records, run);
  const targets: Target[] = [];
  let penalty = 0;
  for (const s of stages) {
    if (s.excluded) continue;
    // TPOT is (e2e - ttft) / (output - 1): the front end cancels out of it.
    for (const [v, shifts] of [
      [s.ttftMean, true],
      [s.ttftP90, true],
      [s.tpot, false],
      [s.e2eMean, true],
    ] as const) {
      if (v.measured !== null) targets.push({ measured: v.measured, simulated: v.simulated, shifts });
    }
    const total = s.simulatedRequests + s.simulatedIncomplete;
    if (total > 0) penalty += (10 * s.simulatedIncomplete) / total;
  }
  return { targets, penalty, fit: { label, kind: "stages", stages, objective: targets.reduce((a, t) => a + residual(t, 0) ** 2, 0) + penalty } };
}

/** The spec a run replays with: its workload the records (stage runs), its front end per its clock. */
function replayInput(run: CalibrationRun): {
  spec: Spec;
  specFile?: string;
  profiles?: ReadonlyMap<string, Profile>;
  records?: readonly TraceRecord[];
  traceFile?: string;
} {
  const d = run.data;
  const base = { ...(run.specFile === undefined ? {} : { specFile: run.specFile }), ...(run.profiles === undefined ? {} : { profiles: run.profiles }) };
  if (d.kind === "stages") {
    const spec: Spec = { ...run.spec, workload: { trace: d.run.file, format: "kvsim", trace_block_size: 512, speedup: 1 } };
    return { ...base, spec, records: d.records, traceFile: d.run.file };
  }
  return {
    ...base,
    spec: run.spec,
    ...(d.records === undefined ? {} : { records: d.records }),
    ...(d.traceFile === undefined ? {} : { traceFile: d.traceFile }),
  };
}

/** Virtual time after which a run's replay cannot change its fit part. */
function capOf(d: CalibrationData): number {
  if (d.kind === "requests") return maxOf(d.fit.requests.map((r) => (r.arrivalMs ?? 0) + r.e2eMs)) * 1.5 + 1000;
  const last = d.records.reduce((m, r) => Math.max(m, r.arrivalMs), 0);
  return last * 2 + 300_000;
}

/** The roofline's own-target rows (TPOT and TTFT means of each fit part) for the missed-target check. */
function ownTargets(runs: readonly RunFit[]): OwnTargets[] {
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
  const unused = unusedTerms(runs);
  const names: string[] = ROOFLINE_PARAM_NAMES.filter((n) => !unused.has(n));
  // A zero start has no log: it starts at a small positive value instead.
  const theta0 = names.map((n) => Math.log(Math.max(start[n as keyof RooflineParams], 1e-3 * (ZERO_START_SCALE[n] ?? 1))));
  // Runs timed at the client, grouped by spec: each group has one front end.
  const client = runs.map((r) => clientClock(r.data));
  const groupKeys = [...new Set(runs.map((r, i) => (client[i] ? (r.specFile ?? `#${i}`) : undefined)).filter((k): k is string => k !== undefined))];
  const groupOf = runs.map((r, i) => (client[i] ? groupKeys.indexOf(r.specFile ?? `#${i}`) : -1));

  const decode = (theta: readonly number[]): { params: RooflineParams; penalty: number } => {
    const out: Record<string, number> = { ...start };
    let penalty = 0;
    names.forEach((n, i) => {
      const x = theta[i]!;
      penalty += PRIOR_WEIGHT * (x - theta0[i]!) ** 2;
      if (EFFICIENCIES.has(n)) {
        if (x > 0) penalty += x * x;
        out[n] = round4(Math.min(1, Math.exp(x)));
      } else out[n] = round4(Math.exp(x));
    });
    return { params: out as unknown as RooflineParams, penalty };
  };

  const inputs = runs.map(replayInput);
  const caps = runs.map((r) => capOf(r.data));
  /**
   * Replays every run at `theta` with each group's front end at `frontends` (engine-clock runs
   * without one); with `optimise`, each group's best front end is then found in closed form.
   */
  const evaluateWith = async (theta: readonly number[], frontends: readonly number[], optimise: boolean) => {
    const { params, penalty } = decode(theta);
    const timing: Timing = { type: "roofline", ...params };
    const evals: RunEvaluation[] = [];
    for (let i = 0; i < runs.length; i++) {
      const d = runs[i]!.data;
      const g = groupOf[i]!;
      const frontend = g >= 0 ? frontends[g]! : d.kind === "requests" && d.fit.format === "vllm-requests" ? null : undefined;
      const records = await replayTiming(inputs[i]!, timing, caps[i], frontend);
      evals.push(d.kind === "requests" ? evaluateRequests(runs[i]!.label, d.fit, records, g >= 0) : evaluateStages(runs[i]!.label, d.run, records));
    }
    const shifts = groupKeys.map((_, g) =>
      optimise
        ? bestShift(
            evals.filter((_, i) => groupOf[i] === g).flatMap((e) => e.targets),
            frontends[g]!,
          )
        : 0,
    );
    let f = penalty;
    evals.forEach((e, i) => {
      const shift = groupOf[i]! >= 0 ? shifts[groupOf[i]!]! : 0;
      f += e.penalty + e.targets.reduce((a, t) => a + residual(t, shift) ** 2, 0);
    });
    return { f, evals, frontends: groupKeys.map((_, g) => round4(frontends[g]! + shifts[g]!)) };
  };

  const cache = new Map<string, number>();
  let evaluations = 0;
  let best = Infinity;
  const zero = groupKeys.map(() => 0);
  const search = async (theta: readonly number[]): Promise<number> => {
    const key = theta.map((v) => v.toFixed(6)).join(",");
    const hit = cache.get(key);
    if (hit !== undefined) return hit;
    const { f } = await evaluateWith(theta, zero, true);
    evaluations++;
    best = Math.min(best, f);
    input.onEvaluation?.({ evaluation: evaluations, objective: f, best });
    cache.set(key, f);
    return f;
  };
  const res = await nelderMead(search, theta0, { step: 0.3, maxEvaluations: input.maxEvaluations ?? 150, tolerance: 1e-5 });
  const { params } = decode(res.x);
  const fitted = await evaluateWith(res.x, zero, true);
  // The comparisons at the fitted front ends themselves (replayed, not shifted).
  const final = await evaluateWith(res.x, fitted.frontends, false);
  evaluations += 2;
  const runFits = final.evals.map((e) => e.fit);

  const warnings: FitWarning[] = [];
  for (const r of runs) {
    if (r.data.kind !== "stages") continue;
    for (const s of r.data.run.stages)
      if (s.excluded) warnings.push({ kind: "excluded", message: `${r.label} stage ${s.stage} (${s.rate} req/s): ${s.excludedReason ?? "excluded"}` });
    if (r.data.run.stages.every((s) => s.excluded))
      warnings.push({
        kind: "excluded",
        message: `${r.label}: every stage is excluded, so this run does not inform the fit`,
        settle: "a run at a load the server sustains (no failed requests)",
      });
  }
  // The PCIe cap goes unsearched without a PCIe collective, silently: most deployments have none.
  for (const n of unused)
    if (n !== "pcie_collective_gbps")
      warnings.push({
        kind: "unused",
        message: `${n} is not exercised by these runs and stays at ${start[n as keyof RooflineParams]}`,
        settle: ROOFLINE_ADVICE[n]!,
        terms: [n],
      });
  warnings.push(...missedTargetWarnings(ownTargets(runFits)));
  // An efficiency the search pushed to its cap of 1: the data ask for more than the GPU's peak, so
  // the roofline overprices that term (the Jacobian there is flat only because of the cap).
  const atBound = new Set(names.filter((n, i) => EFFICIENCIES.has(n) && res.x[i]! >= 0));
  for (const n of atBound) {
    warnings.push({
      kind: "at_bound",
      message: `roofline fit: ${n} reached its bound of 1: the data ask for a faster ${n.replace("_efficiency", "")} term than the datasheet's peak allows, so the roofline overprices it for these runs`,
      settle: `check the GPU's datasheet figures and the model's shape (weight dtype, experts); ${ROOFLINE_ADVICE[n] ?? "a run that exercises it"} on other loads`,
      terms: [n],
    });
  }
  if (input.diagnose ?? true) {
    const flat = (ev: readonly RunEvaluation[]) => ev.flatMap((e) => e.targets.map((t) => residual(t, 0)));
    const base = flat(final.evals);
    const columns: number[][] = [];
    const probed = names.filter((n) => !atBound.has(n));
    for (const n of probed) {
      const j = names.indexOf(n);
      const x = [...res.x];
      x[j]! += DIAGNOSTIC_STEP;
      const moved = flat((await evaluateWith(x, fitted.frontends, false)).evals);
      evaluations++;
      columns.push(moved.map((v, k) => (v - (base[k] ?? 0)) / DIAGNOSTIC_STEP));
    }
    // Each group's front end, analytically: d(relative error)/d(log f) = f / measured on the figures it shifts.
    const colNames = [...probed];
    groupKeys.forEach((key, g) => {
      const f = fitted.frontends[g]!;
      columns.push(
        final.evals.flatMap((e, i) =>
          e.targets.map((t) => (groupOf[i] === g && t.shifts && t.measured !== null && t.measured !== 0 && t.simulated !== null ? f / t.measured : 0)),
        ),
      );
      colNames.push(groupKeys.length === 1 ? FRONTEND_TERM : `${FRONTEND_TERM} (${key})`);
    });
    const jacobian = base.map((_, k) => columns.map((c) => c[k] ?? 0));
    const advice = {
      ...ROOFLINE_ADVICE,
      ...Object.fromEntries(colNames.filter((n) => n.startsWith(`${FRONTEND_TERM} (`)).map((n) => [n, ROOFLINE_ADVICE[FRONTEND_TERM]!])),
    };
    warnings.push(...identifiabilityWarnings(jacobian, colNames, advice, "roofline fit"));
  }
  return {
    params,
    start,
    frontendMs: runs.map((_, i) => (groupOf[i]! >= 0 ? fitted.frontends[groupOf[i]!] : undefined)),
    fitted: [...names, ...(groupKeys.length > 0 ? [FRONTEND_TERM] : [])],
    evaluations,
    objective: final.f,
    runs: runFits,
    warnings,
  };
}
