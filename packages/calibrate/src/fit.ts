/**
 * The fit of the `linear` step-time model to a measured run: a regression over the step times the
 * fit part's timestamps imply, refined by replaying the workload with candidate coefficients and
 * minimising the fit part's TPOT, TTFT and E2E errors (Nelder-Mead over three scale factors, and
 * the front end's overhead for a run timed at the client). No term falls below its physical floor
 * (see {@link linearFloors}), so a scale factor always has something to scale.
 */
import { engineSettings, InputError, type Profile, type Spec, type Timing, type TraceRecord } from "@kvsim/profile-schema";
import { runReplay, type RequestRecord } from "@kvsim/replay-engine";
import { rooflineGpu, rooflineGpuProblem, rooflineRank } from "@kvsim/vllm-scheduler";
import { compareRuns, type Comparison } from "./compare.js";
import { identifiabilityWarnings, missedTargetWarnings, type FitWarning } from "./fit-diagnostics.js";
import type { MeasuredRequest, MeasuredRun } from "./measured.js";
import { nelderMead } from "./nelder-mead.js";
import { pickupWaits, type SimulatedClockStart } from "./pickup.js";
import { maxOf } from "./stats.js";
import { regressionStart } from "./fit-regression.js";

/** The `linear` timing's coefficients, in its units (ms per step, ms per sequence, µs per token). */
export interface LinearCoefficients {
  readonly step_ms: number;
  readonly per_sequence_ms: number;
  readonly per_kv_token_us: number;
  readonly per_prompt_token_us: number;
  readonly per_cached_token_us: number;
  readonly prompt_step_ms: number;
  /** The MoE expert-loading term, when the spec's timing names the model's experts (fitted: all_experts_ms). */
  readonly experts?: ExpertsTerm;
}

/** The `linear` timing's `experts` term: the model's routing and the fitted cost of touching every expert. */
export interface ExpertsTerm {
  readonly num_experts: number;
  readonly num_experts_per_tok: number;
  readonly all_experts_ms: number;
}

/** The plain-number coefficients (all but the optional `experts` term). */
export type ScalarCoefficient = Exclude<keyof LinearCoefficients, "experts">;

export const COEFFICIENT_NAMES: readonly ScalarCoefficient[] = [
  "step_ms",
  "per_sequence_ms",
  "per_kv_token_us",
  "per_prompt_token_us",
  "per_cached_token_us",
  "prompt_step_ms",
];

/** Fewest measured requests `fitTiming` fits on. */
const MIN_FIT_REQUESTS = 10;

/** The fit part of a measured run: its first `fraction` of requests by arrival (at least one). */
export function fitPart(run: MeasuredRun, fraction: number): MeasuredRun {
  if (!(fraction > 0 && fraction <= 1)) throw new RangeError(`the fit fraction must be in (0, 1], got ${fraction}`);
  const n = Math.max(1, Math.floor(run.requests.length * fraction));
  return { ...run, requests: run.requests.slice(0, n) };
}

/**
 * Checks that every measured request is a request of the workload, with the same prompt and
 * output lengths; throws an InputError naming the measured file, line and field otherwise.
 */
export function checkMeasuredAgainstWorkload(run: MeasuredRun, records: readonly TraceRecord[], workloadFile: string): void {
  const byId = new Map<string, TraceRecord>();
  for (const r of records) byId.set(r.requestId ?? `trace-${r.line}`, r);
  for (const m of run.requests) {
    const w = byId.get(m.requestId);
    const at = { line: m.line };
    if (w === undefined) {
      throw new InputError(run.file, [
        {
          ...at,
          path: "request_id",
          message: `${m.requestId} is not a request of the workload ${workloadFile} (the spec must describe the same requests, with the same ids)`,
        },
      ]);
    }
    if (w.inputTokens !== m.inputTokens) {
      throw new InputError(run.file, [
        {
          ...at,
          path: "input_toks",
          message: `${m.requestId} has ${m.inputTokens} prompt tokens, the workload's request (${workloadFile}:${w.line}) has ${w.inputTokens}`,
        },
      ]);
    }
    if (w.outputTokens !== m.outputTokens) {
      throw new InputError(run.file, [
        {
          ...at,
          path: "output_toks",
          message: `${m.requestId} has ${m.outputTokens} output tokens, the workload's request (${workloadFile}:${w.line}) asks for ${w.outputTokens}`,
        },
      ]);
    }
  }
}

/** The clock start that matches a measured run's TTFT: the engine's pickup for vLLM's per-request stats. */
export function clockStartFor(run: MeasuredRun): SimulatedClockStart {
  return run.format === "vllm-requests" ? "engine-pickup" : "arrival";
}

/**
 * kvsim's per-request records as a measured run (completed requests only), for comparisons. With
 * `engine-pickup`, a request admitted at the first step boundary after its arrival starts its TTFT
 * and E2E there (its admission): it was admitted no later than the first step end any request
 * recorded at or after its arrival. A request admitted later waited for a slot; its clock starts
 * at its arrival, at most a step before the pickup, against a wait of seconds.
 */
export function simulatedRun(records: readonly RequestRecord[], file = "<simulated>", clockStart: SimulatedClockStart = "arrival"): MeasuredRun {
  const requests: MeasuredRequest[] = [];
  let skipped = 0;
  const waits =
    clockStart === "engine-pickup"
      ? pickupWaits(records.map((r) => ({ arrivalMs: r.arrival_ms, admittedMs: r.admitted_ms, firstTokenMs: r.first_token_ms, lastTokenMs: r.last_token_ms })))
      : undefined;
  records.forEach((r, i) => {
    if (r.status !== "completed" || r.ttft_ms === null || r.e2e_ms === null) {
      skipped++;
      return;
    }
    const wait = Math.min(waits?.[i] ?? 0, r.ttft_ms);
    const ttft = r.ttft_ms - wait;
    const e2e = r.e2e_ms - wait;
    requests.push({
      line: i + 1,
      requestId: r.request_id,
      arrivalMs: r.arrival_ms,
      inputTokens: r.input_tokens,
      outputTokens: r.output_tokens,
      ttftMs: ttft,
      e2eMs: e2e,
      tpotMs: r.output_tokens >= 2 ? (e2e - ttft) / (r.output_tokens - 1) : null,
    });
  });
  const first = requests.reduce((a, r) => Math.min(a, r.arrivalMs!), Infinity);
  const sorted = requests.map((r) => ({ ...r, arrivalMs: r.arrivalMs! - first })).sort((a, b) => a.arrivalMs - b.arrivalMs);
  return { format: "kvsim-requests", file, requests: sorted, skipped, lacks: [] };
}

// ---------------------------------------------------------------------------------------------
// Stage 2: replay the workload and minimise the fit part's errors.

export interface FitInput {
  /** The deployment and workload (its timing is replaced by each candidate). */
  readonly spec: Spec;
  readonly specFile?: string;
  readonly profiles?: ReadonlyMap<string, Profile>;
  /** The workload's records, when it is a trace (read once, replayed many times). */
  readonly records?: readonly TraceRecord[];
  readonly traceFile?: string;
  /** The fit part only: the rest of the measured run is never passed in. */
  readonly fit: MeasuredRun;
  /** Replays to spend on the refinement (default 60). */
  readonly maxEvaluations?: number;
  readonly onEvaluation?: (e: { readonly evaluation: number; readonly objective: number; readonly best: number }) => void;
}

export interface FitResult {
  readonly coefficients: LinearCoefficients;
  /** The regression's coefficients, before the floors and the refinement. */
  readonly start: LinearCoefficients;
  /** The scale factors found: per-step and per-sequence terms, prompt terms, the KV term. */
  readonly scale: { readonly decode: number; readonly prompt: number; readonly kv: number };
  readonly evaluations: number;
  /** Σ of squared relative errors of the fitted metrics on the fit part. */
  readonly objective: number;
  /** The fit part's comparison at the fitted coefficients. */
  readonly fitComparison: Comparison;
  /** The fitted front end, ms, for a run timed at the client (vllm-bench); undefined otherwise. */
  readonly frontendMs: number | undefined;
  /** The floors the coefficients were held at, or undefined when the spec allows none. */
  readonly floors: LinearFloors | undefined;
  /** What the fit could not do or cannot vouch for. */
  readonly warnings: readonly FitWarning[];
}

/**
 * The least each per-token term and the per-step term can cost on the spec's GPU, from the
 * profile's model_shape at the datasheet's peaks (efficiency 1): a prompt token's dense GEMMs at
 * peak FLOPs, a KV token read at full HBM bandwidth (by a decode row, or by a prompt row attending
 * its context), a step reading the rank's weights once. A fit never goes below them: a zero there
 * is one the physics rules out.
 */
export interface LinearFloors {
  readonly step_ms: number;
  readonly per_kv_token_us: number;
  readonly per_prompt_token_us: number;
  readonly per_cached_token_us: number;
}

/** The floors of a spec's deployment, or undefined without model_shape or a known engine.gpu. */
export function linearFloors(spec: Spec, profiles?: ReadonlyMap<string, Profile>): LinearFloors | undefined {
  const profile = typeof spec.profile === "string" ? profiles?.get(spec.profile) : spec.profile;
  if (profile?.model_shape === undefined) return undefined;
  const engine = engineSettings(spec.engine);
  if (rooflineGpuProblem(engine) !== undefined) return undefined;
  const gpu = rooflineGpu(engine);
  const rank = rooflineRank(profile, engine);
  const flopsPerUs = gpu.bf16Tflops * 1e6;
  const bytesPerUs = gpu.hbmGBps * 1e3;
  const kvUs = (rank.kvFullBytesPerToken + rank.kvWindowBytesPerToken) / bytesPerUs;
  // Dense weights and the LM head (routed experts are read only as far as a step's tokens touch them).
  const weights = (rank.rank.denseParams + rank.rank.lmHeadParams) * rank.shape.weight_bytes;
  const r = (v: number) => Number(v.toPrecision(4));
  return {
    step_ms: r(weights / bytesPerUs / 1000),
    per_kv_token_us: r(kvUs),
    per_prompt_token_us: r((2 * rank.rank.denseParams) / flopsPerUs),
    per_cached_token_us: r(kvUs),
  };
}

function floored(c: LinearCoefficients, f: LinearFloors | undefined): LinearCoefficients {
  if (f === undefined) return c;
  return {
    ...c,
    step_ms: Math.max(c.step_ms, f.step_ms),
    per_kv_token_us: Math.max(c.per_kv_token_us, f.per_kv_token_us),
    per_prompt_token_us: Math.max(c.per_prompt_token_us, f.per_prompt_token_us),
    per_cached_token_us: Math.max(c.per_cached_token_us, f.per_cached_token_us),
  };
}

/** What data pins down each of the linear fit's scale factors (for warnings). */
const LINEAR_ADVICE: Readonly<Record<string, string>> = {
  "decode scale (step_ms, per_sequence_ms)": "runs at a lower and a higher load (the per-step and per-sequence costs then separate from the KV term)",
  "prompt scale (per_prompt_token_us, per_cached_token_us, prompt_step_ms)": "a run with short prompts and one with long prompts at low load",
  "kv scale (per_kv_token_us)": "a run with longer contexts (long prompts or outputs: the KV read per step then changes)",
  "frontend.overhead_ms": "a run at very low load (TTFT is then the front end and one prefill)",
};
const SCALE_NAMES = Object.keys(LINEAR_ADVICE);

/** The metrics the refinement minimises, each as a squared relative error. */
export const FIT_TARGETS: readonly { readonly metric: "ttft" | "tpot" | "e2e"; readonly stat: "mean" | "p90" }[] = [
  { metric: "tpot", stat: "mean" },
  { metric: "tpot", stat: "p90" },
  { metric: "ttft", stat: "mean" },
  { metric: "ttft", stat: "p90" },
  { metric: "e2e", stat: "mean" },
  { metric: "e2e", stat: "p90" },
];

function scaled(c: LinearCoefficients, decode: number, prompt: number, kv: number): LinearCoefficients {
  return {
    step_ms: c.step_ms * decode,
    per_sequence_ms: c.per_sequence_ms * decode,
    per_kv_token_us: c.per_kv_token_us * kv,
    per_prompt_token_us: c.per_prompt_token_us * prompt,
    per_cached_token_us: c.per_cached_token_us * prompt,
    prompt_step_ms: c.prompt_step_ms * prompt,
    ...(c.experts === undefined ? {} : { experts: { ...c.experts, all_experts_ms: c.experts.all_experts_ms * decode } }),
  };
}

/** Rounds to 4 significant digits, so written specs read well and refits are stable. */
function roundCoefficients(c: LinearCoefficients): LinearCoefficients {
  const r = (v: number) => (v === 0 ? 0 : Number(v.toPrecision(4)));
  return {
    step_ms: r(c.step_ms),
    per_sequence_ms: r(c.per_sequence_ms),
    per_kv_token_us: r(c.per_kv_token_us),
    per_prompt_token_us: r(c.per_prompt_token_us),
    per_cached_token_us: r(c.per_cached_token_us),
    prompt_step_ms: r(c.prompt_step_ms),
    ...(c.experts === undefined ? {} : { experts: { ...c.experts, all_experts_ms: r(c.experts.all_experts_ms) } }),
  };
}

/** Replays the spec with the given coefficients; the records of every request (completed or not). */
export async function replayWith(
  input: Omit<FitInput, "fit">,
  c: LinearCoefficients,
  maxVirtualTimeMs?: number,
  frontendMs?: number | null,
): Promise<readonly RequestRecord[] | undefined> {
  return replayTiming(input, { type: "linear", ...c }, maxVirtualTimeMs, frontendMs);
}

/**
 * Replays the spec with the given timing; the records of every request (completed or not), or
 * undefined when the replay could not finish. `frontendMs`: a number sets spec.frontend, null
 * removes it, undefined keeps the spec's.
 */
export async function replayTiming(
  input: Omit<FitInput, "fit" | "spec"> & { readonly spec: Spec },
  timing: Timing,
  maxVirtualTimeMs?: number,
  frontendMs?: number | null,
): Promise<readonly RequestRecord[] | undefined> {
  const spec: Spec = { ...input.spec, timing, ...(maxVirtualTimeMs === undefined ? {} : { max_virtual_time_ms: maxVirtualTimeMs }) };
  if (frontendMs === null) spec.frontend = undefined;
  else if (frontendMs !== undefined) spec.frontend = { overhead_ms: frontendMs };
  const result = await runReplay({
    spec,
    ...(input.specFile === undefined ? {} : { specFile: input.specFile }),
    ...(input.profiles === undefined ? {} : { profiles: input.profiles }),
    ...(input.records === undefined ? {} : { records: input.records }),
    ...(input.traceFile === undefined ? {} : { traceFile: input.traceFile }),
  });
  return result.ok ? result.records : undefined;
}

/** The fit part's objective for one comparison: Σ squared relative errors, plus a penalty per request lost. */
function objectiveOf(c: Comparison): number {
  let f = 0;
  for (const t of FIT_TARGETS) {
    const row = c.latency.find((l) => l.metric === t.metric && l.stat === t.stat);
    const e = row?.error ?? null;
    f += e === null ? 1 : e * e;
  }
  return f + (c.selected === 0 ? 0 : (10 * c.missingCount) / c.selected);
}

/** The fit part's relative errors of the fitted targets (null: 1, as if 100% off). */
function residualsOf(c: Comparison): number[] {
  return FIT_TARGETS.map((t) => c.latency.find((l) => l.metric === t.metric && l.stat === t.stat)?.error ?? 1);
}

/** Finite-difference step of the identifiability check, in log units. */
const DIAGNOSTIC_STEP = 0.1;

/**
 * Fits the linear timing to the fit part. Deterministic: the same inputs give the same
 * coefficients (the replay and the optimiser are deterministic). The coefficients never fall
 * below {@link linearFloors} when the spec's profile has model_shape and engine.gpu a datasheet.
 * A vllm-bench run (client-side TTFT) also gets the front end's overhead fitted.
 */
export async function fitTiming(input: FitInput): Promise<FitResult> {
  const fit = input.fit;
  if (fit.requests.length < MIN_FIT_REQUESTS) {
    throw new InputError(fit.file, [
      {
        path: "",
        message: `has ${fit.requests.length} requests in its fit part, fewer than the ${MIN_FIT_REQUESTS} kvsim calibrate needs (raise --fit-fraction or measure more requests)`,
      },
    ]);
  }
  const timing = input.spec.timing;
  const experts = timing.type === "linear" ? timing.experts : undefined;
  const floors = linearFloors(input.spec, input.profiles);
  const regression = regressionStart(fit, input.spec.engine.max_num_batched_tokens ?? 8192, experts);
  const start = floored(regression, floors);
  // A run timed at the client: the front end's overhead is a fourth term. One timed at the engine
  // (vLLM's per-request stats) replays without a front end; kvsim records keep the spec's.
  const fitFrontend = fit.format === "vllm-bench";
  const frontendFor = (theta: readonly number[]): number | null | undefined =>
    fitFrontend ? Number(Math.exp(theta[3]!).toPrecision(4)) : fit.format === "vllm-requests" ? null : undefined;
  const coefficientsAt = (theta: readonly number[]) =>
    floored(roundCoefficients(scaled(start, Math.exp(theta[0]!), Math.exp(theta[1]!), Math.exp(theta[2]!))), floors);
  // Replays stop a while after the fit part's last measured token: later events cannot change it.
  const lastMs = maxOf(fit.requests.map((r) => (r.arrivalMs ?? 0) + r.e2eMs));
  const cap = lastMs * 1.5 + 1000;
  let evaluations = 0;
  let best = Infinity;
  const cache = new Map<string, { f: number; c: Comparison | undefined }>();
  const evaluate = async (theta: readonly number[]): Promise<{ f: number; c: Comparison | undefined }> => {
    const key = theta.map((v) => v.toFixed(6)).join(",");
    const hit = cache.get(key);
    if (hit !== undefined) return hit;
    const records = await replayWith(input, coefficientsAt(theta), cap, frontendFor(theta));
    evaluations++;
    let f = 1e6;
    let c: Comparison | undefined;
    if (records !== undefined) {
      c = compareRuns(fit, simulatedRun(records, undefined, clockStartFor(fit)));
      f = objectiveOf(c);
    }
    best = Math.min(best, f);
    input.onEvaluation?.({ evaluation: evaluations, objective: f, best });
    if (c !== undefined) cache.set(key, { f, c });
    return { f, c };
  };
  const maxEvaluations = input.maxEvaluations ?? 60;
  const frontendStart = Math.log(Math.max(0.01, input.spec.frontend?.overhead_ms ?? 5));
  const theta0 = fitFrontend ? [0, 0, 0, frontendStart] : [0, 0, 0];
  const res = await nelderMead(async (x) => (await evaluate(x)).f, theta0, { step: 0.2, maxEvaluations, tolerance: 1e-5 });
  const coefficients = coefficientsAt(res.x);
  const final = await evaluate(res.x);
  const fitComparison = final.c ?? compareRuns(fit, { ...fit, requests: [] });

  const warnings: FitWarning[] = [];
  if (floors === undefined) {
    warnings.push({
      kind: "no_floor",
      message:
        "the linear fit has no physical floor for its per-token terms (the profile has no model_shape, or engine.gpu no datasheet): a term the data do not exercise may come out 0",
      settle: "add model_shape to the profile and engine.gpu to the spec",
    });
  }
  const own = (m: "tpot" | "ttft") => fitComparison.latency.find((l) => l.metric === m && l.stat === "mean")?.error ?? null;
  warnings.push(...missedTargetWarnings([{ label: fit.file, tpotMeanError: own("tpot"), ttftMeanError: own("ttft") }]));
  if (final.c !== undefined) {
    const base = residualsOf(final.c);
    const columns: number[][] = [];
    for (let j = 0; j < theta0.length; j++) {
      const x = [...res.x];
      x[j]! += DIAGNOSTIC_STEP;
      const moved = (await evaluate(x)).c;
      columns.push(moved === undefined ? base.map(() => 0) : residualsOf(moved).map((v, k) => (v - base[k]!) / DIAGNOSTIC_STEP));
    }
    const jacobian = base.map((_, k) => columns.map((c) => c[k]!));
    warnings.push(...identifiabilityWarnings(jacobian, SCALE_NAMES.slice(0, theta0.length), LINEAR_ADVICE, "linear fit"));
  }
  return {
    coefficients,
    start: roundCoefficients(regression),
    scale: { decode: Math.exp(res.x[0]!), prompt: Math.exp(res.x[1]!), kv: Math.exp(res.x[2]!) },
    evaluations,
    objective: final.f,
    fitComparison,
    frontendMs: fitFrontend ? Number(Math.exp(res.x[3]!).toPrecision(4)) : undefined,
    floors,
    warnings,
  };
}
