import { performance } from "node:perf_hooks";
import { dirname, isAbsolute, relative, resolve } from "node:path";
import { Document, isScalar, visit } from "yaml";
import {
  checkMeasuredAgainstWorkload,
  clockStartFor,
  compareRuns,
  COEFFICIENT_NAMES,
  fitPart,
  fitRoofline,
  fitTiming,
  looksLikeStageSummary,
  MEASURED_FORMAT_LACKS,
  parseMeasured,
  parseStageSummary,
  replayTiming,
  replayWith,
  fitAcceptance,
  simulatedRun,
  stageMetrics,
  stageWorkload,
  STAGE_SUMMARY_LACKS,
  type CalibrationRun,
  type Comparison,
  type FitWarning,
  type MeasuredRun,
  type ScalarCoefficient,
  type StageComparison,
  type StageRun,
} from "@kvsim/calibrate";
import { readTrace, type LocatedDocument, type Profile, type Spec, type TraceRecord } from "@kvsim/profile-schema";
import type { SpecOverride } from "@kvsim/sweep";
import { checkOutputs, readText, RunError, UsageError, writeOutputs, type CliIo } from "../io.js";
import { openTrace } from "../lines.js";
import { loadCheckedSpec, type CheckedSpec } from "../spec-check.js";
import type { StdinIo } from "../spec-input.js";
import type { RegisterCommand } from "./index.js";
import { textTable } from "../text-table.js";

export interface CalibrateOptions {
  readonly spec?: string | readonly string[];
  readonly measured?: string | readonly string[];
  readonly out?: string | readonly string[];
  readonly fitFraction: string;
  readonly maxEvaluations?: string;
  readonly maxStageSeconds: string;
  readonly format: string;
  readonly force: boolean;
}

const COEFFICIENT_UNITS: Readonly<Record<ScalarCoefficient, string>> = {
  step_ms: "ms per step",
  per_sequence_ms: "ms per scheduled sequence",
  per_kv_token_us: "µs per KV token a decode row attends",
  per_prompt_token_us: "µs per prompt token computed",
  per_cached_token_us: "µs per context token of prompt rows",
  prompt_step_ms: "ms per step with prompt work",
};

const ROOFLINE_UNITS: Readonly<Record<string, string>> = {
  compute_efficiency: "share of peak tensor FLOPs (dense GEMMs)",
  attention_efficiency: "share of peak FLOPs (prefill attention)",
  memory_efficiency: "share of HBM bandwidth",
  moe_efficiency: "fused-MoE kernels relative to dense GEMMs",
  link_efficiency: "share of the intra-node link",
  step_overhead_ms: "ms per step",
  layer_overhead_us: "µs per layer of a step with prompt rows",
  per_sequence_us: "µs per scheduled row",
};

const list = (v: string | readonly string[] | undefined): readonly string[] => (v === undefined ? [] : typeof v === "string" ? [v] : v);

/** The spec's raw document with `timing` (and `frontend`) replaced and relative paths rebased onto the output's folder. */
function writtenSpec(
  raw: unknown,
  specFile: string,
  outFile: string,
  timing: Record<string, unknown>,
  frontendMs: number | undefined,
): Record<string, unknown> {
  const doc = structuredClone(raw) as Record<string, unknown>;
  const from = specFile === "<stdin>" ? process.cwd() : dirname(resolve(specFile));
  const to = dirname(resolve(outFile));
  const rebase = (v: unknown): unknown => {
    if (typeof v !== "string" || isAbsolute(v)) return v;
    const r = relative(to, resolve(from, v));
    return r.startsWith(".") ? r : `./${r}`;
  };
  doc.profile = rebase(doc.profile);
  for (const role of ["prefill", "decode"] as const) {
    const r = doc[role];
    if (r !== null && typeof r === "object" && "profile" in r) (r as Record<string, unknown>).profile = rebase((r as Record<string, unknown>).profile);
  }
  const w = doc.workload;
  if (w !== null && typeof w === "object" && "trace" in w) (w as Record<string, unknown>).trace = rebase((w as Record<string, unknown>).trace);
  doc.timing = timing;
  if (frontendMs !== undefined) doc.frontend = { overhead_ms: frontendMs };
  return doc;
}

/** YAML with lists of plain values on one line (cudagraph_capture_sizes: [1, 2, 4, ...]). */
function yamlText(value: unknown): string {
  const doc = new Document(value);
  visit(doc, {
    Seq(_, node) {
      if (node.items.every((i) => isScalar(i))) node.flow = true;
    },
  });
  return doc.toString({ lineWidth: 0 });
}

/** A spec as written to `out`: JSON for a .json name, else YAML. */
export const specText = (out: string, doc: Record<string, unknown>): string => (out.endsWith(".json") ? `${JSON.stringify(doc, null, 2)}\n` : yamlText(doc));

const fmt = (v: number | null, digits = 2): string =>
  v === null ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const pct = (v: number | null): string => (v === null ? "-" : `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}%`);

const NAMES = { ttft: "TTFT", tpot: "TPOT", itl: "ITL", e2e: "E2E" } as const;

/** Fit part and held-out part side by side: measured, simulated and error of each. */
export function errorTable(fit: Comparison, held: Comparison | undefined): string {
  const rows: string[][] = [["latency (ms)", "", "fit: measured", "simulated", "error", "held out: measured", "simulated", "error"]];
  fit.latency.forEach((l, i) => {
    if (l.metric === "itl" && l.stat !== "mean") return;
    const h = held?.latency[i];
    rows.push([
      NAMES[l.metric],
      l.stat,
      fmt(l.measured),
      fmt(l.simulated),
      pct(l.error),
      fmt(h?.measured ?? null),
      fmt(h?.simulated ?? null),
      pct(h?.error ?? null),
    ]);
  });
  const names = ["req/s", "tok/s"];
  fit.throughput.forEach((t, i) => {
    const h = held?.throughput[i];
    rows.push([
      "throughput",
      names[i]!,
      fmt(t.measured),
      fmt(t.simulated),
      pct(t.error),
      fmt(h?.measured ?? null),
      fmt(h?.simulated ?? null),
      pct(h?.error ?? null),
    ]);
  });
  return textTable(rows, 2);
}

/** Each stage's measured, simulated and error of TTFT mean and p90, TPOT and E2E mean. */
export function stageTable(stages: readonly StageComparison[]): string {
  const rows: string[][] = [
    ["stage", "req/s", "part", "TTFT mean: measured", "simulated", "error", "TTFT p90 error", "TPOT: measured", "simulated", "error", "E2E mean error"],
  ];
  for (const s of stages) {
    rows.push([
      String(s.stage),
      fmt(s.rate),
      s.excluded ? "excluded" : "fit",
      fmt(s.ttftMean.measured),
      fmt(s.ttftMean.simulated),
      pct(s.ttftMean.error),
      pct(s.ttftP90.error),
      fmt(s.tpot.measured),
      fmt(s.tpot.simulated),
      pct(s.tpot.error),
      pct(s.e2eMean.error),
    ]);
  }
  return textTable(rows, 1);
}

function warningLines(warnings: readonly FitWarning[]): string[] {
  if (warnings.length === 0) return ["fit checks: the fit part's TPOT and TTFT means are within 10% and every fitted term is determined by the data"];
  return warnings.flatMap((w) => [`warning: ${w.message}`, ...(w.settle === undefined ? [] : [`  what would settle it: ${w.settle}`])]);
}

/** A measured file read: per-request, or stage summaries. */
type Measured = { readonly kind: "requests"; readonly run: MeasuredRun } | { readonly kind: "stages"; readonly run: StageRun };

function readMeasuredAny(file: string): Measured {
  const text = readText(file);
  return looksLikeStageSummary(text) ? { kind: "stages", run: parseStageSummary(text, file) } : { kind: "requests", run: parseMeasured(text, file) };
}

async function traceRecords(checked: CheckedSpec): Promise<{ records: TraceRecord[]; trace: string }> {
  const spec = checked.spec;
  const trace = spec.workload.trace;
  if (trace === undefined)
    throw new UsageError(
      `${checked.doc.file}: workload: kvsim calibrate needs a trace workload holding the measured requests (with their ids), not a synthetic one (stage summaries need none)`,
    );
  const format = spec.workload.format ?? "kvsim";
  const records: TraceRecord[] = [];
  const traceFile = openTrace(trace, format);
  try {
    for await (const r of readTrace(traceFile.lines, { format, file: trace, traceBlockSize: spec.workload.trace_block_size, speedup: spec.workload.speedup }))
      records.push(r);
  } finally {
    traceFile.close();
  }
  return { records, trace };
}

interface Parsed {
  readonly specs: readonly string[];
  readonly measured: readonly string[];
  readonly outs: readonly string[];
  readonly fraction: number;
  readonly maxEvaluations: number | undefined;
  readonly maxStageSeconds: number;
}

function parseOptions(opts: CalibrateOptions): Parsed {
  if (opts.format !== "table" && opts.format !== "json") throw new UsageError(`--format must be table or json, got "${opts.format}"`);
  const specs = list(opts.spec);
  const measured = list(opts.measured);
  const outs = list(opts.out);
  if (specs.length === 0) throw new UsageError("--spec <file> is required: the deployment and the measured run's workload");
  if (measured.length === 0) throw new UsageError("--measured <file> is required: the measured run");
  if (outs.length === 0) throw new UsageError("--out <file> is required: where to write the spec with the fitted timing");
  if (specs.length !== 1 && specs.length !== measured.length)
    throw new UsageError(
      `give one --spec for every --measured (paired in order) or one --spec for all: got ${specs.length} --spec and ${measured.length} --measured`,
    );
  if (outs.length !== specs.length)
    throw new UsageError(`give one --out for every --spec (paired in order): got ${outs.length} --out and ${specs.length} --spec`);
  const fraction = Number(opts.fitFraction);
  if (opts.fitFraction.trim() === "" || !(fraction > 0 && fraction <= 1))
    throw new UsageError(`--fit-fraction must be a number in (0, 1], got "${opts.fitFraction}"`);
  let maxEvaluations: number | undefined;
  if (opts.maxEvaluations !== undefined) {
    maxEvaluations = Number(opts.maxEvaluations);
    if (!Number.isSafeInteger(maxEvaluations) || maxEvaluations < 3 || maxEvaluations > 1000)
      throw new UsageError(`--max-evaluations must be a whole number from 3 to 1000, got "${opts.maxEvaluations}"`);
  }
  const maxStageSeconds = Number(opts.maxStageSeconds);
  if (opts.maxStageSeconds.trim() === "" || !(maxStageSeconds > 0))
    throw new UsageError(`--max-stage-seconds must be a positive number of seconds, got "${opts.maxStageSeconds}"`);
  return { specs, measured, outs, fraction, maxEvaluations, maxStageSeconds };
}

/**
 * Calibrate replaces the spec's timing, so any timing is a starting point: one that is neither
 * linear (whose `experts` term the fit keeps) nor roofline (fitted as such), or none at all, is
 * checked as a fixed stand-in, so `timing: { type: profile }` on a profile without forward_pass
 * tables (profile from-hf writes those) is not refused. The linear fit starts from a regression
 * on the measured run, never from the spec's timing.
 */
export function standInTiming(doc: LocatedDocument): SpecOverride[] {
  const value = doc.value;
  const timing = value !== null && typeof value === "object" ? (value as Record<string, unknown>).timing : undefined;
  const type = timing !== null && typeof timing === "object" ? (timing as Record<string, unknown>).type : undefined;
  if (type === "linear" || type === "roofline") return [];
  return [{ path: ["timing"], value: { type: "fixed", prefill_ms: 1, decode_ms: 1 }, source: `${doc.file} (timing, replaced by the fit)` }];
}

/** `kvsim calibrate`: fits the spec's timing (linear or roofline) to measured runs and writes the spec with it. */
export async function calibrateCommand(io: StdinIo & CliIo, opts: CalibrateOptions): Promise<number> {
  const p = parseOptions(opts);
  checkOutputs(
    p.outs.map((path) => ({ flag: "--out", path })),
    opts.force,
  );
  const started = performance.now();
  const checked: CheckedSpec[] = [];
  for (const s of p.specs) checked.push(await loadCheckedSpec(io, s, undefined, standInTiming));
  const specOf = (i: number) => checked[p.specs.length === 1 ? 0 : i]!;
  const measured = p.measured.map(readMeasuredAny);
  const roofline = checked.some((c) => c.spec.timing.type === "roofline");
  if (roofline && checked.some((c) => c.spec.timing.type !== "roofline"))
    throw new UsageError("every --spec must have the same timing type: roofline in all of them, or a single linear fit");
  if (!roofline) {
    if (measured.length > 1)
      throw new UsageError(
        "several --measured runs are fitted together only with timing: { type: roofline } (one calibration for every model and TP on a GPU); a linear fit takes one run",
      );
    const m = measured[0]!;
    if (m.kind === "stages")
      throw new UsageError(`${m.run.file}: stage summaries are fitted with timing: { type: roofline } (the linear fit needs per-request times)`);
    return linearCalibration(io, opts, p, checked[0]!, m.run, started);
  }
  return rooflineCalibration(io, opts, p, measured, specOf, checked, started);
}

async function linearCalibration(
  io: StdinIo & CliIo,
  opts: CalibrateOptions,
  p: Parsed,
  c: CheckedSpec,
  measured: MeasuredRun,
  started: number,
): Promise<number> {
  const { spec, profiles, doc } = c;
  const { records, trace } = await traceRecords(c);
  checkMeasuredAgainstWorkload(measured, records, trace);
  const fit = fitPart(measured, p.fraction);
  const nFit = fit.requests.length;
  const base = { spec, specFile: doc.file, profiles, records, traceFile: trace };
  const result = await fitTiming({
    ...base,
    fit,
    maxEvaluations: p.maxEvaluations ?? 60,
    onEvaluation: (e) => {
      if (io.stderrIsTTY) io.err(`\rcalibrate: replay ${e.evaluation}, best objective ${e.best.toPrecision(4)}   `);
    },
  });
  if (io.stderrIsTTY) io.err("\n");
  const frontend = result.frontendMs ?? (measured.format === "vllm-requests" ? null : undefined);
  const full = await replayWith(base, result.coefficients, undefined, frontend);
  if (full === undefined) throw new RunError("the replay with the fitted coefficients could not finish (run kvsim replay on the written spec to see why)");
  const sim = simulatedRun(full, undefined, clockStartFor(measured));
  const fitC = compareRuns(fit, sim);
  const heldC = nFit < measured.requests.length ? compareRuns(measured, sim, { kind: "from_request", index: nFit }) : undefined;
  const preemptions = full.reduce((a, r) => a + r.preemptions, 0);
  // Speculative decoding: the acceptance rate the measured chunks per step give (vllm-bench only).
  const draftK = (spec.decode?.engine?.speculative_config ?? spec.engine.speculative_config)?.num_speculative_tokens;
  const acceptance = draftK === undefined ? undefined : fitAcceptance(measured, draftK);
  const wallMs = performance.now() - started;
  const out = p.outs[0]!;
  writeOutputs(
    [{ flag: "--out", path: out, text: specText(out, writtenSpec(doc.value, doc.file, out, { type: "linear", ...result.coefficients }, result.frontendMs)) }],
    opts.force,
  );

  if (opts.format === "json") {
    io.out(
      `${JSON.stringify(
        {
          out,
          timing: "linear",
          measured: { file: measured.file, format: measured.format, requests: measured.requests.length, lacks: measured.lacks },
          fit_requests: nFit,
          held_out_requests: measured.requests.length - nFit,
          coefficients: result.coefficients,
          frontend_ms: result.frontendMs ?? null,
          floors: result.floors ?? null,
          regression_start: result.start,
          scale: result.scale,
          evaluations: result.evaluations,
          objective: result.objective,
          simulated_preemptions: preemptions,
          wall_time_ms: Math.round(wallMs),
          fit: fitC,
          held_out: heldC ?? null,
          speculative_acceptance:
            acceptance === undefined
              ? null
              : { num_speculative_tokens: draftK, mean_acceptance_length: acceptance.meanAcceptanceLength, acceptance_rate: acceptance.acceptanceRate },
          warnings: result.warnings,
        },
        null,
        2,
      )}\n`,
    );
    return 0;
  }
  const lines = [
    `kvsim calibrate: ${doc.file} against ${measured.file} (${measured.format}, ${measured.requests.length} requests)`,
    `fit part: the first ${nFit} requests by arrival (--fit-fraction ${p.fraction}); held out: ${measured.requests.length - nFit}`,
    `measured file lacks: ${measured.lacks.length === 0 ? "nothing" : measured.lacks.join("; ")}`,
    "",
    `fitted timing (linear), after ${result.evaluations} replays in ${(wallMs / 1000).toFixed(1)} s:`,
    textTable(
      [
        ...COEFFICIENT_NAMES.map((k) => [
          `  ${k}`,
          String(result.coefficients[k]),
          COEFFICIENT_UNITS[k],
          `(regression: ${result.start[k]}${result.floors !== undefined && k in result.floors ? `, floor ${result.floors[k as keyof typeof result.floors]}` : ""})`,
        ]),
        ...(result.coefficients.experts === undefined
          ? []
          : [
              [
                `  experts.all_experts_ms`,
                String(result.coefficients.experts.all_experts_ms),
                `ms per step touching all ${result.coefficients.experts.num_experts} experts (top-${result.coefficients.experts.num_experts_per_tok})`,
                `(regression: ${result.start.experts?.all_experts_ms ?? 0})`,
              ],
            ]),
        ...(result.frontendMs === undefined
          ? []
          : [["  frontend.overhead_ms", String(result.frontendMs), "ms from the client's arrival to the engine (TTFT on the client's clock)", ""]]),
      ],
      1,
    ),
    "",
    errorTable(fitC, heldC),
    "",
    `preemptions (simulated, whole run): ${preemptions}`,
    ...(acceptance === undefined
      ? []
      : [
          `speculative decoding: the measured run streamed ${acceptance.meanAcceptanceLength.toFixed(3)} tokens per step, acceptance_rate ${acceptance.acceptanceRate.toFixed(3)} with num_speculative_tokens ${draftK} (set it in engine.speculative_config and calibrate again)`,
        ]),
    ...warningLines(result.warnings),
    `wrote ${out}`,
  ];
  io.out(`${lines.join("\n")}\n`);
  return 0;
}

/** One run's results after the fit: the fit part and the held-out part (requests), or every stage whole (stages). */
interface RunReport {
  readonly label: string;
  readonly format: string;
  readonly spec: string;
  /** The front end it replayed with (fitted for client-clock runs). */
  readonly frontendMs: number | undefined;
  readonly lacks: readonly string[];
  readonly fitRequests?: number;
  readonly heldOutRequests?: number;
  readonly fit?: Comparison;
  readonly heldOut?: Comparison;
  readonly stages?: readonly StageComparison[];
}

async function rooflineCalibration(
  io: StdinIo & CliIo,
  opts: CalibrateOptions,
  p: Parsed,
  measured: readonly Measured[],
  specOf: (i: number) => CheckedSpec,
  checked: readonly CheckedSpec[],
  started: number,
): Promise<number> {
  const runs: CalibrationRun[] = [];
  // Per run: what the final replay needs (whole stages, or the whole measured run).
  const finals: {
    spec: Spec;
    specFile: string;
    profiles: ReadonlyMap<string, Profile>;
    records: readonly TraceRecord[];
    traceFile: string;
    m: Measured;
    nFit: number;
  }[] = [];
  for (let i = 0; i < measured.length; i++) {
    const m = measured[i]!;
    const c = specOf(i);
    const base = { label: m.run.file, spec: c.spec, specFile: c.doc.file, profiles: c.profiles };
    if (m.kind === "stages") {
      runs.push({ ...base, data: { kind: "stages", run: m.run, records: stageWorkload(m.run, { maxStageSeconds: p.maxStageSeconds }) } });
      const spec: Spec = { ...c.spec, workload: { trace: m.run.file, format: "kvsim", trace_block_size: 512, speedup: 1 } };
      finals.push({ spec, specFile: c.doc.file, profiles: c.profiles, records: stageWorkload(m.run), traceFile: m.run.file, m, nFit: 0 });
    } else {
      const { records, trace } = await traceRecords(c);
      checkMeasuredAgainstWorkload(m.run, records, trace);
      const fit = fitPart(m.run, p.fraction);
      runs.push({ ...base, data: { kind: "requests", fit, records, traceFile: trace } });
      finals.push({ spec: c.spec, specFile: c.doc.file, profiles: c.profiles, records, traceFile: trace, m, nFit: fit.requests.length });
    }
  }
  const result = await fitRoofline({
    runs,
    maxEvaluations: p.maxEvaluations ?? 150,
    onEvaluation: (e) => {
      if (io.stderrIsTTY) io.err(`\rcalibrate: replay ${e.evaluation} (of every run), best objective ${e.best.toPrecision(4)}   `);
    },
  });
  if (io.stderrIsTTY) io.err("\n");
  const timing = { type: "roofline", ...result.params };
  const reports: RunReport[] = [];
  for (const [i, f] of finals.entries()) {
    const own = result.frontendMs[i];
    const frontend = own ?? (f.m.kind === "requests" && f.m.run.format === "vllm-requests" ? null : undefined);
    const records = await replayTiming(f, { type: "roofline", ...result.params }, undefined, frontend);
    if (records === undefined)
      throw new RunError(`the replay of ${f.m.run.file} with the fitted roofline could not finish (run kvsim replay on the written spec to see why)`);
    if (f.m.kind === "stages") {
      reports.push({
        label: f.m.run.file,
        format: "stage-summary",
        spec: f.specFile,
        frontendMs: own,
        lacks: STAGE_SUMMARY_LACKS,
        stages: stageMetrics(records, f.m.run),
      });
    } else {
      const run = f.m.run;
      const sim = simulatedRun(records, undefined, clockStartFor(run));
      const fit = compareRuns(fitPart(run, p.fraction), sim);
      const heldOut = f.nFit < run.requests.length ? compareRuns(run, sim, { kind: "from_request", index: f.nFit }) : undefined;
      reports.push({
        label: run.file,
        format: run.format,
        spec: f.specFile,
        frontendMs: own,
        lacks: run.lacks,
        fitRequests: f.nFit,
        heldOutRequests: run.requests.length - f.nFit,
        fit,
        ...(heldOut === undefined ? {} : { heldOut }),
      });
    }
  }
  const wallMs = performance.now() - started;
  writeOutputs(
    checked.map((c, i) => {
      // A spec serving every run takes their (shared) front end; a paired one its own run's.
      const frontendMs = checked.length === 1 ? result.frontendMs.find((v) => v !== undefined) : result.frontendMs[i];
      return { flag: "--out", path: p.outs[i]!, text: specText(p.outs[i]!, writtenSpec(c.doc.value, c.doc.file, p.outs[i]!, timing, frontendMs)) };
    }),
    opts.force,
  );

  if (opts.format === "json") {
    io.out(
      `${JSON.stringify(
        {
          out: p.outs,
          timing: "roofline",
          params: result.params,
          start: result.start,
          fitted: result.fitted,
          evaluations: result.evaluations,
          objective: result.objective,
          wall_time_ms: Math.round(wallMs),
          runs: reports.map((r) => ({
            measured: r.label,
            format: r.format,
            spec: r.spec,
            frontend_ms: r.frontendMs ?? null,
            lacks: r.lacks,
            ...(r.stages === undefined
              ? { fit_requests: r.fitRequests, held_out_requests: r.heldOutRequests, fit: r.fit, held_out: r.heldOut ?? null }
              : { stages: r.stages }),
          })),
          warnings: result.warnings,
        },
        null,
        2,
      )}\n`,
    );
    return 0;
  }
  const lines = [
    `kvsim calibrate: the roofline on ${measured.length} measured run${measured.length === 1 ? "" : "s"}, fitted together`,
    `fitted roofline after ${result.evaluations} replays of every run in ${(wallMs / 1000).toFixed(1)} s (searched: ${result.fitted.join(", ")}):`,
    textTable(
      [
        ...Object.entries(result.params).map(([k, v]) => [
          `  ${k}`,
          String(v),
          ROOFLINE_UNITS[k] ?? "",
          `(start: ${result.start[k as keyof typeof result.start]})`,
        ]),
      ],
      1,
    ),
  ];
  for (const r of reports) {
    const clock = r.frontendMs === undefined ? "" : `; front end fitted: frontend.overhead_ms ${r.frontendMs} (TTFT on the client's clock)`;
    lines.push("", `${r.label} (${r.format}; spec ${r.spec}${clock})`, `  lacks: ${r.lacks.join("; ")}`);
    if (r.stages !== undefined) {
      lines.push("  every stage replayed whole (the fit saw the first --max-stage-seconds of each):", stageTable(r.stages));
    } else if (r.fit !== undefined) {
      lines.push(`  fit part: the first ${r.fitRequests} requests by arrival; held out: ${r.heldOutRequests}`, errorTable(r.fit, r.heldOut));
    }
  }
  lines.push("", ...warningLines(result.warnings), `wrote ${p.outs.join(", ")}`);
  io.out(`${lines.join("\n")}\n`);
  return 0;
}

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

export const registerCalibrate: RegisterCommand = (program, ctx) => {
  program
    .command("calibrate")
    .description(
      "Fit the spec's step timing to measured vLLM runs: linear (one per-request run) or roofline (its efficiencies and overheads, one or more runs of one GPU together). Fits on the first --fit-fraction of each run's requests by arrival (stage summaries: on every stage without failures), writes each spec with the fitted timing inlined, and prints the errors on the fit and held-out parts and any warning about the fit.",
    )
    .option(
      "--spec <file>",
      "the deployment and the measured run's workload (a trace whose request ids match the measured file; stage summaries bring their own); repeat it to pair one with each --measured, in order",
      collect,
    )
    .option(
      "--measured <file>",
      "a measured run: vLLM per-request stats (requests.jsonl), vllm bench serve --save-result --save-detailed JSON, kvsim replay --requests records, or stage summaries (inference-perf per-stage JSON); repeatable with the roofline",
      collect,
    )
    .option(
      "--out <file>",
      "where to write the spec with the fitted timing (YAML, or JSON for a .json name), one per --spec; relative paths are rebased",
      collect,
    )
    .option("--fit-fraction <F>", "the share of the requests, by arrival, to fit on", "0.5")
    .option("--max-evaluations <N>", "replays the search may spend (default 60 for linear, 150 for the roofline; each roofline replay runs every measured run)")
    .option("--max-stage-seconds <S>", "stage summaries: the fit replays only the first S seconds of each stage (the final tables replay them whole)", "120")
    .option("--format <format>", "table or json", "table")
    .option("--force", "overwrite an existing --out file", false)
    .addHelpText(
      "after",
      `
Linear: a non-negative regression of each fit request's TPOT on the load its timestamps imply
gives the coefficients' shape; Nelder-Mead over three scale factors (step and sequence terms, the
KV term, prompt terms) then replays the workload and minimises the squared relative errors of
TPOT, TTFT and E2E (mean, p90) on the fit part. When the profile has model_shape and engine.gpu a
datasheet, no coefficient goes below its physical floor (weights read once per step, a prompt
token's GEMMs and a KV token's read at the GPU's peaks). A spec whose timing is linear with
experts: { num_experts, num_experts_per_tok } also gets experts.all_experts_ms fitted.

Roofline (timing: { type: roofline }): Nelder-Mead over the log of the efficiencies (capped at
1) and overheads, seeded from the spec's values or the shipped defaults, over every --measured
run together (each replayed with its own --spec): one calibration for every model and TP on a GPU.

Client clock: vllm bench JSON and stage summaries time TTFT at the client; for them the front
end's overhead (spec frontend.overhead_ms) is fitted too and written. vLLM's per-request stats
are on the engine's clock and replay without it.

Warnings: when the fit part's own TPOT or TTFT mean is missed by more than 10%, or the data
cannot tell two terms apart (or determine one), calibrate says so and what data would settle it;
--format json carries them as "warnings".

Measured formats and what each lacks:
  vLLM per-request stats  ${MEASURED_FORMAT_LACKS["vllm-requests"].join("; ")}
  vllm bench JSON         ${MEASURED_FORMAT_LACKS["vllm-bench"].join("; ")}
  kvsim records           ${MEASURED_FORMAT_LACKS["kvsim-requests"].join("; ")}
  stage summaries         ${STAGE_SUMMARY_LACKS.join("; ")}`,
    )
    .action(ctx.run((opts: CalibrateOptions) => calibrateCommand(ctx.io, opts)));
};
