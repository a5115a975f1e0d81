import { createReadStream, statSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { InputError, parseProfile, readTrace, type Profile, type Spec } from "@kvsim/profile-schema";
import { runReplay, specProfilePaths, withWallTime, type ReplayReport, type RequestRecord } from "@kvsim/replay-engine";
import { assertWritable, readText, RunError, UsageError, writeTextAtomic } from "../io.js";
import { loadSpec, type StdinIo } from "../spec-input.js";
import { defaultSpecPath } from "./examples.js";
import { createProgress } from "./progress.js";
import { formatReportTable, type RunSummary } from "./table.js";

export interface ReplayOptions {
  readonly spec?: string;
  readonly format: string;
  readonly report?: string;
  readonly requests?: string;
  readonly force: boolean;
  /** `--set path=value` overrides, in order. */
  readonly set?: readonly string[];
}

/** Checks that a trace file can be opened before the run starts, naming it if not. */
function assertReadableFile(file: string): number {
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new InputError(file, [{ path: "", message: "cannot read the trace: not a regular file" }]);
    return st.size;
  } catch (e) {
    if (e instanceof InputError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    throw new InputError(file, [{ path: "", message: `cannot read the trace: ${code === "ENOENT" ? "no such file" : String(e)}` }]);
  }
}

function describe(spec: Spec, profiles: ReadonlyMap<string, Profile>): RunSummary {
  const t = spec.topology;
  const topology = t.kind === "aggregated" ? `aggregated, ${t.workers} worker${t.workers === 1 ? "" : "s"}` : `disaggregated, ${t.prefill.workers} prefill + ${t.decode.workers} decode workers`;
  const p = typeof spec.profile === "string" ? profiles.get(spec.profile) : spec.profile;
  const profile = p === undefined ? "profile ?" : `${p.model} (vLLM ${p.vllm_version}, TP ${p.tensor_parallel_size})`;
  const w = spec.workload;
  const workload =
    w.synthetic !== undefined
      ? `synthetic, ${w.synthetic.requests} requests of ${w.synthetic.input_tokens} + ${w.synthetic.output_tokens} tokens`
      : `${w.format ?? "?"} trace ${w.trace ?? "?"}${w.speedup === 1 ? "" : `, speedup ${w.speedup}`}`;
  return { topology, profile, router: spec.router, workload };
}

/**
 * `kvsim replay`: reads the spec (the bundled P/D example without --spec), its profiles and its
 * trace (streamed line by line), replays it, and prints the report. Output files are checked
 * before the run and written atomically only after it succeeded.
 */
export async function replayCommand(io: StdinIo, opts: ReplayOptions): Promise<number> {
  if (opts.format !== "table" && opts.format !== "json") throw new UsageError(`--format must be table or json, got "${opts.format}"`);
  if (opts.report !== undefined && opts.report === opts.requests) throw new UsageError("--report and --requests must name different files");
  assertWritable(opts.report, opts.force);
  assertWritable(opts.requests, opts.force);

  const { spec, specFile } = await loadSpec(io, opts.spec ?? defaultSpecPath(), opts.set);
  const profiles = new Map<string, Profile>();
  for (const path of specProfilePaths(spec)) profiles.set(path, parseProfile(readText(path), path));

  const trace = spec.workload.trace;
  const traceSize = trace === undefined ? 0 : assertReadableFile(trace);
  const stream = trace === undefined ? undefined : createReadStream(trace, { encoding: "utf8" });
  const lines = stream === undefined ? undefined : createInterface({ input: stream, crlfDelay: Infinity });
  const progress = createProgress(io);
  const synthetic = spec.workload.synthetic?.requests;
  const started = performance.now();
  let result;
  try {
    result = await runReplay({
      spec,
      specFile,
      profiles,
      ...(lines === undefined || trace === undefined
        ? {}
        : { records: readTrace(lines, { format: spec.workload.format ?? "kvsim", file: trace, traceBlockSize: spec.workload.trace_block_size }), traceFile: trace }),
      onProgress: (p) => {
        const fraction = synthetic !== undefined ? p.terminal / synthetic : traceSize > 0 && stream !== undefined ? stream.bytesRead / traceSize : 0;
        progress.update(fraction, p.terminal, p.nowMs);
      },
    });
  } finally {
    progress.stop();
    lines?.close();
    stream?.destroy();
  }
  const wallMs = performance.now() - started;
  if (!result.ok) {
    const stuck = result.stuck.map((s) => `  request ${s.request_id}: ${s.where} (${s.why})`).join("\n");
    throw new RunError(`${result.reason}\n${stuck}`);
  }
  const report: ReplayReport = withWallTime(result.report, wallMs);
  if (opts.report !== undefined) writeTextAtomic(opts.report, `${JSON.stringify(report, null, 2)}\n`, opts.force);
  if (opts.requests !== undefined) writeTextAtomic(opts.requests, recordsJsonl(result.records), opts.force);
  io.out(opts.format === "json" ? `${JSON.stringify(report, null, 2)}\n` : formatReportTable(report, describe(spec, profiles)));
  return 0;
}

function recordsJsonl(records: readonly RequestRecord[]): string {
  let out = "";
  for (const r of records) out += `${JSON.stringify(r)}\n`;
  return out;
}
