import type { KvOffloadReport, ReplayReport, RequestRecord, TimeSeries } from "@kvsim/replay-engine";
import { describe, expect, it } from "vitest";
import type { ChartSpec } from "./client.js";
import { renderReplayHtml } from "./replay-page.js";
import { formatBytes } from "./replay-offload.js";

const assets = { js: "/* uPlot */", css: "" };
const quantiles = { ttft: [1, 2], tpot: [1, 2], itl: [1, 2], e2e: [1, 2] };

function chartsOf(html: string): ChartSpec[] {
  const m = /<script type="application\/json" id="kvsim-charts">(.*?)<\/script>/s.exec(html);
  if (m === null) throw new Error("no chart data");
  return JSON.parse(m[1]!) as ChartSpec[];
}

const KiB = 1024;
const kvOffload: KvOffloadReport = {
  tiers: [
    {
      name: "cpu",
      store: "write_through",
      shared: "worker",
      instances: 2,
      capacity_bytes: 64 * KiB,
      loads: 3,
      tokens_served: 36,
      blocks_loaded: 9,
      bytes_loaded: 36 * KiB,
      blocks_stored: 20,
      bytes_stored: 80 * KiB,
      blocks_evicted: 4,
      blocks_dropped: 0,
      peak_bytes: 48 * KiB,
    },
    {
      name: "disk",
      store: "on_evict",
      shared: "node",
      instances: 1,
      capacity_bytes: 2 * 1024 * 1024 * 1024,
      loads: 0,
      tokens_served: 0,
      blocks_loaded: 0,
      bytes_loaded: 0,
      blocks_stored: 4,
      bytes_stored: 16 * KiB,
      blocks_evicted: 0,
      blocks_dropped: 2,
      peak_bytes: 16 * KiB,
    },
  ],
  loads: 3,
  tokens_served: 36,
  mean_load_ms: 1.25,
  p90_load_ms: 2.5,
};

const base = { num_requests: 1, completed_requests: 1, rejected_requests: 0, failed_requests: 0, handoffs: { count: 0 }, digest: "d" };
const withTiers = { ...base, kv_offload: kvOffload } as unknown as ReplayReport;
const without = base as unknown as ReplayReport;
const records = [{ request_id: "a", status: "completed", arrival_ms: 0, ttft_ms: 1, e2e_ms: 2, workers: { aggregated: 0 } }] as unknown as RequestRecord[];

/** n samples every 10 ms; one worker idle but for its running count; the tiers' bytes given. */
function series(n: number, offload?: TimeSeries["offload"]): TimeSeries {
  const zeros = Array<number>(n).fill(0);
  return {
    sample_ms: 10,
    adaptive: false,
    times_ms: Array.from({ length: n }, (_, i) => 10 * i),
    workers: [
      {
        label: "W0",
        role: "aggregated",
        id: 0,
        running: zeros.map((_, i) => i % 2),
        waiting: zeros,
        kv_used_pages: zeros,
        kv_cached_pages: zeros,
        groups: [],
        passes: zeros,
        batch_tokens: zeros.map(() => null),
        step_ms: zeros.map(() => null),
      },
    ],
    deployment: {
      arrivals: zeros,
      completions: zeros,
      rejected_or_failed: zeros,
      input_tokens_per_s: zeros,
      output_tokens_per_s: zeros,
      handoffs_in_flight: zeros,
      handoff_bytes: zeros,
    },
    ...(offload === undefined ? {} : { offload }),
  };
}

describe("renderReplayHtml: KV offload tiers", () => {
  it("tabulates each tier: traffic, bytes in binary units with the exact value for machines, peak against capacity", () => {
    const html = renderReplayHtml({ assets, settings: {}, report: withTiers, records, quantiles });
    expect(html).toContain('<section id="kv-offload-tiers"><h2>KV offload tiers</h2>');
    expect(html).toContain('<a href="#kv-offload-tiers">KV offload tiers</a>');
    // cpu: 36 KiB loaded, 80 KiB stored, peak 48 of 64 KiB = 75 %.
    expect(html).toContain(
      '<tr><td>cpu</td><td>write-through</td><td>2 x worker</td><td class="num" data-key="kv_offload.tiers.0.loads" data-value="3">3</td>' +
        '<td class="num" data-key="kv_offload.tiers.0.tokens_served" data-value="36">36</td>' +
        '<td class="num" data-key="kv_offload.tiers.0.bytes_loaded" data-value="36864">36.00 KiB</td>' +
        '<td class="num" data-key="kv_offload.tiers.0.bytes_stored" data-value="81920">80.00 KiB</td>' +
        '<td class="num" data-key="kv_offload.tiers.0.blocks_evicted" data-value="4">4</td>' +
        '<td class="num" data-key="kv_offload.tiers.0.blocks_dropped" data-value="0">0</td>' +
        '<td class="num" data-key="kv_offload.tiers.0.peak_bytes" data-value="49152">48.00 KiB</td>' +
        '<td class="num" data-key="kv_offload.tiers.0.capacity_bytes" data-value="65536">64.00 KiB</td><td class="num">75</td></tr>',
    );
    // disk: shared by a node, 16 KiB of 2 GiB = 0.000745... % shown to one decimal.
    expect(html).toContain("<td>disk</td><td>on evict</td><td>1 x node</td>");
    expect(html).toContain('data-key="kv_offload.tiers.1.capacity_bytes" data-value="2147483648">2.00 GiB</td><td class="num">0.0</td></tr>');
    // The loads: 3, 36 tokens, delay mean 1.25 and p90 2.5 ms.
    expect(html).toContain('data-key="kv_offload.mean_load_ms" data-value="1.25">1.250</td>');
    expect(html).toContain('data-key="kv_offload.p90_load_ms" data-value="2.5">2.500</td>');
    // A tier that dropped stores is named; no role column in an aggregated run.
    expect(html).toContain("disk: stores dropped because every block held was being read or still being stored");
    expect(html).toContain("<th>tier</th><th>store</th>");
    // Without a time series: no chart.
    expect(chartsOf(html).some((c) => c.id === "ts-offload")).toBe(false);
  });

  it("draws each tier instance's bytes over time, binned as the other time series", () => {
    // 200 samples: bins of 2 (samplesPerBin), a gauge by its mean. cpu 0 holds 4 KiB per sample
    // index (0, 4, 8 KiB...): bin k holds samples 2k and 2k + 1, mean (2k + 0.5) x 4 KiB.
    const n = 200;
    const cpu0 = Array.from({ length: n }, (_, i) => 4 * KiB * i);
    const cpu1 = Array<number>(n).fill(8 * KiB);
    const disk = Array.from({ length: n }, (_, i) => (i < 100 ? 0 : 16 * KiB));
    const ts = series(n, [
      { name: "cpu 0", used_bytes: cpu0 },
      { name: "cpu 1", used_bytes: cpu1 },
      { name: "disk 0", used_bytes: disk },
    ]);
    const html = renderReplayHtml({ assets, settings: {}, report: withTiers, records, quantiles, timeseries: ts });
    const chart = chartsOf(html).find((c) => c.id === "ts-offload")!;
    expect([chart.title, chart.yLabel, chart.yUnit, chart.sync]).toEqual(["KV offload tier occupancy", "bytes held (mean)", "bytes", "time"]);
    expect(chart.series.map((s) => s.label)).toEqual(["cpu 0", "cpu 1", "disk 0"]);
    // Each tier's capacity (one instance's), dashed.
    expect(chart.yMarks).toEqual([
      { value: 64 * KiB, label: "cpu capacity 64.00 KiB" },
      { value: 2 * 1024 ** 3, label: "disk capacity 2.00 GiB" },
    ]);
    expect(chart.x).toHaveLength(100);
    // Bin 0: samples at 0 and 10 ms, drawn at 5 ms; bin 99: 1,980 and 1,990 ms.
    expect([chart.x[0], chart.x[99]]).toEqual([0.005, 1.985]);
    // 4 KiB x 198.5 = 813,056 bytes, rounded to 5 significant digits as every drawn value.
    expect([chart.series[0]!.values[0], chart.series[0]!.values[99]]).toEqual([2 * KiB, 813_060]);
    expect(chart.series[1]!.values.every((v) => v === 8 * KiB)).toBe(true);
    // disk fills at sample 100: bins 0-49 hold 0, bins 50-99 16 KiB.
    expect([chart.series[2]!.values[49], chart.series[2]!.values[50]]).toEqual([0, 16 * KiB]);
    // Its placeholder is in the offload section, not among the time series.
    expect(html).toMatch(/<section id="kv-offload-tiers">.*<div class="chart" id="ts-offload" data-title="KV offload tier occupancy">/s);
  });

  it("names tiers that stayed empty instead of drawing an empty plot", () => {
    const ts = series(3, [{ name: "cpu 0", used_bytes: [0, 0, 0] }]);
    const html = renderReplayHtml({ assets, settings: {}, report: withTiers, records, quantiles, timeseries: ts });
    expect(chartsOf(html).some((c) => c.id === "ts-offload")).toBe(false);
    expect(html).toContain('id="kv-offload-empty"');
  });

  it("P/D tiers get a role column", () => {
    const pd = { ...base, kv_offload: { ...kvOffload, tiers: [{ ...kvOffload.tiers[0]!, role: "prefill" }] } } as unknown as ReplayReport;
    const html = renderReplayHtml({ assets, settings: {}, report: pd, records, quantiles });
    expect(html).toContain("<th>tier</th><th>role</th>");
    expect(html).toContain("<td>cpu</td><td>prefill</td><td>write-through</td>");
  });

  it("changes nothing for a report without kv_offload", () => {
    const ts = series(3);
    const html = renderReplayHtml({ assets, settings: {}, report: without, records, quantiles, timeseries: ts });
    expect(html).not.toContain("kv-offload");
    expect(html).not.toContain("offload");
    expect(chartsOf(html).some((c) => c.id === "ts-offload")).toBe(false);
  });

  it("formats bytes in binary units", () => {
    expect([formatBytes(0), formatBytes(1023), formatBytes(1024), formatBytes(1536 * KiB), formatBytes(200 * 1024 ** 3)]).toEqual([
      "0 B",
      "1,023 B",
      "1.00 KiB",
      "1.50 MiB",
      "200.00 GiB",
    ]);
  });
});
