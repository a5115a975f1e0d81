import { InputError, readTrace, SpecSchema, validateValue, type Profile, type Spec, type TraceFormat } from "@kvsim/profile-schema";
import { runReplay, specProfilePaths, type SlaStop } from "@kvsim/replay-engine";
import { badRow, okRow, type SweepRow } from "./rows.js";

/** A trace a point reads: its absolute path and the SHA-256 (hex) of its content. */
export interface TraceRef {
  readonly path: string;
  readonly sha256: string;
}

/**
 * Everything one point needs, as plain JSON, so that the same task runs in-process, in a worker
 * thread or on a remote worker and gives the same row: the point's spec with every path absolute
 * and every profile inlined, and the trace by path and content hash.
 */
export interface PointTask {
  readonly point: number;
  readonly settings: Readonly<Record<string, unknown>>;
  /** The point's spec (validated again where it runs). */
  readonly spec: unknown;
  readonly trace: TraceRef | null;
  /** Percentiles to report besides p50, p90 and p99 (an SLA on p95_ttft_ms needs 95); outside the digest. */
  readonly percentiles?: readonly number[];
  /** Stop the replay once these latency bounds are lost (row status `stopped`): a search's failing probes need no full replay. */
  readonly stop?: SlaStop;
}

/** What running a point needs from its host: the trace's lines, and a clock for the wall time. */
export interface PointHost {
  /**
   * The lines of the trace, after checking that its content has the task's hash. Throws an
   * InputError (the point is refused with its message) when the trace cannot be read or differs.
   */
  traceLines(trace: TraceRef, format: TraceFormat): Promise<{ lines: AsyncIterable<string> | Iterable<string>; close(): void }>;
  /** Milliseconds of a monotonic host clock. */
  now(): number;
}

/**
 * The task of one point: the spec with its profiles inlined (so a worker needs no profile file)
 * and the trace by reference. `profiles` holds every profile the spec names by path.
 */
export function pointTask(
  point: number,
  settings: Readonly<Record<string, unknown>>,
  spec: Spec,
  profiles: ReadonlyMap<string, Profile>,
  trace: TraceRef | null,
  percentiles: readonly number[] = [],
  stop?: SlaStop,
): PointTask {
  const inline = <T>(ref: T): T | Profile => {
    if (typeof ref !== "string") return ref;
    const p = profiles.get(ref);
    if (p === undefined) throw new Error(`profile ${ref} was not loaded (see specProfilePaths)`);
    return p;
  };
  const inlined: Spec = {
    ...spec,
    profile: inline(spec.profile),
    ...(spec.prefill === undefined
      ? {}
      : { prefill: { ...spec.prefill, ...(spec.prefill.profile === undefined ? {} : { profile: inline(spec.prefill.profile) }) } }),
    ...(spec.decode === undefined
      ? {}
      : { decode: { ...spec.decode, ...(spec.decode.profile === undefined ? {} : { profile: inline(spec.decode.profile) }) } }),
  };
  // JSON round trip: the task is exactly what a queue would carry.
  return JSON.parse(
    JSON.stringify({ point, settings, spec: inlined, trace, ...(percentiles.length === 0 ? {} : { percentiles }), ...(stop === undefined ? {} : { stop }) }),
  ) as PointTask;
}

const describeIssues = (e: InputError): string => e.issues.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`)).join("; ");

/**
 * Runs one point and returns its row; never throws for a bad point. An invalid spec, a trace that
 * cannot be read or has another hash, a trace line or setting the ranks refuse: `refused` with the
 * reason. A replay that makes no progress, or an unexpected error: `failed` with the reason.
 */
export async function runPoint(task: PointTask, host: PointHost): Promise<SweepRow> {
  const started = host.now();
  const wall = () => host.now() - started;
  let spec: Spec;
  try {
    spec = validateValue(SpecSchema, task.spec, `point ${task.point}`);
    if (specProfilePaths(spec).length > 0) throw new InputError(`point ${task.point}`, [{ path: "profile", message: "a point's profiles must be inlined" }]);
    if ((spec.workload.trace === undefined) !== (task.trace === null) || (task.trace !== null && task.trace.path !== spec.workload.trace)) {
      throw new InputError(`point ${task.point}`, [{ path: "workload.trace", message: "the task's trace reference does not match its spec" }]);
    }
  } catch (e) {
    if (e instanceof InputError) return badRow(task.point, task.settings, "refused", describeIssues(e), wall());
    throw e;
  }
  let source: Awaited<ReturnType<PointHost["traceLines"]>> | undefined;
  try {
    source = task.trace === null ? undefined : await host.traceLines(task.trace, spec.workload.format ?? "kvsim");
    const traceFile = task.trace?.path;
    const result = await runReplay({
      spec,
      specFile: `point ${task.point}`,
      ...(task.percentiles === undefined || task.percentiles.length === 0 ? {} : { percentiles: task.percentiles }),
      ...(task.stop === undefined ? {} : { stopWhen: task.stop }),
      ...(source === undefined || traceFile === undefined
        ? {}
        : {
            records: readTrace(source.lines, { format: spec.workload.format ?? "kvsim", file: traceFile, traceBlockSize: spec.workload.trace_block_size }),
            traceFile,
          }),
    });
    if (!result.ok) {
      if (result.stopped === true) return badRow(task.point, task.settings, "stopped", result.reason, wall());
      const stuck = result.stuck.map((s) => `request ${s.request_id}: ${s.where} (${s.why})`).join("; ");
      return badRow(task.point, task.settings, "failed", stuck === "" ? result.reason : `${result.reason}: ${stuck}`, wall());
    }
    return okRow(task.point, task.settings, result.report, wall());
  } catch (e) {
    if (e instanceof InputError) return badRow(task.point, task.settings, "refused", e.file.startsWith("point ") ? describeIssues(e) : e.message, wall());
    return badRow(task.point, task.settings, "failed", e instanceof Error ? e.message : String(e), wall());
  } finally {
    source?.close();
  }
}
