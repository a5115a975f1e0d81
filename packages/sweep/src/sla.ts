import type { PointReport } from "./rows.js";

/** The report's numeric metrics an SLA may name (nested ones dotted). */
export const REPORT_METRICS: readonly string[] = [
  "num_requests",
  "completed_requests",
  "rejected_requests",
  "failed_requests",
  "in_flight_requests",
  "total_input_tokens",
  "total_output_tokens",
  "duration_ms",
  "request_throughput_rps",
  "input_throughput_tok_s",
  "output_throughput_tok_s",
  ...["ttft", "tpot", "itl", "e2e"].flatMap((m) => ["mean", "p50", "p90", "p99"].map((s) => `${s}_${m}_ms`)),
  "prefix_cache_reused_ratio",
  "preemptions",
  "goodput_requests",
  "goodput_rps",
  "handoffs.count",
  "handoffs.payload_bytes",
  "handoffs.mean_delay_ms",
];

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
    const m = /^([a-z0-9_.]+)\s*(<=|>=)\s*(\S+)$/.exec(t);
    if (m === null) throw new SlaSyntaxError(`"${t}" is not a term <metric><=<value> or <metric>>=<value>, e.g. p90_ttft_ms<=2000`);
    const [, metric = "", op = "<=", raw = ""] = m;
    if (!REPORT_METRICS.includes(metric)) throw new SlaSyntaxError(`"${metric}" is not a report metric; one of: ${REPORT_METRICS.join(", ")}`);
    const value = Number(raw);
    if (!Number.isFinite(value)) throw new SlaSyntaxError(`"${raw}" in "${t}" is not a finite number`);
    return { metric, op: op as "<=" | ">=", value };
  });
}

/** The value of a (possibly dotted) metric in a report, or undefined. */
export function metricValue(report: PointReport, metric: string): number | undefined {
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
