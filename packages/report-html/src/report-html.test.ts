import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { ReplayReport, RequestRecord, TimeSeries } from "@kvsim/replay-engine";
import { describe, expect, it } from "vitest";
import { downsampleIndices, escapeHtml, formatNumber, renderReplayHtml, renderSweepHtml, scriptJson, type ChartSpec } from "./index.js";

// Tests may read files: the real uPlot, as the CLI inlines it.
const dist = dirname(createRequire(import.meta.url).resolve("uplot"));
const assets = { js: readFileSync(join(dist, "uPlot.iife.min.js"), "utf8"), css: readFileSync(join(dist, "uPlot.min.css"), "utf8") };

/** The charts a page asks its script to draw. */
function chartsOf(html: string): ChartSpec[] {
  const m = /<script type="application\/json" id="kvsim-charts">(.*?)<\/script>/s.exec(html);
  if (m === null) throw new Error("no chart data");
  return JSON.parse(m[1]!) as ChartSpec[];
}

const report = {
  num_requests: 3,
  completed_requests: 2,
  rejected_requests: 1,
  failed_requests: 0,
  duration_ms: 1234.5,
  request_throughput_rps: 1.62,
  mean_ttft_ms: 12.25,
  p50_ttft_ms: 12,
  p90_ttft_ms: 12.5,
  p99_ttft_ms: 12.5,
  handoffs: { count: 0, payload_bytes: 0, mean_delay_ms: 0 },
  rejection_reasons: [{ reason: "prompt of # tokens exceeds the pool", count: 1, example: "prompt of 100 tokens exceeds the pool" }],
  failure_reasons: [],
  digest: "abc123",
} as unknown as ReplayReport;

const records = [
  { request_id: "a", status: "completed", arrival_ms: 0, ttft_ms: 12, e2e_ms: 14, workers: { aggregated: 0 } },
  { request_id: "b", status: "completed", arrival_ms: 5, ttft_ms: 12.5, e2e_ms: 20, workers: { aggregated: 1 } },
  { request_id: "<c>", status: "rejected", reason: "prompt of 100 tokens exceeds the pool", arrival_ms: 9, ttft_ms: null, e2e_ms: null, workers: { aggregated: 0 } },
] as unknown as RequestRecord[];

describe("renderReplayHtml", () => {
  const html = renderReplayHtml({ assets, settings: { version: 1 }, report, records, quantiles: { ttft: [12, 12.5], tpot: [2, 3], itl: [1, 2], e2e: [14, 20] }, sla: { ttft_ms: 2000 } });

  it("is one self-contained document: uPlot and the styles inline, nothing fetched", () => {
    expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
    expect(html).toContain(assets.js.slice(0, 200));
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|<img[^>]+src=|url\(/);
    // The only address in it is the one in uPlot's licence comment.
    expect(html.match(/https?:\/\/[^\s"')]*/g)).toEqual(["https://github.com/leeoniya/uPlot"]);
  });

  it("shows the report's numbers with their exact values for machines", () => {
    expect(html).toContain('data-key="p90_ttft_ms" data-value="12.5">12.50</td>');
    expect(html).toContain('data-key="duration_ms" data-value="1234.5">1,234.50</td>');
    expect(html).toContain('<code id="digest">abc123</code>');
  });

  it("draws the four CDFs from the quantiles, with the SLA marked on TTFT", () => {
    const charts = chartsOf(html);
    const ttft = charts.find((c) => c.id === "cdf-ttft")!;
    // Two quantiles (p0 and p100): fractions 0 and 1.
    expect([ttft.x, ttft.series[0]!.values]).toEqual([
      [12, 12.5],
      [0, 1],
    ]);
    expect(ttft.xMarks).toEqual([{ value: 2000, label: "SLA TTFT 2000 ms" }]);
    expect(charts.map((c) => c.id)).toEqual(["cdf-ttft", "cdf-tpot", "cdf-itl", "cdf-e2e"]);
  });

  it("lists rejected requests with their reasons, escaped", () => {
    expect(html).toContain("<td>&lt;c&gt;</td><td>rejected</td>");
    expect(html).toContain("prompt of # tokens exceeds the pool");
  });

  it("draws the time series, one line per worker, when given", () => {
    const ts: TimeSeries = {
      sample_ms: 10,
      adaptive: true,
      times_ms: [0, 10],
      workers: [0, 1].map((id) => ({
        label: `W${id}`,
        role: "aggregated" as const,
        id,
        running: [1, id],
        waiting: [0, 0],
        kv_used_pages: [3, 4],
        kv_cached_pages: [0, 1],
        groups: [{ name: "kv", used_pages: [3, 4], cached_pages: [0, 1] }],
        passes: [1, 1],
        batch_tokens: [4, null],
        step_ms: [12, null],
      })),
      deployment: { arrivals: [2, 1], completions: [0, 2], rejected_or_failed: [0, 1], input_tokens_per_s: [0, 800], output_tokens_per_s: [0, 400], handoffs_in_flight: [0, 0], handoff_bytes: [0, 0] },
    };
    const charts = chartsOf(renderReplayHtml({ assets, settings: {}, report, records, quantiles: { ttft: [1, 2], tpot: [1, 2], itl: [1, 2], e2e: [1, 2] }, timeseries: ts }));
    const running = charts.find((c) => c.id === "ts-running")!;
    // Times in seconds; a line per worker.
    expect(running.x).toEqual([0, 0.01]);
    expect(running.series.map((s) => [s.label, s.values])).toEqual([
      ["W0", [1, 0]],
      ["W1", [1, 1]],
    ]);
    // Aggregated, one cache group: no handoff or per-group charts.
    expect(charts.some((c) => c.id.startsWith("ts-handoff") || c.id === "ts-kv-groups")).toBe(false);
  });
});

describe("renderSweepHtml", () => {
  const row = (point: number, seqs: number, workers: number, p90: number, met: boolean) => ({
    point,
    settings: { "engine.max_num_seqs": seqs, "topology.workers": workers },
    status: "ok" as const,
    reason: null,
    report: { p50_ttft_ms: p90 / 2, p90_ttft_ms: p90, p99_ttft_ms: p90 * 2, goodput_rps: workers * 1.5, request_throughput_rps: workers * 2 } as never,
    digest: `d${point}`,
    wall_time_ms: 1,
    sla_met: met,
  });

  it("plots each swept variable's latency (a line per other setting) and goodput against GPUs", () => {
    const rows = [row(0, 4, 1, 100, true), row(1, 4, 2, 60, true), row(2, 8, 1, 90, true), row(3, 8, 2, 50, true)];
    const html = renderSweepHtml({ assets, rows, axes: ["engine.max_num_seqs", "topology.workers"], gpus: [1, 2, 1, 2], sla: [{ metric: "p90_ttft_ms", op: "<=", value: 95 }] });
    const charts = chartsOf(html);
    const seqs = charts.find((c) => c.id === "axis-0-ttft")!;
    expect(seqs.x).toEqual([4, 8]);
    // Split by topology.workers: the p90 of each.
    expect(seqs.series.map((s) => [s.label, s.values])).toEqual([
      ["p90 TTFT (topology.workers=1)", [100, 90]],
      ["p90 TTFT (topology.workers=2)", [60, 50]],
    ]);
    const gpus = charts.find((c) => c.id === "gpus")!;
    // Points sorted by GPUs (then goodput); the best at 1 GPU is 1.5, at 2 GPUs 3.
    expect(gpus.x).toEqual([1, 1, 2, 2]);
    expect(gpus.series[1]!.values).toEqual([null, 1.5, null, 3]);
    expect(html).toContain('data-ok="4" data-refused="0" data-failed="0"');
  });

  it("draws a search's frontier: met and missed points against the searched variable, the bound and the answer", () => {
    const rate = (point: number, r: number, p90: number, met: boolean) => ({ ...row(point, 4, 1, p90, met), settings: { "workload.synthetic.rate_per_s": r } });
    const rows = [rate(0, 20, 800, false), rate(1, 10, 100, true), rate(2, 15, 160, true)];
    const charts = chartsOf(
      renderSweepHtml({
        assets,
        rows,
        axes: [],
        sla: [{ metric: "p90_ttft_ms", op: "<=", value: 300 }],
        find: "max-rate",
        searches: [{ variable: "workload.synthetic.rate_per_s", answer: 15, failing: 20, settings: {}, rows: [0, 1, 2] }],
      }),
    );
    const f = charts.find((c) => c.id === "search-0-p90_ttft_ms")!;
    expect(f.x).toEqual([10, 15, 20]);
    expect(f.series.map((s) => s.values)).toEqual([
      [100, 160, null],
      [null, null, 800],
    ]);
    expect(f.yMarks).toEqual([{ value: 300, label: "SLA p90_ttft_ms <= 300" }]);
    expect(f.xMarks).toEqual([{ value: 15, label: "answer 15" }]);
  });
});

describe("helpers", () => {
  it("escape HTML and keep JSON from closing its script element", () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    expect(scriptJson({ s: "</script><!--" })).toBe('{"s":"\\u003c/script>\\u003c!--"}');
    expect(JSON.parse(scriptJson({ s: "</script>" }))).toEqual({ s: "</script>" });
  });

  it("format numbers with grouped thousands, integers without decimals", () => {
    expect([formatNumber(1234.5), formatNumber(48), formatNumber(0.46213, 4), formatNumber(null)]).toEqual(["1,234.50", "48", "0.4621", "-"]);
  });

  it("downsample keeps each run's largest point, in order", () => {
    // 10 points into 5 runs of 2: the larger of each pair.
    const v = [1, 5, 2, 2, 9, 0, 3, 4, 0, 7];
    expect(downsampleIndices(10, 5, (i) => v[i]!)).toEqual([1, 2, 4, 7, 9]);
    expect(downsampleIndices(3, 5, (i) => v[i]!)).toEqual([0, 1, 2]);
  });
});
