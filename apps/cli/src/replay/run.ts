import { extname } from "node:path";
import { performance } from "node:perf_hooks";
import { stringify as csvStringify } from "csv-stringify/sync";
import { ArrivalSpan, arrivalSpanWarning, readTrace, RouterSchema, type Profile, type Router, type Spec } from "@kvsim/profile-schema";
import {
  MAX_SERIES_VALUES,
  runReplay,
  timeSeriesRecords,
  timeSeriesTable,
  TooManySamples,
  withWallTime,
  type ReplayReport,
  type ReplayResult,
  type RequestRecord,
  type TimeSeries,
} from "@kvsim/replay-engine";
import { renderReplayHtml, type ChartAssets } from "@kvsim/report-html";
import { chartAssets } from "../html-assets.js";
import { checkOutputs, numberOption, RunError, UsageError, writeOutputs } from "../io.js";
import { openTrace } from "../lines.js";
import { loadCheckedSpec, shown } from "../spec-check.js";
import { documentText, parseSetFlags, type StdinIo } from "../spec-input.js";
import { defaultSpecPath } from "./examples.js";
import { createProgress, traceFraction } from "./progress.js";
import { runRecord, type RunRecord } from "./run-record.js";
import { formatReportTable, type RunSummary } from "./table.js";

export interface ReplayOptions {
  readonly spec?: string;
  readonly format: string;
  readonly report?: string;
  readonly requests?: string;
  readonly timeseries?: string;
  readonly html?: string;
  readonly sampleMs?: string;
  readonly force: boolean;
  /** No progress bar. */
  readonly quiet?: boolean;
  /** `--percentiles 50,90,95,99`: the percentiles reported (JSON keys p<N>_*_ms) and shown. */
  readonly percentiles?: string;
  /** `--set path=value` overrides, in order. */
  readonly set?: readonly string[];
}

const int = (v: number): string => v.toLocaleString("en-US", { maximumFractionDigits: 0 });
const workers = (n: number, role = ""): string => `${int(n)} ${role}worker${n === 1 ? "" : "s"}`;

/** The topology in words: "aggregated, 2 workers", "disaggregated, 2 prefill + 2 decode workers". */
function describeTopology(t: Spec["topology"]): string {
  if (t.kind === "aggregated") return `aggregated, ${workers(t.workers)}`;
  const { prefill: p, decode: d } = { prefill: t.prefill.workers, decode: t.decode.workers };
  // "2 prefill + 2 decode workers" reads well only when both are plural.
  return p > 1 && d > 1 ? `disaggregated, ${int(p)} prefill + ${workers(d, "decode ")}` : `disaggregated, ${workers(p, "prefill ")} + ${workers(d, "decode ")}`;
}

function describe(spec: Spec, profiles: ReadonlyMap<string, Profile>): RunSummary {
  // Data-parallel ranks per worker: "aggregated, 1 worker x 2 DP ranks (expert parallel)", or per P/D role.
  const dp = (role?: "prefill" | "decode") => {
    const e = { ...spec.engine, ...(role === undefined ? {} : spec[role]?.engine) };
    const d = e.data_parallel_size ?? 1;
    return d === 1 ? "" : `${role === undefined ? "" : `${role} `}x ${d} DP ranks${e.enable_expert_parallel === true ? " (expert parallel)" : ""}`;
  };
  const layout = spec.topology.kind === "aggregated" ? [dp()] : [dp("prefill"), dp("decode")];
  const ranks = layout.filter((x) => x !== "").join(", ");
  const topology = describeTopology(spec.topology) + (ranks === "" ? "" : spec.topology.kind === "aggregated" ? ` ${ranks}` : `, ${ranks}`);
  const p = typeof spec.profile === "string" ? profiles.get(spec.profile) : spec.profile;
  const profile = p === undefined ? "profile ?" : `${p.model} (vLLM ${p.vllm_version}, TP ${p.tensor_parallel_size})`;
  const w = spec.workload;
  const workload =
    w.synthetic !== undefined
      ? `synthetic, ${int(w.synthetic.requests)} requests of ${int(w.synthetic.input_tokens)} + ${int(w.synthetic.output_tokens)} tokens`
      : `${w.format ?? "?"} trace ${w.trace === undefined ? "?" : shown(w.trace)}${w.speedup === 1 ? "" : `, speedup ${w.speedup}`}`;
  return { topology, profile, router: describeRouter(spec.router), workload, timingNote: describeTiming(spec, profiles) };
}

/** The roofline's caveat: datasheet figures and shipped efficiencies unless the spec sets them. */
function rooflineNote(spec: Spec, t: Extract<Spec["timing"], { type: "roofline" }>): string {
  const gpu = spec.engine.gpu;
  const name = gpu === undefined ? "?" : typeof gpu === "string" ? gpu : gpu.name;
  const set = Object.keys(t).filter((k) => k !== "type");
  const how =
    set.length === 0
      ? "the shipped efficiencies, not calibrated on this deployment (README: Predict a GPU nobody measured, for their errors on real runs; kvsim calibrate fits them to a run of yours)"
      : `the spec's ${set.join(", ")} and shipped values for the rest`;
  return `roofline on ${name}'s datasheet with ${how}`;
}

/**
 * What the step times rest on, in one line for the replay table and the HTML report's header: the
 * timing model and how far to trust it (an uncalibrated roofline, illustrative forward-pass tables).
 */
export function describeTiming(spec: Spec, profiles: ReadonlyMap<string, Profile>): string {
  const t = spec.timing;
  const p = typeof spec.profile === "string" ? profiles.get(spec.profile) : spec.profile;
  switch (t.type) {
    case "roofline":
      return rooflineNote(spec, t);
    case "profile": {
      // The provenance's first clause ("Illustrative, not measured"), or its opening words.
      const provenance = p?.forward_pass?.provenance;
      const lead = provenance === undefined ? undefined : (/^[^:.]{1,80}/.exec(provenance)?.[0] ?? provenance.slice(0, 80));
      return `the profile's forward-pass tables (interpolated; outside the grid: ${t.outside_grid})${lead === undefined ? "" : `; their provenance: ${lead}${lead.length < provenance!.length ? " ..." : ""}`}`;
    }
    case "linear":
      return `the linear step formula (step ${t.step_ms} ms, ${t.per_kv_token_us} us per KV token, ${t.per_prompt_token_us} us per prompt token; kvsim calibrate fits it to a measured run)`;
    case "fixed":
      return `fixed pass times (prefill ${t.prefill_ms} ms, decode ${t.decode_ms} ms): illustrative, not a model of any GPU`;
    case "polynomial":
      return "the upstream simulator's polynomial, not calibrated on this deployment";
  }
}

/** A bandwidth in bytes per second as a spec writes it: "50 GB/s (400 Gbit/s)". */
const bandwidthText = (bytesPerSecond: number): string => {
  const g = (v: number) => Number(v.toPrecision(6)).toLocaleString("en-US", { maximumFractionDigits: 6, useGrouping: false });
  return `${g(bytesPerSecond / 1e9)} GB/s (${g((bytesPerSecond * 8) / 1e9)} Gbit/s)`;
};

/**
 * The resolved spec as the HTML report shows it: every default filled in, but bandwidths with
 * their units (`bandwidth: "50 GB/s (400 Gbit/s)"`) instead of the internal `bandwidth_gbps` and
 * bytes per second.
 */
export function specForDisplay(spec: Spec): unknown {
  const { bandwidth_gbps: gbps, network, ...rest } = spec.kv_transfer;
  const shownNetwork =
    network === undefined
      ? undefined
      : {
          ...network,
          nic: { send: bandwidthText(network.nic.send), receive: bandwidthText(network.nic.receive) },
          ...(network.nodes === undefined ? {} : { nodes: { ...network.nodes, intra_node_bandwidth: bandwidthText(network.nodes.intra_node_bandwidth) } }),
        };
  return {
    ...spec,
    kv_transfer: {
      ...(gbps === undefined ? {} : { bandwidth: bandwidthText(gbps * 1e9) }),
      ...rest,
      ...(shownNetwork === undefined ? {} : { network: shownNetwork }),
    },
  };
}

/** The router for a title: its policy, then each setting that differs from its default. */
function describeRouter(router: Router): string {
  const defaults = RouterSchema.parse(router.policy) as Record<string, unknown>;
  const changed = Object.entries(router).filter(([k, v]) => k !== "policy" && defaults[k] !== v);
  return changed.length === 0 ? router.policy : `${router.policy} (${changed.map(([k, v]) => `${k} ${String(v)}`).join(", ")})`;
}

/**
 * `kvsim replay`: reads the spec (the bundled P/D example without --spec), its profiles and its
 * trace (streamed line by line), replays it, and prints the report. Output files are checked
 * before the run and written atomically only after it succeeded.
 */
export async function replayCommand(io: StdinIo, opts: ReplayOptions): Promise<number> {
  if (opts.format !== "table" && opts.format !== "json") throw new UsageError(`--format must be table or json, got "${opts.format}"`);
  const percentiles = opts.percentiles === undefined ? undefined : parsePercentiles(opts.percentiles);
  const seriesFormat = opts.timeseries === undefined ? undefined : timeSeriesFormat(opts.timeseries);
  // Below a microsecond or beyond the virtual time limit an interval samples nothing meaningful.
  const sampleMs = opts.sampleMs === undefined ? undefined : numberOption("--sample-ms", opts.sampleMs, { min: 0.001, max: 1e13, maxText: "10^13" });
  if (sampleMs !== undefined && opts.timeseries === undefined && opts.html === undefined)
    throw new UsageError("--sample-ms needs --timeseries or --html (it sets the interval of the time series)");
  // Every output path is checked before any work; after the run they are written all or nothing.
  checkOutputs(
    [
      { flag: "--report", path: opts.report },
      { flag: "--requests", path: opts.requests },
      { flag: "--timeseries", path: opts.timeseries },
      { flag: "--html", path: opts.html },
    ],
    opts.force,
  );
  // The charting library is read before the run: a broken install fails before any work.
  const assets = opts.html === undefined ? undefined : chartAssets();

  // The checks validate runs, with its messages: what validate accepts, the replay starts.
  const { spec, profiles, doc } = await loadCheckedSpec(io, opts.spec ?? defaultSpecPath(), opts.set);
  const specFile = doc.file;

  const trace = spec.workload.trace;
  const traceFile = trace === undefined ? undefined : openTrace(trace, spec.workload.format ?? "kvsim");
  const synthetic = spec.workload.synthetic?.requests;
  const progress = createProgress(io, {
    quiet: opts.quiet === true,
    ...(synthetic === undefined ? { trace: traceFile !== undefined } : { totalRequests: synthetic }),
  });
  const fraction = (terminal: number) =>
    synthetic !== undefined
      ? terminal / synthetic
      : traceFile !== undefined
        ? traceFraction(traceFile.bytesRead(), traceFile.size, arrivals.count, terminal)
        : 0;
  const started = performance.now();
  // Counts the trace's arrivals as they stream past: times likely in the wrong unit get a warning.
  const arrivals = new ArrivalSpan();
  let terminal = 0;
  // The trace is parsed as the replay pulls it: the progress line counts the requests read.
  async function* reporting<T>(records: AsyncIterable<T>): AsyncGenerator<T> {
    for await (const r of records) {
      if (progress.active) progress.read(arrivals.count, fraction(terminal));
      yield r;
    }
  }
  let result;
  try {
    result = await runReplay({
      spec,
      specFile,
      profiles,
      ...(percentiles === undefined ? {} : { percentiles }),
      ...(seriesFormat === undefined && opts.html === undefined ? {} : { timeseries: sampleMs === undefined ? {} : { sampleMs } }),
      ...(opts.html === undefined ? {} : { quantiles: HTML_QUANTILES }),
      ...(traceFile === undefined || trace === undefined
        ? {}
        : {
            records: reporting(
              arrivals.watch(
                readTrace(traceFile.lines, {
                  format: spec.workload.format ?? "kvsim",
                  file: trace,
                  traceBlockSize: spec.workload.trace_block_size,
                  speedup: spec.workload.speedup,
                }),
              ),
            ),
            traceFile: trace,
          }),
      // Drawn after every finished request (the engine's default is every 256: a small run sat at 0%).
      ...(progress.active ? { progressEvery: 1 } : {}),
      onProgress: (p) => {
        terminal = p.terminal;
        progress.update(fraction(p.terminal), p.terminal, p.nowMs);
      },
    });
  } catch (e) {
    if (e instanceof TooManySamples) {
      throw new UsageError(
        `--sample-ms ${opts.sampleMs}: the run had ${e.samples.toLocaleString("en-US")} samples of ${e.columns} values at ${e.reachedMs} ms and was not over; kvsim keeps at most ${MAX_SERIES_VALUES.toLocaleString("en-US")} values of a time series: give a longer interval, or leave --sample-ms out (the interval then adapts to the run)`,
      );
    }
    throw e;
  } finally {
    progress.stop();
    traceFile?.close();
  }
  const wallMs = performance.now() - started;
  const spanWarning = trace === undefined ? undefined : arrivalSpanWarning(spec.workload.format ?? "kvsim", arrivals.count, arrivals.spanMs);
  if (spanWarning !== undefined) io.err(`warning: ${shown(trace!)}: ${spanWarning}\n`);
  if (!result.ok) {
    const stuck = result.stuck.map((s) => `\n  request ${s.request_id}: ${s.where} (${s.why})`).join("");
    throw new RunError(`${result.reason}${stuck}`);
  }
  // The run record leads the report; it is outside the digest, like every key added after v1.
  const run: RunRecord = runRecord({
    spec,
    specPath: shown(specFile),
    specText: documentText(doc) ?? "",
    rawSpec: doc.value,
    overrides: parseSetFlags(opts.set),
    sets: opts.set ?? [],
    profiles,
    shownPath: shown,
  });
  const report: ReplayReport & { readonly run: RunRecord } = { run, ...withWallTime(result.report, wallMs) };
  writeOutputs(
    [
      ...(opts.report === undefined ? [] : [{ flag: "--report", path: opts.report, text: `${JSON.stringify(report, null, 2)}\n` }]),
      ...(opts.requests === undefined ? [] : [{ flag: "--requests", path: opts.requests, text: recordsJsonl(result.records) }]),
      ...(opts.timeseries === undefined || result.timeseries === undefined
        ? []
        : [{ flag: "--timeseries", path: opts.timeseries, text: timeSeriesText(result.timeseries, seriesFormat!) }]),
      ...(opts.html === undefined || assets === undefined
        ? []
        : [
            {
              flag: "--html",
              path: opts.html,
              text: replayHtml(assets, spec, profiles, report, result, { text: documentText(doc), path: shown(specFile), set: opts.set ?? [] }),
            },
          ]),
    ],
    opts.force,
  );
  io.out(opts.format === "json" ? `${JSON.stringify(report, null, 2)}\n` : formatReportTable(report, describe(spec, profiles), percentiles));
  return 0;
}

/**
 * `--percentiles 50,90,95,99`: each a number in (0, 100], listed once, in any order (shown sorted).
 * The report always has p50, p90 and p99; the others add keys, outside the digest.
 */
function parsePercentiles(text: string): number[] {
  const items = text.split(",").map((t) => t.trim());
  const values = items.map((t) => {
    const v = Number(t);
    if (t === "" || !Number.isFinite(v) || v <= 0 || v > 100)
      throw new UsageError(`--percentiles takes numbers in (0, 100] separated by commas, e.g. 50,90,95,99; got "${t}" in "${text}"`);
    return v;
  });
  if (new Set(values).size !== values.length) throw new UsageError(`--percentiles lists a percentile twice: "${text}"`);
  // 0.9,0.99 are fractions, not percentiles: read as percentiles they would be near the minimum.
  if (values.every((v) => v <= 1) && values.some((v) => v < 1)) {
    const hint = values.map((v) => String(Math.round(v * 100 * 1e9) / 1e9)).join(",");
    throw new UsageError(
      `--percentiles takes percentiles from 0 to 100, not fractions: "${text}" would report p${values[0]} (near the minimum); for the ${text.includes(",") ? "percentiles" : "percentile"} you likely mean, write --percentiles ${hint}`,
    );
  }
  return values.sort((a, b) => a - b);
}

/** Quantiles per latency metric in an HTML report's CDFs (every 0.1 %). */
const HTML_QUANTILES = 1001;

function replayHtml(
  assets: ChartAssets,
  spec: Spec,
  profiles: ReadonlyMap<string, Profile>,
  report: ReplayReport,
  result: Extract<ReplayResult, { ok: true }>,
  written: { readonly text: string | undefined; readonly path: string; readonly set: readonly string[] },
): string {
  const d = describe(spec, profiles);
  return renderReplayHtml({
    assets,
    title: "kvsim replay",
    subtitle: [`${d.topology}; ${d.profile}; router ${d.router}`, `workload: ${d.workload}`],
    timing: describeTiming(spec, profiles),
    settings: specForDisplay(spec),
    // The spec as the user wrote it (bandwidth: 400 Gbit/s), above the resolved one (bandwidth_gbps: 50).
    ...(written.text === undefined ? {} : { specText: written.text, specSource: { path: written.path, set: written.set } }),
    report,
    records: result.records,
    quantiles: result.quantiles ?? { ttft: [], tpot: [], itl: [], e2e: [] },
    ...(result.timeseries === undefined ? {} : { timeseries: result.timeseries }),
    ...(spec.sla === undefined ? {} : { sla: spec.sla }),
  });
}

/** The time series file's format, from its extension. */
function timeSeriesFormat(file: string): "csv" | "jsonl" {
  const ext = extname(file).toLowerCase();
  if (ext === ".csv") return "csv";
  if (ext === ".jsonl") return "jsonl";
  throw new UsageError(`--timeseries ${file}: the file name must end in .csv or .jsonl (it picks the format)`);
}

function timeSeriesText(ts: TimeSeries, format: "csv" | "jsonl"): string {
  if (format === "jsonl") {
    let out = "";
    for (const r of timeSeriesRecords(ts)) out += `${JSON.stringify(r)}\n`;
    return out;
  }
  const t = timeSeriesTable(ts);
  return csvStringify([t.columns, ...t.rows.map((r) => r.map((c) => c ?? ""))]);
}

function recordsJsonl(records: readonly RequestRecord[]): string {
  let out = "";
  for (const r of records) out += `${JSON.stringify(r)}\n`;
  return out;
}
