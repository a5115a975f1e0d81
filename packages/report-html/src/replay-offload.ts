// The replay page's KV offload section (spec.kv_offload): each tier's traffic and peak against its
// capacity, the loads' delays, and the bytes each tier instance held over time.
import type { KvOffloadReport, TimeSeries } from "@kvsim/replay-engine";
import type { ChartSpec } from "./client.js";
import { escapeHtml, formatNumber, table, type Cell } from "./page.js";
import { binTimeSeries, samplesPerBin } from "./replay-charts.js";

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"] as const;

/** Bytes in binary units, as a tier's capacity is usually given (`1.50 GiB`, `512 B`). */
export function formatBytes(b: number): string {
  let v = b;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${formatNumber(v, 0)} B` : `${v.toFixed(2)} ${UNITS[u]}`;
}

/** The tiers' table (a row per tier of a role; bytes in binary units, exact in data-value) and the loads' line. */
function tiersHtml(r: KvOffloadReport): string {
  const roles = r.tiers.some((t) => t.role !== undefined);
  const rows = r.tiers.map((t, i): Cell[] => {
    const key = (k: string) => `kv_offload.tiers.${i}.${k}`;
    const count = (k: "loads" | "tokens_served" | "blocks_evicted" | "blocks_dropped") => ({ value: t[k], key: key(k) });
    const bytes = (k: "bytes_loaded" | "bytes_stored" | "peak_bytes" | "capacity_bytes") => ({ value: t[k], key: key(k), text: formatBytes(t[k]) });
    return [
      t.name,
      ...(roles ? [t.role ?? "-"] : []),
      t.store === "write_through" ? "write-through" : "on evict",
      `${t.instances} x ${t.shared === "node" ? "node" : "worker"}`,
      count("loads"),
      count("tokens_served"),
      bytes("bytes_loaded"),
      bytes("bytes_stored"),
      count("blocks_evicted"),
      count("blocks_dropped"),
      bytes("peak_bytes"),
      bytes("capacity_bytes"),
      { value: t.capacity_bytes === 0 ? null : (100 * t.peak_bytes) / t.capacity_bytes, digits: 1 },
    ];
  });
  const header = [
    "tier",
    ...(roles ? ["role"] : []),
    "store",
    "instances",
    "loads",
    "tokens served",
    "bytes loaded",
    "bytes stored",
    "blocks evicted",
    "blocks dropped",
    "peak (one instance)",
    "capacity (one instance)",
    "peak / capacity (%)",
  ];
  const delays = table(
    ["loads", "tokens served", "mean load delay (ms)", "p90 load delay (ms)"],
    [
      [
        { value: r.loads, key: "kv_offload.loads" },
        { value: r.tokens_served, key: "kv_offload.tokens_served" },
        { value: r.mean_load_ms, digits: 3, key: "kv_offload.mean_load_ms" },
        { value: r.p90_load_ms, digits: 3, key: "kv_offload.p90_load_ms" },
      ],
    ],
    "kv-offload-loads",
  );
  const dropped = r.tiers.filter((t) => t.blocks_dropped > 0).map((t) => t.name);
  const notes = [
    "Each tier of each role summed over its instances (a worker's, or a node's when shared); bytes are a worker's (every TP rank's shard). A load moves a request's hit blocks from the tiers into the GPU pool before its prefill goes on; its delay runs from its start to its last byte.",
    ...(r.loads === 0 ? ["No prompt continued past its GPU hit into a tier: the tiers stored, and were never read."] : []),
    ...(dropped.length === 0
      ? []
      : [`${dropped.join(", ")}: stores dropped because every block held was being read or still being stored (is the write bandwidth too low?).`]),
  ];
  return (
    notes.map((n) => `<p class="note">${escapeHtml(n)}</p>`).join("") +
    `<div class="scroll">${table(header, rows, "kv-offload")}</div><div class="scroll">${delays}</div>`
  );
}

/**
 * The bytes each tier instance held over time, one line per instance (binned as the other time
 * series), each tier's capacity (one instance's) dashed.
 */
function offloadChart(r: KvOffloadReport, ts: TimeSeries): ChartSpec | undefined {
  const tiers = ts.offload;
  if (tiers === undefined || tiers.length === 0) return undefined;
  const per = samplesPerBin(ts.times_ms.length);
  const { x, mean } = binTimeSeries(ts, per);
  return {
    id: "ts-offload",
    title: "KV offload tier occupancy",
    xLabel: "virtual time (s)",
    yLabel: per === 1 ? "bytes held" : "bytes held (mean)",
    yUnit: "bytes",
    x,
    sync: "time",
    series: tiers.map((t) => ({ label: t.name, values: mean(t.used_bytes) })),
    yMarks: r.tiers.map((t) => ({
      value: t.capacity_bytes,
      label: `${t.role === undefined ? "" : `${t.role} `}${t.name} capacity ${formatBytes(t.capacity_bytes)}`,
    })),
  };
}

/** The section's HTML and its chart (none without a time series, or when every tier stayed empty). */
export function offloadSection(r: KvOffloadReport, ts: TimeSeries | undefined): { html: string; charts: ChartSpec[] } {
  const chart = ts === undefined ? undefined : offloadChart(r, ts);
  const empty = chart !== undefined && !chart.series.some((s) => s.values.some((v) => v !== null && v !== 0));
  const over =
    chart === undefined
      ? ""
      : empty
        ? `<p class="note" id="kv-offload-empty">The tiers held nothing at any sample time.</p>`
        : `<p class="note">Bytes each tier instance held at the sample times (a line per instance: a worker's tier, or a node's when shared), stores in flight included.</p><div class="grid g1"><div class="chart" id="${chart.id}" data-title="${escapeHtml(chart.title)}"></div></div>`;
  return { html: tiersHtml(r) + over, charts: chart === undefined || empty ? [] : [chart] };
}
