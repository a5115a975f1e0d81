/**
 * Measured against simulated: the same requests' TTFT, TPOT, ITL and E2E statistics and
 * throughput, with the signed error of each. A data structure; printing is the caller's.
 */
import type { MeasuredRequest, MeasuredRun } from "./measured.js";
import { mean, percentile } from "./stats.js";

export type CompareMetric = "ttft" | "tpot" | "itl" | "e2e";
export type CompareStat = "mean" | "median" | "p90" | "p99";
const COMPARE_METRICS: readonly CompareMetric[] = ["ttft", "tpot", "itl", "e2e"];
const COMPARE_STATS: readonly CompareStat[] = ["mean", "median", "p90", "p99"];

/** Which measured requests are compared. */
export type CompareSelection =
  | { readonly kind: "all" }
  /** The requests from position K (0-based) on, by measured arrival: `--from-request 150` of 300 is the second half. */
  | { readonly kind: "from_request"; readonly index: number }
  /** The requests that arrived at or after T ms past the measured run's first arrival. */
  | { readonly kind: "after_ms"; readonly ms: number };

/** One figure on both sides. `error` = (simulated - measured) / measured; null when either side lacks it. */
export interface CompareValue {
  readonly measured: number | null;
  readonly simulated: number | null;
  /** simulated - measured. */
  readonly difference: number | null;
  /** (simulated - measured) / measured, signed: +0.02 means the simulation is 2% high. */
  readonly error: number | null;
}

export interface LatencyComparison extends CompareValue {
  readonly metric: CompareMetric;
  readonly stat: CompareStat;
}

export interface ThroughputComparison extends CompareValue {
  readonly metric: "request_throughput_rps" | "output_throughput_tok_s";
}

export interface Comparison {
  readonly selection: CompareSelection;
  /** Measured requests in the selection. */
  readonly selected: number;
  /** Of them, those the simulation completed too (the compared ones). */
  readonly matched: number;
  /** Selected measured requests the simulation did not complete (ids, at most 20). */
  readonly missing: readonly string[];
  readonly missingCount: number;
  /** ms per unit; latency rows in the order COMPARE_METRICS x COMPARE_STATS. */
  readonly latency: readonly LatencyComparison[];
  readonly throughput: readonly ThroughputComparison[];
  /** Why some figures are absent. */
  readonly notes: readonly string[];
}

export function compareValue(measured: number | null, simulated: number | null): CompareValue {
  const difference = measured === null || simulated === null ? null : simulated - measured;
  const error = difference === null || measured === null || measured === 0 ? null : difference / measured;
  return { measured, simulated, difference, error };
}

/** The measured requests a selection keeps (the run is sorted by arrival). */
export function selectRequests(run: MeasuredRun, selection: CompareSelection): readonly MeasuredRequest[] {
  switch (selection.kind) {
    case "all":
      return run.requests;
    case "from_request":
      return run.requests.slice(selection.index);
    case "after_ms":
      return run.requests.filter((r) => r.arrivalMs !== null && r.arrivalMs >= selection.ms);
  }
}

/** One side's values of a metric over the given requests; ITL percentiles need per-token gaps. */
function metricValues(requests: readonly MeasuredRequest[], metric: CompareMetric): number[] {
  const out: number[] = [];
  for (const r of requests) {
    if (metric === "ttft") out.push(r.ttftMs);
    else if (metric === "e2e") out.push(r.e2eMs);
    else if (metric === "tpot") {
      if (r.tpotMs !== null) out.push(r.tpotMs);
    } else if (r.itlsMs !== undefined) {
      // One by one: spreading a request's gaps into push overflows the stack past ~100,000.
      for (const g of r.itlsMs) out.push(g);
    }
  }
  return out;
}

/** Mean ITL over every gap between two tokens: Σ (e2e - ttft) / Σ (output - 1), exact without per-token times. */
function meanItl(requests: readonly MeasuredRequest[]): number | null {
  let time = 0;
  let gaps = 0;
  for (const r of requests) {
    if (r.outputTokens < 2) continue;
    time += r.e2eMs - r.ttftMs;
    gaps += r.outputTokens - 1;
  }
  return gaps === 0 ? null : time / gaps;
}

function stat(requests: readonly MeasuredRequest[], metric: CompareMetric, s: CompareStat): number | null {
  if (metric === "itl") {
    if (s === "mean") return meanItl(requests);
    if (requests.some((r) => r.itlsMs === undefined)) return null;
  }
  const v = metricValues(requests, metric);
  switch (s) {
    case "mean":
      return mean(v);
    case "median":
      return percentile(v, 50);
    case "p90":
      return percentile(v, 90);
    case "p99":
      return percentile(v, 99);
  }
}

/** Requests per second and output tokens per second from the first arrival to the last token; null without arrivals. */
function throughput(requests: readonly MeasuredRequest[]): { rps: number | null; tokS: number | null } {
  if (requests.length === 0 || requests.some((r) => r.arrivalMs === null)) return { rps: null, tokS: null };
  let start = Infinity;
  let end = -Infinity;
  let tokens = 0;
  for (const r of requests) {
    start = Math.min(start, r.arrivalMs!);
    end = Math.max(end, r.arrivalMs! + r.e2eMs);
    tokens += r.outputTokens;
  }
  const span = end - start;
  if (span <= 0) return { rps: null, tokS: null };
  return { rps: (requests.length * 1000) / span, tokS: (tokens * 1000) / span };
}

/**
 * Compares the selected measured requests with the same requests (by id) of the simulated run.
 * Each side's statistics are over the matched requests only, so a request the simulation lost
 * does not shift the measured side.
 */
export function compareRuns(measured: MeasuredRun, simulated: MeasuredRun, selection: CompareSelection = { kind: "all" }): Comparison {
  const chosen = selectRequests(measured, selection);
  const simById = new Map(simulated.requests.map((r) => [r.requestId, r]));
  const m: MeasuredRequest[] = [];
  const s: MeasuredRequest[] = [];
  const missing: string[] = [];
  let missingCount = 0;
  for (const r of chosen) {
    const other = simById.get(r.requestId);
    if (other === undefined) {
      missingCount++;
      if (missing.length < 20) missing.push(r.requestId);
      continue;
    }
    m.push(r);
    s.push(other);
  }
  const latency: LatencyComparison[] = [];
  for (const metric of COMPARE_METRICS) {
    for (const st of COMPARE_STATS) latency.push({ metric, stat: st, ...compareValue(stat(m, metric, st), stat(s, metric, st)) });
  }
  const tm = throughput(m);
  const ts = throughput(s);
  const notes: string[] = [];
  const noItl = [
    m.some((r) => r.itlsMs === undefined) ? `${measured.file} (${measured.format})` : undefined,
    s.some((r) => r.itlsMs === undefined) ? `${simulated.file} (${simulated.format})` : undefined,
  ].filter((x): x is string => x !== undefined);
  if (noItl.length > 0)
    notes.push(
      `ITL percentiles need per-token times, which ${noItl.join(" and ")} lack${noItl.length === 1 ? "s" : ""}; mean ITL is exact from first and last token times`,
    );
  if (tm.rps === null || ts.rps === null) notes.push("throughput needs arrival times on both sides");
  if (missingCount > 0)
    notes.push(`${missingCount} selected measured request${missingCount === 1 ? "" : "s"} did not complete in the simulation (or are not in it)`);
  return {
    selection,
    selected: chosen.length,
    matched: m.length,
    missing,
    missingCount,
    latency,
    throughput: [
      { metric: "request_throughput_rps", ...compareValue(tm.rps, ts.rps) },
      { metric: "output_throughput_tok_s", ...compareValue(tm.tokS, ts.tokS) },
    ],
    notes,
  };
}
