import { performance } from "node:perf_hooks";
import { dirname, isAbsolute, relative, resolve } from "node:path";
import { Document, isScalar, visit } from "yaml";
import {
  checkMeasuredAgainstWorkload,
  clockStartFor,
  compareRuns,
  COEFFICIENT_NAMES,
  fitPart,
  fitTiming,
  MEASURED_FORMAT_LACKS,
  replayWith,
  simulatedRun,
  type Comparison,
  type LinearCoefficients,
  type ScalarCoefficient,
} from "@kvsim/calibrate";
import { readTrace, type TraceRecord } from "@kvsim/profile-schema";
import { checkOutputs, RunError, UsageError, writeOutputs, type CliIo } from "../io.js";
import { openTrace } from "../lines.js";
import { loadCheckedSpec } from "../spec-check.js";
import type { StdinIo } from "../spec-input.js";
import type { RegisterCommand } from "./index.js";
import { readMeasured } from "./compare.js";

export interface CalibrateOptions {
  readonly spec?: string;
  readonly measured?: string;
  readonly out?: string;
  readonly fitFraction: string;
  readonly maxEvaluations: string;
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

/** The spec's raw document with `timing` replaced and relative paths rebased onto the output's folder. */
function writtenSpec(raw: unknown, specFile: string, outFile: string, c: LinearCoefficients): Record<string, unknown> {
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
  doc.timing = { type: "linear", ...c };
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

const fmt = (v: number | null, digits = 2): string => (v === null ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }));
const pct = (v: number | null): string => (v === null ? "-" : `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}%`);

function table(rows: readonly (readonly string[])[], left = 1): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows.map((r) => r.map((c, i) => (i < left ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ").trimEnd()).join("\n");
}

const NAMES = { ttft: "TTFT", tpot: "TPOT", itl: "ITL", e2e: "E2E" } as const;

/** Fit part and held-out part side by side: measured, simulated and error of each. */
export function errorTable(fit: Comparison, held: Comparison | undefined): string {
  const rows: string[][] = [["latency (ms)", "", "fit: measured", "simulated", "error", "held out: measured", "simulated", "error"]];
  fit.latency.forEach((l, i) => {
    if (l.metric === "itl" && l.stat !== "mean") return;
    const h = held?.latency[i];
    rows.push([NAMES[l.metric], l.stat, fmt(l.measured), fmt(l.simulated), pct(l.error), fmt(h?.measured ?? null), fmt(h?.simulated ?? null), pct(h?.error ?? null)]);
  });
  const names = ["req/s", "tok/s"];
  fit.throughput.forEach((t, i) => {
    const h = held?.throughput[i];
    rows.push(["throughput", names[i]!, fmt(t.measured), fmt(t.simulated), pct(t.error), fmt(h?.measured ?? null), fmt(h?.simulated ?? null), pct(h?.error ?? null)]);
  });
  return table(rows, 2);
}

/** `kvsim calibrate`: fits the linear timing to a measured run and writes the spec with it. */
export async function calibrateCommand(io: StdinIo & CliIo, opts: CalibrateOptions): Promise<number> {
  if (opts.format !== "table" && opts.format !== "json") throw new UsageError(`--format must be table or json, got "${opts.format}"`);
  if (opts.spec === undefined) throw new UsageError("--spec <file> is required: the deployment and the measured run's workload");
  if (opts.measured === undefined) throw new UsageError("--measured <file> is required: the measured run");
  if (opts.out === undefined) throw new UsageError("--out <file> is required: where to write the spec with the fitted timing");
  const fraction = Number(opts.fitFraction);
  if (opts.fitFraction.trim() === "" || !(fraction > 0 && fraction <= 1)) throw new UsageError(`--fit-fraction must be a number in (0, 1], got "${opts.fitFraction}"`);
  const maxEvaluations = Number(opts.maxEvaluations);
  if (!Number.isSafeInteger(maxEvaluations) || maxEvaluations < 3 || maxEvaluations > 1000) throw new UsageError(`--max-evaluations must be a whole number from 3 to 1000, got "${opts.maxEvaluations}"`);
  checkOutputs([{ flag: "--out", path: opts.out }], opts.force);

  const started = performance.now();
  const { spec, profiles, doc } = await loadCheckedSpec(io, opts.spec, undefined);
  const trace = spec.workload.trace;
  if (trace === undefined) throw new UsageError(`${doc.file}: workload: kvsim calibrate needs a trace workload holding the measured requests (with their ids), not a synthetic one`);
  const format = spec.workload.format ?? "kvsim";
  const records: TraceRecord[] = [];
  const traceFile = openTrace(trace, format);
  try {
    for await (const r of readTrace(traceFile.lines, { format, file: trace, traceBlockSize: spec.workload.trace_block_size, speedup: spec.workload.speedup })) records.push(r);
  } finally {
    traceFile.close();
  }
  const measured = readMeasured(opts.measured);
  checkMeasuredAgainstWorkload(measured, records, trace);
  const fit = fitPart(measured, fraction);
  const nFit = fit.requests.length;

  const base = { spec, specFile: doc.file, profiles, records, traceFile: trace };
  const result = await fitTiming({
    ...base,
    fit,
    maxEvaluations,
    onEvaluation: (e) => {
      if (io.stderrIsTTY) io.err(`\rcalibrate: replay ${e.evaluation}, best objective ${e.best.toPrecision(4)}   `);
    },
  });
  if (io.stderrIsTTY) io.err("\n");
  const full = await replayWith(base, result.coefficients);
  if (full === undefined) throw new RunError("the replay with the fitted coefficients could not finish (run kvsim replay on the written spec to see why)");
  const sim = simulatedRun(full, undefined, clockStartFor(measured));
  const fitC = compareRuns(fit, sim);
  const heldC = nFit < measured.requests.length ? compareRuns(measured, sim, { kind: "from_request", index: nFit }) : undefined;
  const preemptions = full.reduce((a, r) => a + r.preemptions, 0);
  const wallMs = performance.now() - started;

  const out = writtenSpec(doc.value, doc.file, opts.out, result.coefficients);
  const text = opts.out.endsWith(".json") ? `${JSON.stringify(out, null, 2)}\n` : yamlText(out);
  writeOutputs([{ flag: "--out", path: opts.out, text }], opts.force);

  if (opts.format === "json") {
    io.out(
      `${JSON.stringify(
        {
          out: opts.out,
          measured: { file: measured.file, format: measured.format, requests: measured.requests.length, lacks: measured.lacks },
          fit_requests: nFit,
          held_out_requests: measured.requests.length - nFit,
          coefficients: result.coefficients,
          regression_start: result.start,
          scale: result.scale,
          evaluations: result.evaluations,
          objective: result.objective,
          simulated_preemptions: preemptions,
          wall_time_ms: Math.round(wallMs),
          fit: fitC,
          held_out: heldC ?? null,
        },
        null,
        2,
      )}\n`,
    );
    return 0;
  }
  const lines = [
    `kvsim calibrate: ${doc.file} against ${measured.file} (${measured.format}, ${measured.requests.length} requests)`,
    `fit part: the first ${nFit} requests by arrival (--fit-fraction ${fraction}); held out: ${measured.requests.length - nFit}`,
    `measured file lacks: ${measured.lacks.length === 0 ? "nothing" : measured.lacks.join("; ")}`,
    "",
    `fitted timing (linear), after ${result.evaluations} replays in ${(wallMs / 1000).toFixed(1)} s:`,
    table(
      [
        ...COEFFICIENT_NAMES.map((k) => [`  ${k}`, String(result.coefficients[k]), COEFFICIENT_UNITS[k], `(regression: ${result.start[k]})`]),
        ...(result.coefficients.experts === undefined
          ? []
          : [[`  experts.all_experts_ms`, String(result.coefficients.experts.all_experts_ms), `ms per step touching all ${result.coefficients.experts.num_experts} experts (top-${result.coefficients.experts.num_experts_per_tok})`, `(regression: ${result.start.experts?.all_experts_ms ?? 0})`]]),
      ],
      1,
    ),
    "",
    errorTable(fitC, heldC),
    "",
    `preemptions (simulated, whole run): ${preemptions}`,
    `wrote ${opts.out}`,
  ];
  io.out(`${lines.join("\n")}\n`);
  return 0;
}

export const registerCalibrate: RegisterCommand = (program, ctx) => {
  program
    .command("calibrate")
    .description(
      "Fit the linear step-time model to a measured vLLM run: fits on the first --fit-fraction of the requests by arrival (never looking at the rest), writes the spec with the fitted timing inlined, and prints the coefficients and the errors on the fit and held-out parts.",
    )
    .option("--spec <file>", "the deployment and the measured run's workload (a trace whose request ids match the measured file)")
    .option("--measured <file>", "the measured run: vLLM per-request stats (requests.jsonl), vllm bench serve --save-result --save-detailed JSON, or kvsim replay --requests records")
    .option("--out <file>", "where to write the spec with the fitted timing (YAML, or JSON for a .json name); relative paths are rebased")
    .option("--fit-fraction <F>", "the share of the requests, by arrival, to fit on", "0.5")
    .option("--max-evaluations <N>", "replays the refinement may spend", "60")
    .option("--format <format>", "table or json", "table")
    .option("--force", "overwrite an existing --out file", false)
    .addHelpText(
      "after",
      `
Method: a non-negative regression of each fit request's TPOT on the load its timestamps imply
gives the coefficients' shape; Nelder-Mead over three scale factors (step and sequence terms, the
KV term, prompt terms) then replays the workload and minimises the squared relative errors of
TPOT, TTFT and E2E (mean, p90) on the fit part. Deterministic. A spec whose timing is linear
with experts: { num_experts, num_experts_per_tok } (a MoE model's routing) also gets
experts.all_experts_ms fitted (the expert weight loading, saturating once all are touched).

Measured formats and what each lacks:
  vLLM per-request stats  ${MEASURED_FORMAT_LACKS["vllm-requests"].join("; ")}
  vllm bench JSON         ${MEASURED_FORMAT_LACKS["vllm-bench"].join("; ")}
  kvsim records           ${MEASURED_FORMAT_LACKS["kvsim-requests"].join("; ")}`,
    )
    .action(ctx.run((opts: CalibrateOptions) => calibrateCommand(ctx.io, opts)));
};
