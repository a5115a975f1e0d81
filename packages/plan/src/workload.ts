import type { Spec, SyntheticWorkload, TraceRecord } from "@kvsim/profile-schema";

/** What a plan needs to know of its workload before replaying it. */
export interface WorkloadStats {
  readonly requests: number;
  readonly meanInputTokens: number;
  readonly meanOutputTokens: number;
  readonly minInputTokens: number;
  /** The longest request (input + output tokens): a KV pool smaller than it cannot serve the workload. */
  readonly maxRequestTokens: number;
  /**
   * A trace's own arrival rate (requests - 1 over the arrival span, req/s), which `workload.speedup`
   * multiplies; undefined for a synthetic workload (its rate is `rate_per_s`) or a trace whose
   * requests all arrive at once.
   */
  readonly traceRps?: number;
}

/** Stats of a trace's records (read once; the plan then replays the trace by reference). */
export async function traceStats(records: AsyncIterable<TraceRecord> | Iterable<TraceRecord>): Promise<WorkloadStats> {
  let n = 0;
  let input = 0;
  let output = 0;
  let minInput = Number.POSITIVE_INFINITY;
  let longest = 0;
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for await (const r of records) {
    n++;
    input += r.inputTokens;
    output += r.outputTokens;
    minInput = Math.min(minInput, r.inputTokens);
    longest = Math.max(longest, r.inputTokens + r.outputTokens);
    first = Math.min(first, r.arrivalMs);
    last = Math.max(last, r.arrivalMs);
  }
  if (n === 0) throw new RangeError("the trace has no requests");
  const span = last - first;
  return {
    requests: n,
    meanInputTokens: input / n,
    meanOutputTokens: output / n,
    minInputTokens: minInput,
    maxRequestTokens: longest,
    ...(n > 1 && span > 0 ? { traceRps: ((n - 1) * 1000) / span } : {}),
  };
}

/** Stats of a synthetic workload (every request has the same lengths). */
export function syntheticStats(w: SyntheticWorkload): WorkloadStats {
  return {
    requests: w.requests,
    meanInputTokens: w.input_tokens,
    meanOutputTokens: w.output_tokens,
    minInputTokens: w.input_tokens,
    maxRequestTokens: w.input_tokens + w.output_tokens,
  };
}

/** Thrown when a workload has no rate a plan can scale (a synthetic one without rate_per_s, a trace arriving at once). */
export class PlanSetupError extends Error {
  override readonly name = "PlanSetupError";
}

/**
 * The spec at an arrival rate (req/s): a synthetic workload's `rate_per_s`, or a trace's `speedup`
 * (the rate over the trace's own). Rates are rounded by the caller so that they read as typed.
 */
export function specAtRate(spec: Spec, stats: WorkloadStats, rps: number): Spec {
  const w = spec.workload;
  if (w.synthetic !== undefined) return { ...spec, workload: { ...w, synthetic: { ...w.synthetic, rate_per_s: rps } } };
  if (stats.traceRps === undefined) throw new PlanSetupError("the trace's requests all arrive at once: it has no rate to scale (give arrival times)");
  return { ...spec, workload: { ...w, speedup: rps / stats.traceRps } };
}
