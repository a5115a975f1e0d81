// What kvsim calibrate fits: its options checked, the measured files read, and the spec's trace.
import { looksLikeStageSummary, parseMeasured, parseStageSummary, type MeasuredRun, type StageRun } from "@kvsim/calibrate";
import { readTrace, type TraceRecord } from "@kvsim/profile-schema";
import { readText, UsageError } from "../io.js";
import { openTrace } from "../lines.js";
import type { CheckedSpec } from "../spec-check.js";
import type { CalibrateOptions } from "./calibrate.js";

const list = (v: string | readonly string[] | undefined): readonly string[] => (v === undefined ? [] : typeof v === "string" ? [v] : v);
/** A measured file read: per-request, or stage summaries. */
export type Measured = { readonly kind: "requests"; readonly run: MeasuredRun } | { readonly kind: "stages"; readonly run: StageRun };

export function readMeasuredAny(file: string): Measured {
  const text = readText(file);
  return looksLikeStageSummary(text) ? { kind: "stages", run: parseStageSummary(text, file) } : { kind: "requests", run: parseMeasured(text, file) };
}

export async function traceRecords(checked: CheckedSpec): Promise<{ records: TraceRecord[]; trace: string }> {
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

export interface Parsed {
  readonly specs: readonly string[];
  readonly measured: readonly string[];
  readonly outs: readonly string[];
  readonly fraction: number;
  readonly maxEvaluations: number | undefined;
  readonly maxStageSeconds: number;
}

export function parseOptions(opts: CalibrateOptions): Parsed {
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
