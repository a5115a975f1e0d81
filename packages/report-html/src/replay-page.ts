import type { ReplayReport, RequestRecord, TimeSeries } from "@kvsim/replay-engine";
import type { ChartSpec } from "./client.js";
import { chooseAxis } from "./axes.js";
import { round } from "./downsample.js";
import { chartGrid, escapeHtml, formatNumber, page, table, type Cell, type ChartAssets, type Section } from "./page.js";
import { samplesPerBin, timeSeriesCharts, hasData, handoffCharts } from "./replay-charts.js";
import { offloadSection } from "./replay-offload.js";

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
  /** The run's settings (the resolved spec), shown as JSON, collapsed. */
  readonly settings: unknown;
  /** The spec as the user wrote it (its file's text, in the user's units), shown open above the resolved one. */
  readonly specText?: string;
  /** Where the spec came from (its path as shown), and the `--set` flags applied to it. */
  readonly specSource?: { readonly path: string; readonly set: readonly string[] };
  /** What the step times rest on and how far to trust them (shown in the header). */
  readonly timing?: string;
  readonly report: ReplayReport;
  readonly records: readonly RequestRecord[];
  readonly quantiles: LatencyQuantiles;
  readonly timeseries?: TimeSeries;
  readonly sla?: { readonly ttft_ms?: number | undefined; readonly itl_ms?: number | undefined; readonly e2e_ms?: number | undefined };
}

/** Rejected and failed requests listed at most (the reasons table counts them all). */
const MAX_LISTED_FAILURES = 200;

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

/** A CDF's chart, or null without values: a log x axis for a long tail, the SLA on the axis when near the data. */
function cdfChart(id: string, title: string, values: readonly number[], marks: { value: number; label: string }[]): ChartSpec | null {
  const axis = chooseAxis(
    values,
    marks.map((m) => m.value),
  );
  if (axis === null) return null;
  const { x, y } = cdfSeries(values);
  return {
    id,
    title,
    xLabel: `${title} (ms${axis.log ? ", log scale" : ""})`,
    yLabel: "fraction of requests",
    x,
    series: [{ label: title, values: y }],
    xMarks: marks,
    xRange: axis.range,
    ...(axis.log ? { xLog: true } : {}),
  };
}

const roleOrder = { aggregated: 0, prefill: 1, decode: 2 } as const;

/** Per-worker figures from the records (requests placed, their TTFT and E2E) and the series (peaks). */
function workerTable(input: ReplayHtmlInput): string {
  interface Acc {
    label: string;
    role: string;
    id: number;
    requests: number;
    completed: number;
    ttft: number[];
    e2e: number[];
  }
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
  const max = (xs: readonly (number | null)[] | undefined) =>
    xs === undefined || xs.length === 0 ? null : xs.reduce<number>((m, v) => (v !== null && v > m ? v : m), 0);
  const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((s, v) => s + v, 0) / xs.length);
  const p99 = (xs: number[]) => (xs.length === 0 ? null : [...xs].sort((a, b) => a - b)[Math.round((xs.length - 1) * 0.99)]!);
  const rows = [...acc.values()]
    .sort((a, b) => roleOrder[a.role as keyof typeof roleOrder] - roleOrder[b.role as keyof typeof roleOrder] || a.id - b.id)
    .map((a): Cell[] => {
      const s = series.get(a.label);
      const passes = s?.passes.reduce((x, y) => x + y, 0);
      return [
        a.label,
        a.role,
        a.requests,
        a.completed,
        { value: mean(a.ttft) },
        { value: p99(a.ttft) },
        { value: mean(a.e2e) },
        { value: max(s?.running) },
        { value: max(s?.waiting) },
        { value: max(s?.kv_used_pages) },
        { value: passes ?? null },
      ];
    });
  const note = `<p class="note">Requests placed on each worker (a P/D request counts on its prefill and its decode worker); TTFT and E2E of its completed requests; peaks from the time series${input.timeseries === undefined ? " (not sampled)" : ` (every ${formatNumber(input.timeseries.sample_ms)} ms)`}.</p>`;
  return (
    note +
    table(
      [
        "worker",
        "role",
        "requests",
        "completed",
        "mean TTFT (ms)",
        "p99 TTFT (ms)",
        "mean E2E (ms)",
        "peak running",
        "peak waiting",
        "peak KV pages used",
        "passes",
      ],
      rows,
      "workers",
    )
  );
}

function failuresSection(input: ReplayHtmlInput): string {
  const bad = input.records.filter((r) => r.status !== "completed");
  if (bad.length === 0) return `<p id="failures-none">Every request completed: none was rejected and none failed.</p>`;
  const reasons = [
    ...(input.report.rejection_reasons ?? []).map((r) => ["rejected", r] as const),
    ...(input.report.failure_reasons ?? []).map((r) => ["failed", r] as const),
  ];
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

/** Summary rows that only a P/D run has (an aggregated run would show zeros). */
const HANDOFF_ROWS = new Set(["handoffs.count", "handoffs.payload_bytes", "handoffs.mean_delay_ms"]);

/** The report's warnings, as the table prints them: saturation, imbalance, a cutoff. */
export function replayWarnings(r: ReplayReport): string[] {
  const out: string[] = [];
  const sat = r.saturation;
  if (sat?.saturated === true) {
    const rate = (v: number | null) => (v === null ? "?" : formatNumber(v));
    out.push(
      `Saturated: requests arrive at ${rate(sat.offered_rps)} req/s but are served at ${rate(sat.served_rps)} req/s while they arrive, and the mean TTFT grew from ${rate(sat.ttft_first_quarter_ms)} ms (first quarter of arrivals) to ${rate(sat.ttft_last_quarter_ms)} ms (last quarter): the queue does not drain, so the latencies depend on the trace's length.`,
    );
  }
  for (const role of ["aggregated", "prefill", "decode"] as const) {
    const warning = r.routing?.[role]?.imbalance;
    if (warning !== undefined) out.push(`Imbalance: ${warning}`);
  }
  const c = r.cutoff;
  if (c !== undefined && (c.in_flight_requests > 0 || c.not_arrived_requests > 0)) {
    out.push(
      `Cut off at ${formatNumber(c.at_ms, 0)} ms (max_virtual_time_ms): ${formatNumber(c.not_arrived_requests)} requests not arrived, ${formatNumber(c.in_flight_requests)} in flight; throughputs are over the time that ran.`,
    );
  }
  if (r.completed_requests === 0) out.push("No request completed: there are no latencies to show.");
  return out;
}

function settingsSection(input: ReplayHtmlInput): string {
  const resolved = `<pre id="settings-json">${escapeHtml(JSON.stringify(input.settings, null, 2))}</pre>`;
  if (input.specText === undefined) return `<details open><summary>The run's spec (resolved)</summary>${resolved}</details>`;
  const src = input.specSource;
  const sets =
    src === undefined || src.set.length === 0 ? "" : `<p>Then <code>--set</code>: ${src.set.map((x) => `<code>${escapeHtml(x)}</code>`).join(", ")}.</p>`;
  return (
    `<p class="note">The spec as written${src === undefined ? "" : ` in <code>${escapeHtml(src.path)}</code>`} (its units as you wrote them).</p>` +
    `<pre id="spec-text">${escapeHtml(input.specText)}</pre>${sets}` +
    `<details><summary>As kvsim read it (every default filled in)</summary>${resolved}</details>`
  );
}

/** The replay's report as one self-contained HTML page. */
export function renderReplayHtml(input: ReplayHtmlInput): string {
  const r = input.report;
  const sla = input.sla ?? {};
  const pd =
    input.records.some((x) => x.workers.decode !== undefined) ||
    r.handoffs.count > 0 ||
    (input.timeseries?.workers.some((w) => w.role !== "aggregated") ?? false);
  const summaryRows: Cell[][] = SUMMARY.filter(([, key]) => valueAt(r, key) !== undefined && (pd || !HANDOFF_ROWS.has(key))).map(([label, key, digits]) => [
    label,
    { value: valueAt(r, key)!, digits, key },
  ]);
  const none = r.completed_requests === 0;
  const latency = (["ttft", "tpot", "itl", "e2e"] as const).map((m): Cell[] => [
    m.toUpperCase(),
    ...(["mean", "p50", "p90", "p99"] as const).map((s): Cell => ({
      value: none ? null : (valueAt(r, `${s}_${m}_ms`) ?? null),
      digits: 2,
      key: `${s}_${m}_ms`,
    })),
  ]);
  const slaText = [
    sla.ttft_ms === undefined ? "" : `TTFT <= ${sla.ttft_ms} ms`,
    sla.itl_ms === undefined ? "" : `ITL (and TPOT) <= ${sla.itl_ms} ms`,
    sla.e2e_ms === undefined ? "" : `E2E <= ${sla.e2e_ms} ms`,
  ]
    .filter((t) => t !== "")
    .join(", ");
  const summary =
    `<div class="tables"><div class="scroll">${table(["metric", "value"], summaryRows, "summary")}</div><div class="scroll">${table(["latency (ms)", "mean", "p50", "p90", "p99"], latency, "latency")}</div></div>` +
    `<p>SLA: ${slaText === "" ? "none set" : escapeHtml(slaText)}. Digest <code id="digest">${escapeHtml(r.digest)}</code>.</p>`;
  const mark = (v: number | undefined, what: string) => (v === undefined ? [] : [{ value: v, label: `SLA ${what} ${v} ms` }]);
  const q = input.quantiles;
  const cdfs: ChartSpec[] = [
    cdfChart("cdf-ttft", "TTFT", q.ttft, mark(sla.ttft_ms, "TTFT")),
    cdfChart("cdf-tpot", "TPOT", q.tpot, mark(sla.itl_ms, "ITL")),
    cdfChart("cdf-itl", "ITL", q.itl, mark(sla.itl_ms, "ITL")),
    cdfChart("cdf-e2e", "E2E", q.e2e, mark(sla.e2e_ms, "E2E")),
  ].filter((c) => c !== null);
  const allTs = input.timeseries === undefined ? [] : timeSeriesCharts(input.timeseries);
  const ts = allTs.filter(hasData);
  const idle = allTs.filter((c) => !hasData(c)).map((c) => c.title);
  const handoffs = handoffCharts(input.records);
  const offload = r.kv_offload === undefined ? undefined : offloadSection(r.kv_offload, input.timeseries);
  const cdfNote =
    cdfs.length === 0
      ? `<p id="cdfs-none">No request completed: no latency to draw.</p>`
      : `<p class="note">Completed requests; the dashed red lines are the SLA (named at the edge, with an arrow, when it lies far off the data). A long tail gets a log scale. ${q.ttft.length} quantiles per metric.</p>${chartGrid(cdfs)}`;
  const binMs = input.timeseries === undefined ? 0 : samplesPerBin(input.timeseries.times_ms.length) * input.timeseries.sample_ms;
  const tsNote =
    input.timeseries === undefined
      ? ""
      : binMs === input.timeseries.sample_ms
        ? `Sampled every ${formatNumber(input.timeseries.sample_ms)} ms of virtual time`
        : `Sampled every ${formatNumber(input.timeseries.sample_ms)} ms of virtual time and drawn in ${formatNumber(binMs)} ms bins (gauges as their mean over a bin; --timeseries writes every sample)`;
  const sections: Section[] = [
    { id: "summary", title: "Summary", html: summary },
    { id: "latency-cdfs", title: "Latency CDFs", html: cdfNote },
    ...(allTs.length === 0
      ? []
      : [
          {
            id: "timeseries",
            title: "Over time",
            html:
              `<p class="note">${tsNote}; one line per worker (P prefill, D decode, W aggregated).</p>${chartGrid(ts)}` +
              (idle.length === 0 ? "" : `<p class="note" id="timeseries-idle">Not drawn, zero throughout the run: ${escapeHtml(idle.join(", "))}.</p>`),
          },
        ]),
    { id: "per-worker", title: "Per worker", html: `<div class="scroll">${workerTable(input)}</div>` },
    ...(offload === undefined ? [] : [{ id: "kv-offload-tiers", title: "KV offload tiers", html: offload.html }]),
    ...(handoffs.length === 0
      ? []
      : [
          {
            id: "handoffs",
            title: "Handoffs (P/D)",
            html: `<p class="note">Each handoff at the time its transfer started (destination reserved): its delay and its payload.</p>${chartGrid(handoffs)}`,
          },
        ]),
    { id: "failures", title: "Rejected and failed requests", html: `<div class="scroll">${failuresSection(input)}</div>` },
    { id: "settings", title: "Settings", html: settingsSection(input) },
  ];
  return page({
    title: input.title ?? "kvsim replay",
    subtitle: input.subtitle ?? [],
    ...(input.timing === undefined ? {} : { timing: input.timing }),
    warnings: replayWarnings(r),
    sections,
    charts: [...cdfs, ...ts, ...(offload?.charts ?? []), ...handoffs],
    assets: input.assets,
  });
}
