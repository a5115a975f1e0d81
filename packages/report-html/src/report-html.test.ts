import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { ReplayReport, RequestRecord, TimeSeries } from "@kvsim/replay-engine";
import { describe, expect, it } from "vitest";
import { chooseAxis } from "./axes.js";
import type { ChartSpec } from "./client.js";
import { renderCompareHtml } from "./compare-page.js";
import { downsampleIndices } from "./downsample.js";
import { escapeHtml, formatNumber, scriptJson } from "./page.js";
import { binTimeSeries, rateWindowBins, rollingMean, samplesPerBin } from "./replay-charts.js";
import { renderReplayHtml, replayWarnings } from "./replay-page.js";
import { renderSweepHtml } from "./sweep-page.js";

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
  {
    request_id: "<c>",
    status: "rejected",
    reason: "prompt of 100 tokens exceeds the pool",
    arrival_ms: 9,
    ttft_ms: null,
    e2e_ms: null,
    workers: { aggregated: 0 },
  },
] as unknown as RequestRecord[];

describe("renderReplayHtml", () => {
  const html = renderReplayHtml({
    assets,
    settings: { version: 1 },
    report,
    records,
    quantiles: { ttft: [12, 12.5], tpot: [2, 3], itl: [1, 2], e2e: [14, 20] },
    sla: { ttft_ms: 2000 },
  });

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
      deployment: {
        arrivals: [2, 1],
        completions: [0, 2],
        rejected_or_failed: [0, 1],
        input_tokens_per_s: [0, 800],
        output_tokens_per_s: [0, 400],
        handoffs_in_flight: [0, 0],
        handoff_bytes: [0, 0],
      },
    };
    const charts = chartsOf(
      renderReplayHtml({ assets, settings: {}, report, records, quantiles: { ttft: [1, 2], tpot: [1, 2], itl: [1, 2], e2e: [1, 2] }, timeseries: ts }),
    );
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

describe("renderReplayHtml: reading at a glance", () => {
  const ts = (n: number, sampleMs: number): TimeSeries => ({
    sample_ms: sampleMs,
    adaptive: false,
    times_ms: Array.from({ length: n }, (_, i) => i * sampleMs),
    workers: [
      {
        label: "W0",
        role: "aggregated",
        id: 0,
        running: Array.from({ length: n }, (_, i) => i % 2),
        waiting: Array(n).fill(0),
        kv_used_pages: Array(n).fill(5),
        kv_cached_pages: Array(n).fill(0),
        groups: [{ name: "kv", used_pages: Array(n).fill(5), cached_pages: Array(n).fill(0) }],
        passes: Array(n).fill(1),
        batch_tokens: Array(n).fill(8),
        step_ms: Array(n).fill(10),
      },
    ],
    deployment: {
      arrivals: Array.from({ length: n }, (_, i) => (i % 10 === 0 ? 1 : 0)),
      completions: Array.from({ length: n }, (_, i) => (i % 10 === 5 ? 1 : 0)),
      rejected_or_failed: Array(n).fill(0),
      input_tokens_per_s: Array(n).fill(100),
      output_tokens_per_s: Array(n).fill(0),
      handoffs_in_flight: Array(n).fill(0),
      handoff_bytes: Array(n).fill(0),
    },
  });

  it("merges samples into bins of 1, 2, 5, 10, 20, 50... samples, at most 150 bins", () => {
    // 150 samples fit; 151 need bins of 2 (76 bins); 951 need 10 (96 bins; 5 would give 191).
    expect([samplesPerBin(150), samplesPerBin(151), samplesPerBin(951), samplesPerBin(4097)]).toEqual([1, 2, 10, 50]);
  });

  it("bins gauges by their mean, counters as a rate per second, per-pass means weighted by passes", () => {
    const s: TimeSeries = { ...ts(4, 10), workers: [{ ...ts(4, 10).workers[0]!, passes: [1, 3, 0, 2], step_ms: [10, 20, null, 4] }] };
    const b = binTimeSeries(s, 2);
    // Bins of samples 0-1 (0 and 10 ms, middle 5 ms) and 2-3 (20 and 30 ms, middle 25 ms).
    expect(b.x).toEqual([0.005, 0.025]);
    expect(b.binMs).toBe(20);
    // running 0,1,0,1: mean 0.5 in each bin.
    expect(b.mean(s.workers[0]!.running)).toEqual([0.5, 0.5]);
    // arrivals 1,0,0,0 over 20 ms: 1 / 0.02 s = 50 per second, then 0.
    expect(b.rate(s.deployment.arrivals)).toEqual([50, 0]);
    // step_ms (10 x 1 + 20 x 3) / 4 passes = 17.5; then only 4 ms with 2 passes (the null has none).
    expect(b.perPass(s.workers[0]!.step_ms, s.workers[0]!.passes)).toEqual([17.5, 4]);
    // Cumulative arrivals at each bin's end: 1, 1.
    expect(b.cumulative(s.deployment.arrivals)).toEqual([1, 1]);
  });

  it("smooths rates with a centred moving mean holding about 10 completions, at most a quarter of the run", () => {
    // Window 3 over 0, 3, 0, 3, 0: (0+3)/2, (0+3+0)/3, (3+0+3)/3, (0+3+0)/3, (3+0)/2.
    expect(rollingMean([0, 3, 0, 3, 0], 3)).toEqual([1.5, 1, 2, 1, 1.5]);
    expect(rollingMean([null, 2, null], 3)).toEqual([2, 2, 2]);
    // 100 bins, 48 completions: 10 x 100 / 48 = 20.8 -> 21 bins; 1,000 completions: 1 bin; capped at 100 / 4 = 25.
    expect([rateWindowBins(100, 48), rateWindowBins(100, 1000), rateWindowBins(100, 10)]).toEqual([21, 1, 25]);
  });

  it("draws a long run's time series in bins: arrivals cumulative, throughput smoothed", () => {
    // 1,000 samples of 10 ms: bins of 10 samples (100 ms), 100 bins; an arrival every 100 ms (100 in all).
    const charts = chartsOf(
      renderReplayHtml({
        assets,
        settings: {},
        report,
        records,
        quantiles: { ttft: [1, 2], tpot: [1, 2], itl: [1, 2], e2e: [1, 2] },
        timeseries: ts(1000, 10),
      }),
    );
    const requests = charts.find((c) => c.id === "ts-requests")!;
    expect(requests.x.length).toBe(100);
    expect(requests.series[0]!.values.slice(0, 3)).toEqual([1, 2, 3]);
    // No request rejected or failed: no line for them.
    expect(requests.series.map((s) => s.label)).toEqual(["arrived", "completed"]);
    // 100 completions in 100 bins: a window of 10 bins (1 s); a steady 100 tok/s stays 100.
    const tokens = charts.find((c) => c.id === "ts-tokens")!;
    expect(tokens.title).toBe("Throughput (moving mean over 1 s)");
    expect(new Set(tokens.series[0]!.values)).toEqual(new Set([100]));
  });

  it("chooses a log axis for a long tail and names an SLA far off the data at the edge", () => {
    // Median 20, maximum 18,000 >= 20 x 20: log; the 50 ms SLA is within 10x of the data, kept.
    const itl = chooseAxis([10, 20, 30, 18000], [50])!;
    expect(itl.log).toBe(true);
    expect(itl.range[0]).toBeCloseTo(10 / 1.2, 9);
    expect(itl.range[1]).toBeCloseTo(18000 * 1.2, 9);
    // 7.0 to 7.3 ms (span 0.3) with the SLA at 50: 50 > 7.3 + 1.5 x 0.3, left off the axis.
    const tpot = chooseAxis([7, 7.3], [50])!;
    expect(tpot.log).toBe(false);
    expect(tpot.range[1]).toBeLessThan(8);
    // 100 to 961 ms (span 861) with the SLA at 2,000 <= 961 + 1.5 x 861 = 2,252.5: on the axis.
    expect(chooseAxis([100, 961], [2000])!.range[1]).toBeGreaterThan(2000);
    // A zero in the sample: no log scale.
    expect(chooseAxis([0, 1, 1000])!.log).toBe(false);
    expect(chooseAxis([])).toBeNull();
    const charts = chartsOf(
      renderReplayHtml({
        assets,
        settings: {},
        report,
        records,
        quantiles: { ttft: [12, 12.5], tpot: [7, 7.3], itl: [10, 20, 30, 18000], e2e: [14, 20] },
        sla: { itl_ms: 50 },
      }),
    );
    const c = charts.find((x) => x.id === "cdf-itl")!;
    expect([c.xLog, c.xLabel]).toEqual([true, "ITL (ms, log scale)"]);
    expect(charts.find((x) => x.id === "cdf-tpot")!.xRange![1]).toBeLessThan(50);
  });

  it("hides the handoff rows of an aggregated run, keeps them for P/D", () => {
    const html = renderReplayHtml({ assets, settings: {}, report, records, quantiles: { ttft: [1], tpot: [1], itl: [1], e2e: [1] } });
    expect(html).not.toContain('data-key="handoffs.count"');
    const pd = records.map((r) => ({ ...r, workers: { prefill: 0, decode: 0 } })) as unknown as RequestRecord[];
    expect(renderReplayHtml({ assets, settings: {}, report, records: pd, quantiles: { ttft: [1], tpot: [1], itl: [1], e2e: [1] } })).toContain(
      'data-key="handoffs.count"',
    );
  });

  it("shows the timing model and the warnings in the header, the spec as written above the resolved one", () => {
    const saturated = {
      ...report,
      saturation: { saturated: true, offered_rps: 20.5, served_rps: 1.62, ttft_first_quarter_ms: 100, ttft_last_quarter_ms: 9000 },
    } as unknown as ReplayReport;
    expect(replayWarnings(saturated)).toEqual([
      "Saturated: requests arrive at 20.50 req/s but are served at 1.62 req/s while they arrive, and the mean TTFT grew from 100 ms (first quarter of arrivals) to 9,000 ms (last quarter): the queue does not drain, so the latencies depend on the trace's length.",
    ]);
    const html = renderReplayHtml({
      assets,
      settings: { kv_transfer: { bandwidth_gbps: 50 } },
      specText: "kv_transfer: { bandwidth: 400 Gbit/s }\n",
      specSource: { path: "spec.yaml", set: ["engine.max_num_seqs=8"] },
      timing: "roofline on H100-SXM's datasheet, not calibrated",
      report: saturated,
      records,
      quantiles: { ttft: [1], tpot: [1], itl: [1], e2e: [1] },
    });
    const header = html.slice(html.indexOf("<header>"), html.indexOf("</header>"));
    expect(header).toContain('<p class="timing" id="timing"><span class="label">timing:</span> roofline on H100-SXM&#39;s datasheet, not calibrated</p>');
    expect(header).toContain("<li><strong>warning:</strong> Saturated: requests arrive at 20.50 req/s");
    // As written first (open), the resolved JSON after it in a closed <details>.
    expect(html.indexOf('<pre id="spec-text">kv_transfer: { bandwidth: 400 Gbit/s }')).toBeLessThan(html.indexOf("<details><summary>As kvsim read it"));
    expect(html).toContain("<code>engine.max_num_seqs=8</code>");
  });

  it("says no request completed instead of drawing empty CDFs", () => {
    const none = { ...report, completed_requests: 0 } as ReplayReport;
    const html = renderReplayHtml({ assets, settings: {}, report: none, records, quantiles: { ttft: [], tpot: [], itl: [], e2e: [] } });
    expect(chartsOf(html).filter((c) => c.id.startsWith("cdf-"))).toEqual([]);
    expect(html).toContain('<p id="cdfs-none">');
    expect(replayWarnings(none)).toContain("No request completed: there are no latencies to show.");
    // The latency table shows "-", not zeros.
    expect(html).toContain('data-key="p90_ttft_ms" data-value="">-</td>');
  });

  it("leaves out time series that stay zero throughout, naming them", () => {
    // 2 samples: requests arrive and are rejected, no worker ever runs anything.
    const idle: TimeSeries = {
      sample_ms: 10,
      adaptive: false,
      times_ms: [0, 10],
      workers: [
        {
          label: "W0",
          role: "aggregated",
          id: 0,
          running: [0, 0],
          waiting: [0, 0],
          kv_used_pages: [0, 0],
          kv_cached_pages: [0, 0],
          groups: [],
          passes: [0, 0],
          batch_tokens: [null, null],
          step_ms: [null, null],
        },
      ],
      deployment: {
        arrivals: [1, 1],
        completions: [0, 0],
        rejected_or_failed: [1, 1],
        input_tokens_per_s: [0, 0],
        output_tokens_per_s: [0, 0],
        handoffs_in_flight: [0, 0],
        handoff_bytes: [0, 0],
      },
    };
    const html = renderReplayHtml({ assets, settings: {}, report, records, quantiles: { ttft: [1], tpot: [1], itl: [1], e2e: [1] }, timeseries: idle });
    expect(
      chartsOf(html)
        .filter((c) => c.id.startsWith("ts-"))
        .map((c) => c.id),
    ).toEqual(["ts-requests"]);
    expect(html).toContain(
      '<p class="note" id="timeseries-idle">Not drawn, zero throughout the run: Throughput, Running requests, Waiting requests, KV pages used, KV pages cached (free, evictable), Batch tokens (mean per pass), Step time (mean per pass).</p>',
    );
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
    const html = renderSweepHtml({
      assets,
      rows,
      axes: ["engine.max_num_seqs", "topology.workers"],
      gpus: [1, 2, 1, 2],
      sla: [{ metric: "p90_ttft_ms", op: "<=", value: 95 }],
    });
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
    // 100 to 800 (median 160): a linear axis.
    expect(f.yLog).toBeUndefined();
  });

  it("puts a frontier whose misses run decades past the bound on a log axis", () => {
    const rate = (point: number, r: number, p90: number) => ({ ...row(point, 4, 1, p90, p90 <= 2000), settings: { "workload.speedup": r } });
    // Misses to 125,000 ms with a median of 2,400: 125,000 >= 20 x 2,400, so log; the 2,000 bound stays on the axis.
    const rows = [rate(0, 0.5, 600), rate(1, 1, 1900), rate(2, 2, 125000), rate(3, 1.5, 60000), rate(4, 1.25, 2400)];
    const charts = chartsOf(
      renderSweepHtml({
        assets,
        rows,
        axes: [],
        sla: [{ metric: "p90_ttft_ms", op: "<=", value: 2000 }],
        find: "max-rate",
        searches: [{ variable: "workload.speedup", answer: 1, failing: 1.25, settings: {}, rows: [0, 1, 2, 3, 4] }],
      }),
    );
    const f = charts[0]!;
    expect([f.yLog, f.yLabel]).toEqual([true, "p90_ttft_ms (log scale)"]);
    expect(f.yRange![0]).toBeLessThan(600);
    expect(f.yRange![1]).toBeGreaterThan(125000);
  });
});

describe("renderCompareHtml", () => {
  it("puts a CDF with a long tail on a log axis", () => {
    const gaps = [...Array.from({ length: 99 }, (_, i) => 20 + (i % 5)), 18000];
    const html = renderCompareHtml({
      assets,
      figures: [],
      samples: {
        ttft: { measured: [1, 2], simulated: [1, 2] },
        tpot: { measured: [], simulated: [] },
        itl: { measured: gaps, simulated: gaps },
        e2e: { measured: [], simulated: [] },
      },
    });
    const charts = chartsOf(html);
    expect(charts.map((c) => [c.id, c.xLog ?? false])).toEqual([
      ["cdf-ttft", false],
      ["cdf-itl", true],
    ]);
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
