// The replay page's charts over time: the time series binned for the page, and the handoffs.
import type { RequestRecord, TimeSeries } from "@kvsim/replay-engine";
import type { ChartSpec, SeriesSpec } from "./client.js";
import { downsampleIndices, round } from "./downsample.js";
import { formatNumber } from "./page.js";

/** Handoff points drawn at most (the rest are merged, keeping each run's largest delay). */
const MAX_HANDOFF_POINTS = 5000;
/** Points a time-series chart draws at most: samples are merged into bins of 1, 2, 5, 10, 20... samples. */
const MAX_TIME_BINS = 150;

/** Samples per bin: the smallest of 1, 2, 5, 10, 20, 50... that keeps at most MAX_TIME_BINS bins. */
export function samplesPerBin(samples: number, maxBins = MAX_TIME_BINS): number {
  for (let scale = 1; ; scale *= 10) {
    for (const k of [1, 2, 5]) if (Math.ceil(samples / (k * scale)) <= maxBins) return k * scale;
  }
}

/**
 * The series merged into bins of `per` samples (per = 1 keeps them): gauges by their mean, counters
 * as a rate per second over the bin, per-pass means weighted by the passes. x: the bin's middle, s.
 */
export function binTimeSeries(ts: TimeSeries, per: number) {
  const n = ts.times_ms.length;
  const bins: { from: number; to: number }[] = [];
  for (let from = 0; from < n; from += per) bins.push({ from, to: Math.min(n, from + per) });
  const seconds = (b: { from: number; to: number }) => ((b.to - b.from) * ts.sample_ms) / 1000;
  const sum = (v: readonly (number | null)[], b: { from: number; to: number }) => {
    let s = 0;
    for (let i = b.from; i < b.to; i++) s += v[i] ?? 0;
    return s;
  };
  const mean = (v: readonly (number | null)[]) => bins.map((b) => round(sum(v, b) / (b.to - b.from)));
  const rate = (v: readonly number[]) => bins.map((b) => round(sum(v, b) / seconds(b)));
  const perPass = (v: readonly (number | null)[], passes: readonly number[]) =>
    bins.map((b) => {
      let w = 0;
      let s = 0;
      for (let i = b.from; i < b.to; i++) {
        const p = passes[i] ?? 0;
        const x = v[i];
        if (p > 0 && x !== null && x !== undefined) {
          w += p;
          s += x * p;
        }
      }
      return w === 0 ? null : round(s / w);
    });
  /** A cumulative count at the end of each bin. */
  const cumulative = (v: readonly number[]) => {
    let total = 0;
    return bins.map((b) => (total += sum(v, b)));
  };
  const x = bins.map((b) => round((per === 1 ? ts.times_ms[b.from]! : (ts.times_ms[b.from]! + ts.times_ms[b.to - 1]!) / 2) / 1000, 7)!);
  return { x, binMs: per * ts.sample_ms, mean, rate, perPass, cumulative };
}

/** A centred moving average over `window` points (nulls skipped); window 1 keeps the values. */
export function rollingMean(values: readonly (number | null)[], window: number): (number | null)[] {
  if (window <= 1) return [...values];
  const half = Math.floor(window / 2);
  return values.map((_, i) => {
    let s = 0;
    let n = 0;
    for (let j = Math.max(0, i - half); j <= Math.min(values.length - 1, i - half + window - 1); j++) {
      const v = values[j];
      if (v !== null && v !== undefined) {
        s += v;
        n++;
      }
    }
    return n === 0 ? null : round(s / n);
  });
}

/**
 * Bins a rate chart's moving average spans: enough to hold about 10 completions on average (a
 * sparse trace's prefills would otherwise draw a barcode), at most a quarter of the run.
 */
export function rateWindowBins(bins: number, completions: number): number {
  if (bins <= 1) return 1;
  const want = completions <= 0 ? 1 : Math.ceil((10 * bins) / completions);
  return Math.max(1, Math.min(want, Math.floor(bins / 4)));
}

export function timeSeriesCharts(ts: TimeSeries): ChartSpec[] {
  const per = samplesPerBin(ts.times_ms.length);
  const { x, binMs, mean, rate, perPass, cumulative } = binTimeSeries(ts, per);
  const completed = ts.deployment.completions.reduce((a, b) => a + b, 0);
  const window = rateWindowBins(x.length, completed);
  const smooth = (v: readonly (number | null)[]) => rollingMean(v, window);
  const over = window === 1 ? "" : ` (moving mean over ${formatNumber((window * binMs) / 1000)} s)`;
  const perWorker = (id: string, title: string, yLabel: string, pick: (w: TimeSeries["workers"][number]) => readonly (number | null)[]): ChartSpec => ({
    id,
    title,
    xLabel: "virtual time (s)",
    yLabel,
    x,
    sync: "time",
    series: ts.workers.map((w): SeriesSpec => ({ label: w.label, values: mean(pick(w)) })),
  });
  const d = ts.deployment;
  const charts: ChartSpec[] = [
    {
      id: "ts-tokens",
      title: `Throughput${over}`,
      xLabel: "virtual time (s)",
      yLabel: "tokens / s",
      x,
      sync: "time",
      series: [
        { label: "input tok/s", values: smooth(mean(d.input_tokens_per_s)) },
        { label: "output tok/s", values: smooth(mean(d.output_tokens_per_s)) },
      ],
    },
    {
      id: "ts-requests",
      title: "Requests arrived and completed (cumulative)",
      xLabel: "virtual time (s)",
      yLabel: "requests",
      x,
      sync: "time",
      series: [
        { label: "arrived", values: cumulative(d.arrivals) },
        { label: "completed", values: cumulative(d.completions) },
        ...(d.rejected_or_failed.some((v) => v > 0) ? [{ label: "rejected or failed", values: cumulative(d.rejected_or_failed) }] : []),
      ],
    },
    perWorker("ts-running", "Running requests", "requests", (w) => w.running),
    perWorker("ts-waiting", "Waiting requests", "requests", (w) => w.waiting),
    perWorker("ts-kv-used", "KV pages used", "pages", (w) => w.kv_used_pages),
    perWorker("ts-kv-cached", "KV pages cached (free, evictable)", "pages", (w) => w.kv_cached_pages),
  ];
  // Means per pass exist only in bins where a pass started (gaps elsewhere).
  for (const [id, title, yLabel, pick] of [
    ["ts-batch", "Batch tokens (mean per pass)", "tokens", (w: TimeSeries["workers"][number]) => w.batch_tokens],
    ["ts-step", "Step time (mean per pass)", "ms", (w: TimeSeries["workers"][number]) => w.step_ms],
  ] as const) {
    charts.push({
      id,
      title,
      xLabel: "virtual time (s)",
      yLabel,
      x,
      sync: "time",
      series: ts.workers.map((w): SeriesSpec => ({ label: w.label, values: perPass(pick(w), w.passes), ...(per === 1 ? { points: true } : {}) })),
    });
  }
  // Grouped profiles: the pages of each cache group, summed over the workers of each role.
  const groups = ts.workers[0]?.groups ?? [];
  if (groups.length > 1) {
    const roles = [...new Set(ts.workers.map((w) => w.role))];
    const series: SeriesSpec[] = [];
    for (const role of roles) {
      for (let g = 0; g < groups.length; g++) {
        const values = ts.times_ms.map((_, i) => ts.workers.filter((w) => w.role === role).reduce((s, w) => s + (w.groups[g]?.used_pages[i] ?? 0), 0));
        series.push({ label: `${role} ${groups[g]!.name}`, values: mean(values) });
      }
    }
    charts.push({
      id: "ts-kv-groups",
      title: "KV pages used per cache group",
      xLabel: "virtual time (s)",
      yLabel: "pages (all workers of a role)",
      x,
      sync: "time",
      series,
    });
  }
  if (ts.workers.some((w) => w.role === "decode")) {
    charts.push(
      {
        id: "ts-handoffs",
        title: "Handoffs in flight",
        xLabel: "virtual time (s)",
        yLabel: per === 1 ? "transfers" : "transfers (mean)",
        x,
        sync: "time",
        series: [{ label: "in flight", values: mean(d.handoffs_in_flight) }],
      },
      {
        id: "ts-handoff-bytes",
        title: `Handoff bytes moved${over}`,
        xLabel: "virtual time (s)",
        yLabel: "bytes / s",
        yUnit: "bytes/s",
        x,
        sync: "time",
        series: [{ label: "bytes/s", values: smooth(rate(d.handoff_bytes)) }],
      },
    );
  }
  return charts;
}

/** A chart with something to show: a value other than zero in some series (all zeros or gaps draw an empty plot). */
export const hasData = (c: ChartSpec) => c.series.some((s) => s.values.some((v) => v !== null && v !== 0));

export function handoffCharts(records: readonly RequestRecord[]): ChartSpec[] {
  const hs = records
    .flatMap((r) => {
      const h = r.handoff;
      return h?.destination_reserved_ms == null || h.delay_ms == null
        ? []
        : [{ at: h.destination_reserved_ms, delay: h.delay_ms, bytes: h.payload_bytes ?? 0 }];
    })
    .sort((a, b) => a.at - b.at);
  if (hs.length === 0) return [];
  const keep = downsampleIndices(hs.length, MAX_HANDOFF_POINTS, (i) => hs[i]!.delay);
  const x = keep.map((i) => round(hs[i]!.at / 1000, 7)!);
  return [
    {
      id: "handoff-delay",
      title: "Handoff delay by start time",
      xLabel: "virtual time (s)",
      yLabel: "delay (ms)",
      x,
      series: [{ label: "delay", values: keep.map((i) => round(hs[i]!.delay)), points: true }],
    },
    {
      id: "handoff-size",
      title: "Handoff payload by start time",
      xLabel: "virtual time (s)",
      yLabel: "payload",
      yUnit: "bytes",
      x,
      series: [{ label: "bytes", values: keep.map((i) => hs[i]!.bytes), points: true }],
    },
  ];
}
