import type { ReplayReport, RequestRecord, TimeSeries } from "@kvsim/replay-engine";
import type { ChartSpec, SeriesSpec } from "./client.js";
import { downsampleIndices, round } from "./downsample.js";
import { chartGrid, escapeHtml, formatNumber, page, table, type Cell, type ChartAssets, type Section } from "./page.js";

/** Latency quantiles for the CDFs: values at p = 100 k / (n - 1), k = 0..n-1, of each metric. */
export interface LatencyQuantiles {
  readonly ttft: readonly number[];
  readonly tpot: readonly number[];
  readonly itl: readonly number[];
  readonly e2e: readonly number[];
}

export interface ReplayHtmlInput {
  readonly assets: ChartAssets;
  readonly title?: string;
  /** Lines under the title: the command, topology, profile, workload. */
  readonly subtitle?: readonly string[];
  /** The run's settings (the resolved spec), shown as JSON. */
  readonly settings: unknown;
  readonly report: ReplayReport;
  readonly records: readonly RequestRecord[];
  readonly quantiles: LatencyQuantiles;
  readonly timeseries?: TimeSeries;
  readonly sla?: { readonly ttft_ms?: number | undefined; readonly itl_ms?: number | undefined; readonly e2e_ms?: number | undefined };
}

/** Handoff points drawn at most (the rest are merged, keeping each run's largest delay). */
export const MAX_HANDOFF_POINTS = 5000;
/** Rejected and failed requests listed at most (the reasons table counts them all). */
export const MAX_LISTED_FAILURES = 200;

/** The summary rows: label, report key (dotted for nested), decimals. */
const SUMMARY: readonly (readonly [string, string, number])[] = [
  ["requests arrived", "num_requests", 0],
  ["completed", "completed_requests", 0],
  ["rejected", "rejected_requests", 0],
  ["failed", "failed_requests", 0],
  ["duration (virtual, ms)", "duration_ms", 2],
  ["request throughput (req/s)", "request_throughput_rps", 2],
  ["input throughput (tok/s)", "input_throughput_tok_s", 2],
  ["output throughput (tok/s)", "output_throughput_tok_s", 2],
  ["input tokens", "total_input_tokens", 0],
  ["output tokens", "total_output_tokens", 0],
  ["prefix cache reuse (ratio)", "prefix_cache_reused_ratio", 4],
  ["preemptions", "preemptions", 0],
  ["handoffs", "handoffs.count", 0],
  ["handoff bytes", "handoffs.payload_bytes", 0],
  ["handoff mean delay (ms)", "handoffs.mean_delay_ms", 3],
  ["goodput (req/s)", "goodput_rps", 2],
];

function valueAt(report: unknown, key: string): number | undefined {
  let v: unknown = report;
  for (const k of key.split(".")) v = typeof v === "object" && v !== null ? (v as Record<string, unknown>)[k] : undefined;
  return typeof v === "number" ? v : undefined;
}

/** The CDF of a metric from its quantiles: x the value, y the fraction at or below it. */
function cdfSeries(values: readonly number[]): { x: number[]; y: number[] } {
  const n = values.length;
  return { x: values.map((v) => round(v)!), y: values.map((_, k) => (n === 1 ? 1 : round(k / (n - 1))!)) };
}

function cdfChart(id: string, title: string, values: readonly number[], marks: { value: number; label: string }[]): ChartSpec {
  const { x, y } = cdfSeries(values);
  return { id, title, xLabel: `${title} (ms)`, yLabel: "fraction of requests", x, series: [{ label: title, values: y }], xMarks: marks };
}

const roleOrder = { aggregated: 0, prefill: 1, decode: 2 } as const;

/** Per-worker figures from the records (requests placed, their TTFT and E2E) and the series (peaks). */
function workerTable(input: ReplayHtmlInput): string {
  interface Acc { label: string; role: string; id: number; requests: number; completed: number; ttft: number[]; e2e: number[] }
  const acc = new Map<string, Acc>();
  const get = (role: "aggregated" | "prefill" | "decode", id: number) => {
    const label = `${role === "aggregated" ? "W" : role === "prefill" ? "P" : "D"}${id}`;
    let a = acc.get(label);
    if (a === undefined) acc.set(label, (a = { label, role, id, requests: 0, completed: 0, ttft: [], e2e: [] }));
    return a;
  };
  for (const r of input.records) {
    for (const role of ["aggregated", "prefill", "decode"] as const) {
      const id = r.workers[role];
      if (id === undefined) continue;
      const a = get(role, id);
      a.requests++;
      if (r.status === "completed") {
        a.completed++;
        if (r.ttft_ms !== null) a.ttft.push(r.ttft_ms);
        if (r.e2e_ms !== null) a.e2e.push(r.e2e_ms);
      }
    }
  }
  const series = new Map((input.timeseries?.workers ?? []).map((w) => [w.label, w]));
  for (const w of series.values()) get(w.role, w.id);
  const max = (xs: readonly (number | null)[] | undefined) => (xs === undefined || xs.length === 0 ? null : xs.reduce<number>((m, v) => (v !== null && v > m ? v : m), 0));
  const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((s, v) => s + v, 0) / xs.length);
  const p99 = (xs: number[]) => (xs.length === 0 ? null : [...xs].sort((a, b) => a - b)[Math.round((xs.length - 1) * 0.99)]!);
  const rows = [...acc.values()]
    .sort((a, b) => roleOrder[a.role as keyof typeof roleOrder] - roleOrder[b.role as keyof typeof roleOrder] || a.id - b.id)
    .map((a): Cell[] => {
      const s = series.get(a.label);
      const passes = s?.passes.reduce((x, y) => x + y, 0);
      return [a.label, a.role, a.requests, a.completed, { value: mean(a.ttft) }, { value: p99(a.ttft) }, { value: mean(a.e2e) }, { value: max(s?.running) }, { value: max(s?.waiting) }, { value: max(s?.kv_used_pages) }, { value: passes ?? null }];
    });
  const note = `<p class="note">Requests placed on each worker (a P/D request counts on its prefill and its decode worker); TTFT and E2E of its completed requests; peaks from the time series${input.timeseries === undefined ? " (not sampled)" : ` (every ${formatNumber(input.timeseries.sample_ms)} ms)`}.</p>`;
  return note + table(["worker", "role", "requests", "completed", "mean TTFT (ms)", "p99 TTFT (ms)", "mean E2E (ms)", "peak running", "peak waiting", "peak KV pages used", "passes"], rows, "workers");
}

function timeSeriesCharts(ts: TimeSeries): ChartSpec[] {
  const x = ts.times_ms.map((t) => round(t / 1000, 7)!);
  // Means per pass exist only in intervals where a pass started: drawn as points, not lines.
  const perWorker = (id: string, title: string, yLabel: string, pick: (w: TimeSeries["workers"][number]) => readonly (number | null)[], points = false): ChartSpec => ({
    id,
    title,
    xLabel: "virtual time (s)",
    yLabel,
    x,
    sync: "time",
    series: ts.workers.map((w): SeriesSpec => ({ label: w.label, values: pick(w).map((v) => round(v)), ...(points ? { points: true } : {}) })),
  });
  const d = ts.deployment;
  const charts: ChartSpec[] = [
    { id: "ts-tokens", title: "Throughput", xLabel: "virtual time (s)", yLabel: "tokens / s", x, sync: "time", series: [{ label: "input tok/s", values: d.input_tokens_per_s.map((v) => round(v)) }, { label: "output tok/s", values: d.output_tokens_per_s.map((v) => round(v)) }] },
    { id: "ts-requests", title: "Arrivals and completions", xLabel: "virtual time (s)", yLabel: `requests per ${formatNumber(ts.sample_ms)} ms`, x, sync: "time", series: [{ label: "arrivals", values: d.arrivals }, { label: "completions", values: d.completions }, { label: "rejected or failed", values: d.rejected_or_failed }] },
    perWorker("ts-running", "Running requests", "requests", (w) => w.running),
    perWorker("ts-waiting", "Waiting requests", "requests", (w) => w.waiting),
    perWorker("ts-kv-used", "KV pages used", "pages", (w) => w.kv_used_pages),
    perWorker("ts-kv-cached", "KV pages cached (free, evictable)", "pages", (w) => w.kv_cached_pages),
    perWorker("ts-batch", "Batch tokens (mean per pass)", "tokens", (w) => w.batch_tokens, true),
    perWorker("ts-step", "Step time (mean per pass)", "ms", (w) => w.step_ms, true),
  ];
  // Grouped profiles: the pages of each cache group, summed over the workers of each role.
  const groups = ts.workers[0]?.groups ?? [];
  if (groups.length > 1) {
    const roles = [...new Set(ts.workers.map((w) => w.role))];
    const series: SeriesSpec[] = [];
    for (const role of roles) {
      for (let g = 0; g < groups.length; g++) {
        const values = x.map((_, i) => ts.workers.filter((w) => w.role === role).reduce((s, w) => s + (w.groups[g]?.used_pages[i] ?? 0), 0));
        series.push({ label: `${role} ${groups[g]!.name}`, values });
      }
    }
    charts.push({ id: "ts-kv-groups", title: "KV pages used per cache group", xLabel: "virtual time (s)", yLabel: "pages (all workers of a role)", x, sync: "time", series });
  }
  if (ts.workers.some((w) => w.role === "decode")) {
    charts.push(
      { id: "ts-handoffs", title: "Handoffs in flight", xLabel: "virtual time (s)", yLabel: "transfers", x, sync: "time", series: [{ label: "in flight", values: d.handoffs_in_flight }] },
      { id: "ts-handoff-bytes", title: "Handoff bytes moved", xLabel: "virtual time (s)", yLabel: `bytes per ${formatNumber(ts.sample_ms)} ms`, x, sync: "time", series: [{ label: "bytes", values: d.handoff_bytes }] },
    );
  }
  return charts;
}

function handoffCharts(records: readonly RequestRecord[]): ChartSpec[] {
  const hs = records
    .flatMap((r) => {
      const h = r.handoff;
      return h?.destination_reserved_ms == null || h.delay_ms == null ? [] : [{ at: h.destination_reserved_ms, delay: h.delay_ms, bytes: h.payload_bytes ?? 0 }];
    })
    .sort((a, b) => a.at - b.at);
  if (hs.length === 0) return [];
  const keep = downsampleIndices(hs.length, MAX_HANDOFF_POINTS, (i) => hs[i]!.delay);
  const x = keep.map((i) => round(hs[i]!.at / 1000, 7)!);
  return [
    { id: "handoff-delay", title: "Handoff delay by start time", xLabel: "virtual time (s)", yLabel: "delay (ms)", x, series: [{ label: "delay", values: keep.map((i) => round(hs[i]!.delay)), points: true }] },
    { id: "handoff-size", title: "Handoff payload by start time", xLabel: "virtual time (s)", yLabel: "bytes", x, series: [{ label: "bytes", values: keep.map((i) => hs[i]!.bytes), points: true }] },
  ];
}

function failuresSection(input: ReplayHtmlInput): string {
  const bad = input.records.filter((r) => r.status !== "completed");
  if (bad.length === 0) return `<p id="failures-none">Every request completed: none was rejected and none failed.</p>`;
  const reasons = [...(input.report.rejection_reasons ?? []).map((r) => ["rejected", r] as const), ...(input.report.failure_reasons ?? []).map((r) => ["failed", r] as const)];
  const grouped = table(
    ["status", "requests", "reason", "example"],
    reasons.map(([status, r]) => [status, r.count, r.reason, r.example]),
    "failure-reasons",
  );
  const listed = bad.slice(0, MAX_LISTED_FAILURES);
  const more = bad.length > listed.length ? `<p class="note">The first ${listed.length} of ${bad.length} listed.</p>` : "";
  const rows = listed.map((r): Cell[] => [r.request_id, r.status, { value: r.arrival_ms }, r.reason ?? "-"]);
  return grouped + more + table(["request", "status", "arrival (ms)", "reason"], rows, "failures");
}

/** The replay's report as one self-contained HTML page. */
export function renderReplayHtml(input: ReplayHtmlInput): string {
  const r = input.report;
  const sla = input.sla ?? {};
  const summaryRows: Cell[][] = SUMMARY.filter(([, key]) => valueAt(r, key) !== undefined).map(([label, key, digits]) => [label, { value: valueAt(r, key)!, digits, key }]);
  const latency = (["ttft", "tpot", "itl", "e2e"] as const).map((m): Cell[] => [
    m.toUpperCase(),
    ...(["mean", "p50", "p90", "p99"] as const).map((s): Cell => ({ value: valueAt(r, `${s}_${m}_ms`) ?? null, digits: 2, key: `${s}_${m}_ms` })),
  ]);
  const slaText = [sla.ttft_ms === undefined ? "" : `TTFT <= ${sla.ttft_ms} ms`, sla.itl_ms === undefined ? "" : `ITL (and TPOT) <= ${sla.itl_ms} ms`, sla.e2e_ms === undefined ? "" : `E2E <= ${sla.e2e_ms} ms`].filter((t) => t !== "").join(", ");
  const summary =
    `<div class="tables">${table(["metric", "value"], summaryRows, "summary")}${table(["latency (ms)", "mean", "p50", "p90", "p99"], latency, "latency")}</div>` +
    `<p>SLA: ${slaText === "" ? "none set" : escapeHtml(slaText)}. Digest <code id="digest">${escapeHtml(r.digest)}</code>.</p>`;
  const mark = (v: number | undefined, what: string) => (v === undefined ? [] : [{ value: v, label: `SLA ${what} ${v} ms` }]);
  const q = input.quantiles;
  const cdfs: ChartSpec[] = [
    cdfChart("cdf-ttft", "TTFT", q.ttft, mark(sla.ttft_ms, "TTFT")),
    cdfChart("cdf-tpot", "TPOT", q.tpot, mark(sla.itl_ms, "ITL")),
    cdfChart("cdf-itl", "ITL", q.itl, mark(sla.itl_ms, "ITL")),
    cdfChart("cdf-e2e", "E2E", q.e2e, mark(sla.e2e_ms, "E2E")),
  ];
  const ts = input.timeseries === undefined ? [] : timeSeriesCharts(input.timeseries);
  const handoffs = handoffCharts(input.records);
  const sections: Section[] = [
    { id: "summary", title: "Summary", html: summary },
    { id: "latency-cdfs", title: "Latency CDFs", html: `<p class="note">Completed requests; the dashed red lines are the SLA. ${q.ttft.length} quantiles per metric.</p>${chartGrid(cdfs)}` },
    ...(ts.length === 0 ? [] : [{ id: "timeseries", title: "Over time", html: `<p class="note">Sampled every ${formatNumber(input.timeseries!.sample_ms)} ms of virtual time; one line per worker (P prefill, D decode, W aggregated).</p>${chartGrid(ts)}` }]),
    { id: "per-worker", title: "Per worker", html: workerTable(input) },
    ...(handoffs.length === 0 ? [] : [{ id: "handoffs", title: "Handoffs (P/D)", html: `<p class="note">Each handoff at the time its transfer started (destination reserved): its delay and its payload.</p>${chartGrid(handoffs)}` }]),
    { id: "failures", title: "Rejected and failed requests", html: failuresSection(input) },
    { id: "settings", title: "Settings", html: `<details open><summary>The run's spec (resolved)</summary><pre id="settings-json">${escapeHtml(JSON.stringify(input.settings, null, 2))}</pre></details>` },
  ];
  return page({ title: input.title ?? "kvsim replay", subtitle: input.subtitle ?? [], sections, charts: [...cdfs, ...ts, ...handoffs], assets: input.assets });
}
