import { CANONICAL_KEYS, type SlaStop, type SlaStopTerm } from "@kvsim/replay-engine";
import type { PointReport } from "./rows.js";

/** The numeric fields of the report's `handoffs` object an SLA may name. */
const HANDOFF_METRICS = ["handoffs.count", "handoffs.payload_bytes", "handoffs.mean_delay_ms"];

/**
 * The report's numeric metrics an SLA may name (nested ones dotted): the digest's keys, as
 * replay-engine lists them, with the `handoffs` object opened into its numeric fields.
 */
export const REPORT_METRICS: readonly string[] = CANONICAL_KEYS.flatMap((k): readonly string[] => (k === "handoffs" ? HANDOFF_METRICS : [k]));

/** vLLM's benchmark names the report also carries (`vllm bench serve`). */
const VLLM_NAMES = ["duration", "completed", "failed", "request_throughput", "request_goodput", "output_throughput", "total_token_throughput"];
/** `median_ttft_ms`, `std_itl_ms`, `mean_e2el_ms`, and any percentile: `p95_ttft_ms`, `p99.9_e2el_ms`. */
const LATENCY = /^(?:(mean|median|std)|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2e|e2el)_ms$/;

/** A latency statistic a metric names: its latency (`e2el` is `e2e`) and its statistic (`median` is 50). */
export interface LatencyStat {
  readonly latency: "ttft" | "tpot" | "itl" | "e2e";
  readonly stat: number | "mean" | "std";
}

/** `p90_ttft_ms` is { latency: "ttft", stat: 90 }, `median_e2el_ms` { latency: "e2e", stat: 50 }; undefined for other metrics. */
export function latencyStat(metric: string): LatencyStat | undefined {
  const m = LATENCY.exec(metric);
  if (m === null) return undefined;
  const [, named, p, latency] = m;
  return {
    latency: latency === "e2el" ? "e2e" : (latency as LatencyStat["latency"]),
    stat: named === undefined ? Number(p) : named === "median" ? 50 : (named as "mean" | "std"),
  };
}

/** Whether a name is a numeric metric of the report an SLA may bound. */
function isReportMetric(name: string): boolean {
  return REPORT_METRICS.includes(name) || VLLM_NAMES.includes(name) || LATENCY.test(name);
}

/** Percentiles an SLA names beyond the report's own p50, p90 and p99 (the replay must be asked for them). */
export function slaPercentiles(terms: readonly SlaTerm[]): number[] {
  const out = new Set<number>();
  for (const t of terms) {
    const p = LATENCY.exec(t.metric)?.[2];
    if (p !== undefined && !["50", "90", "99"].includes(p) && Number(p) <= 100) out.add(Number(p));
  }
  return [...out].sort((a, b) => a - b);
}

/** One term of an SLA: a report metric, `<=` or `>=`, and a bound. */
export interface SlaTerm {
  readonly metric: string;
  readonly op: "<=" | ">=";
  readonly value: number;
}

/** Thrown for a malformed `--sla` text; the message says what is wrong. */
export class SlaSyntaxError extends Error {
  override readonly name = "SlaSyntaxError";
}

/**
 * Parses `p90_ttft_ms<=2000,p99_itl_ms<=50` (terms joined by commas; `>=` for metrics that should
 * be high, such as `goodput_rps>=5`). Metric names are the report's (REPORT_METRICS).
 */
export function parseSla(text: string): SlaTerm[] {
  const terms = text.split(",").map((t) => t.trim());
  if (terms.length === 0 || terms.every((t) => t === "")) throw new SlaSyntaxError("an SLA lists terms such as p90_ttft_ms<=2000,p99_itl_ms<=50");
  return terms.map((t) => {
    const m = /^([a-z0-9_.]+?)\s*(<=|>=)\s*(\S+)$/.exec(t);
    if (m === null) throw new SlaSyntaxError(`"${t}" is not a term <metric><=<value> or <metric>>=<value>, e.g. p90_ttft_ms<=2000`);
    const [, metric = "", op = "<=", raw = ""] = m;
    if (!isReportMetric(metric))
      throw new SlaSyntaxError(
        `"${metric}" is not a report metric; one of: ${REPORT_METRICS.join(", ")}, median_* and std_* and any percentile p<N>_* of ttft, tpot, itl, e2e, or vLLM's names (${VLLM_NAMES.join(", ")})`,
      );
    const value = Number(raw);
    if (!Number.isFinite(value)) throw new SlaSyntaxError(`"${raw}" in "${t}" is not a finite number`);
    return { metric, op: op as "<=" | ">=", value };
  });
}

/** The value of a (possibly dotted) metric in a report, or undefined. */
export function metricValue(report: PointReport, metric: string): number | undefined {
  const direct = (report as unknown as Record<string, unknown>)[metric];
  if (typeof direct === "number") return direct;
  let v: unknown = report;
  for (const k of metric.split(".")) v = v !== null && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined;
  return typeof v === "number" ? v : undefined;
}

/**
 * Whether a point's report meets the SLA: every request that arrived completed (none rejected,
 * failed or cut off, so percentiles over the completed ones are not flattered by dropping the
 * slow ones), and every term holds. A report without one of the metrics does not meet it.
 */
export function meetsSla(report: PointReport | null, terms: readonly SlaTerm[]): boolean {
  if (report === null || report.completed_requests !== report.num_requests) return false;
  return terms.every((t) => {
    const v = metricValue(report, t.metric);
    return v !== undefined && (t.op === "<=" ? v <= t.value : v >= t.value);
  });
}

/** `p90_ttft_ms<=2000, p99_itl_ms<=50` */
export const formatSla = (terms: readonly SlaTerm[]): string => terms.map((t) => `${t.metric}${t.op}${t.value}`).join(", ");

/**
 * What a replay may watch to stop once the SLA is lost (`PointTask.stop`): every `<=` bound on a
 * mean or percentile of TTFT, TPOT or E2E, and every request completing (meetsSla asks it). Other
 * terms (ITL, spreads, throughput, `>=` bounds) are judged at the end as before. `total` must not
 * be below the workload's request count (a larger one only stops later).
 */
export function slaStop(terms: readonly SlaTerm[], total: number): SlaStop {
  const watched: SlaStopTerm[] = [];
  for (const t of terms) {
    const l = latencyStat(t.metric);
    if (l === undefined || t.op !== "<=" || l.latency === "itl" || l.stat === "std") continue;
    if (l.stat !== "mean" && !(l.stat > 0 && l.stat <= 100)) continue;
    watched.push({ metric: l.latency, stat: l.stat, limit: t.value });
  }
  return { total, terms: watched, allComplete: true };
}
