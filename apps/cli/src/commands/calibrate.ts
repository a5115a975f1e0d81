import { performance } from "node:perf_hooks";
import {
  checkMeasuredAgainstWorkload,
  clockStartFor,
  compareRuns,
  COEFFICIENT_NAMES,
  fitPart,
  fitTiming,
  MEASURED_FORMAT_LACKS,
  replayWith,
  fitAcceptance,
  simulatedRun,
  STAGE_SUMMARY_LACKS,
  type MeasuredRun,
  type ScalarCoefficient,
} from "@kvsim/calibrate";
import type { LocatedDocument } from "@kvsim/profile-schema";
import type { SpecOverride } from "@kvsim/sweep";
import { checkOutputs, RunError, UsageError, writeOutputs, type CliIo } from "../io.js";
import { loadCheckedSpec, type CheckedSpec } from "../spec-check.js";
import type { StdinIo } from "../spec-input.js";
import type { RegisterCommand } from "./index.js";
import { textTable } from "../text-table.js";
import { specText, writtenSpec, errorTable, warningLines } from "./calibrate-output.js";
import { rooflineCalibration } from "./calibrate-roofline.js";
import { parseOptions, readMeasuredAny, type Parsed, traceRecords } from "./calibrate-runs.js";

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
