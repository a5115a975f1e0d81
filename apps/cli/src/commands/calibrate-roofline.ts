// kvsim calibrate with timing: { type: roofline }: one fit over every measured run, each replayed
// with its own spec (several models and TPs on one GPU).
import { performance } from "node:perf_hooks";
import {
  checkMeasuredAgainstWorkload,
  clockStartFor,
  compareRuns,
  fitPart,
  fitRoofline,
  replayTiming,
  simulatedRun,
  stageMetrics,
  stageWorkload,
  STAGE_SUMMARY_LACKS,
  type CalibrationRun,
  type Comparison,
  type StageComparison,
} from "@kvsim/calibrate";
import type { Profile, Spec, TraceRecord } from "@kvsim/profile-schema";
import { RunError, writeOutputs, type CliIo } from "../io.js";
import type { CheckedSpec } from "../spec-check.js";
import type { StdinIo } from "../spec-input.js";
import { textTable } from "../text-table.js";
import { writtenSpec, specText, errorTable, stageTable, warningLines } from "./calibrate-output.js";
import { type Measured, traceRecords, type Parsed } from "./calibrate-runs.js";
import type { CalibrateOptions } from "./calibrate.js";

const ROOFLINE_UNITS: Readonly<Record<string, string>> = {
  compute_efficiency: "share of peak tensor FLOPs (dense GEMMs)",
  attention_efficiency: "share of peak FLOPs (prefill attention)",
  memory_efficiency: "share of HBM bandwidth",
  moe_efficiency: "fused-MoE kernels relative to dense GEMMs",
  link_efficiency: "share of the intra-node link",
  pcie_collective_gbps: "GB/s NCCL reaches over PCIe",
  step_overhead_ms: "ms per step",
  layer_overhead_us: "µs per layer of a step with prompt rows",
  per_sequence_us: "µs per scheduled row",
};
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

export async function rooflineCalibration(
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
