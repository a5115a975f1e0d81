import type { SweepRow } from "@kvsim/sweep";
import type { ChartSpec, SeriesSpec } from "./client.js";
import { chooseAxis } from "./axes.js";
import { round } from "./downsample.js";
import { chartGrid, escapeHtml, page, table, type Cell, type ChartAssets, type Section } from "./page.js";

/** One SLA term (`p90_ttft_ms<=2000`). */
export interface SlaBound {
  readonly metric: string;
  readonly op: "<=" | ">=";
  readonly value: number;
}

/** One search of `kvsim sweep --find`: what it varied, its answer and its rows (indices into `rows`). */
export interface SearchSummary {
  readonly variable: string;
  readonly answer: unknown;
  readonly failing?: unknown;
  readonly gpus?: number | null;
  /** The grid point's own settings (empty without a grid). */
  readonly settings: Readonly<Record<string, unknown>>;
  readonly rows: readonly number[];
}

export interface SweepHtmlInput {
  readonly assets: ChartAssets;
  readonly title?: string;
  readonly subtitle?: readonly string[];
  readonly rows: readonly SweepRow[];
  /** The grid's paths, in the grid's order (the swept variables). */
  readonly axes: readonly string[];
  /** Per row (same order): the GPUs of its topology (workers x TP), when known. */
  readonly gpus?: readonly (number | null)[];
  readonly sla?: readonly SlaBound[];
  readonly find?: "max-rate" | "min-workers";
  readonly searches?: readonly SearchSummary[];
}

/** Series a chart gets at most when other settings split a swept variable's points. */
const MAX_SPLIT_SERIES = 8;

function metric(row: SweepRow, key: string): number | null {
  let v: unknown = row.report;
  for (const k of key.split(".")) v = typeof v === "object" && v !== null ? (v as Record<string, unknown>)[k] : undefined;
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

const settingText = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));

/** Latency percentiles against each numeric swept variable. */
function axisCharts(input: SweepHtmlInput): ChartSpec[] {
  const ok = input.rows.filter((r) => r.status === "ok");
  const charts: ChartSpec[] = [];
  input.axes.forEach((axis, ai) => {
    const numeric = ok.filter((r) => typeof r.settings[axis] === "number");
    if (numeric.length === 0) return;
    const xs = [...new Set(numeric.map((r) => r.settings[axis] as number))].sort((a, b) => a - b);
    // Rows split by the other swept settings: each split is one line per percentile.
    const others = (r: SweepRow) =>
      input.axes
        .filter((a) => a !== axis)
        .map((a) => `${a}=${settingText(r.settings[a])}`)
        .join(", ");
    const splits = [...new Set(numeric.map(others))].slice(0, MAX_SPLIT_SERIES);
    for (const [m, label] of [
      ["ttft", "TTFT"],
      ["e2e", "E2E"],
      ["itl", "ITL"],
    ] as const) {
      const series: SeriesSpec[] = [];
      const percentiles = splits.length === 1 ? (["p50", "p90", "p99"] as const) : (["p90"] as const);
      for (const split of splits) {
        for (const p of percentiles) {
          const values = xs.map((x) => {
            const row = numeric.find((r) => r.settings[axis] === x && others(r) === split);
            return row === undefined ? null : round(metric(row, `${p}_${m}_ms`));
          });
          series.push({ label: `${p} ${label}${split === "" ? "" : ` (${split})`}`, values, spanGaps: true });
        }
      }
      const y = chooseAxis(series.flatMap((s) => s.values.filter((v) => v !== null)));
      const log = y?.log === true;
      charts.push({
        id: `axis-${ai}-${m}`,
        title: `${label} against ${axis}`,
        xLabel: axis,
        yLabel: `${label} (ms${log ? ", log scale" : ""})`,
        x: xs,
        series,
        ...(log ? { yLog: true, yRange: y.range } : {}),
      });
    }
  });
  return charts;
}

/** Goodput (or throughput without an SLA) of every point against its GPUs, with the best at each count. */
function gpuChart(input: SweepHtmlInput): ChartSpec[] {
  const gpus = input.gpus;
  if (gpus === undefined) return [];
  const key = input.sla === undefined || input.sla.length === 0 ? "request_throughput_rps" : "goodput_rps";
  const pts = input.rows.flatMap((r, i) => {
    const g = gpus[i];
    const y = metric(r, key);
    return r.status === "ok" && g !== null && g !== undefined && y !== null ? [{ g, y }] : [];
  });
  if (pts.length === 0) return [];
  pts.sort((a, b) => a.g - b.g || a.y - b.y);
  // The best point at each GPU count is the last of its run (sorted by value).
  const best = pts.map((p, i) => (i === pts.length - 1 || pts[i + 1]!.g !== p.g ? round(p.y) : null));
  const what = key === "goodput_rps" ? "goodput" : "request throughput";
  return [
    {
      id: "gpus",
      title: `${what === "goodput" ? "Goodput" : "Request throughput"} against GPUs`,
      xLabel: "GPUs (workers x TP)",
      yLabel: `${what} (req/s)`,
      x: pts.map((p) => p.g),
      series: [
        { label: "points", values: pts.map((p) => round(p.y)), points: true },
        { label: "best at each GPU count", values: best, spanGaps: true },
      ],
    },
  ];
}

/** Each search's frontier: the SLA metric of every point it tried against what it varied, met or missed. */
function searchCharts(input: SweepHtmlInput): ChartSpec[] {
  const charts: ChartSpec[] = [];
  const sla = input.sla ?? [];
  (input.searches ?? []).slice(0, 6).forEach((s, si) => {
    const byGpus = input.find === "min-workers";
    const xOf = (i: number): number | null => {
      if (byGpus) return input.gpus?.[i] ?? null;
      const v = input.rows[i]?.settings[s.variable];
      return typeof v === "number" ? v : null;
    };
    const pts = s.rows.flatMap((i) => {
      const x = xOf(i);
      const row = input.rows[i];
      return x === null || row === undefined ? [] : [{ x, row }];
    });
    pts.sort((a, b) => a.x - b.x);
    const where = Object.entries(s.settings)
      .map(([k, v]) => `${k}=${settingText(v)}`)
      .join(", ");
    const answerX = byGpus ? (s.gpus ?? null) : typeof s.answer === "number" ? s.answer : null;
    for (const term of sla) {
      const met = pts.map((p) => (p.row.sla_met === true ? round(metric(p.row, term.metric)) : null));
      const missed = pts.map((p) => (p.row.sla_met !== true ? round(metric(p.row, term.metric)) : null));
      // Misses can run decades past the bound (a saturated point): a log scale keeps the bound readable.
      const y = chooseAxis(
        [...met, ...missed].filter((v) => v !== null),
        [term.value],
      );
      const log = y?.log === true;
      charts.push({
        id: `search-${si}-${term.metric}`,
        title: `SLA frontier: ${term.metric} against ${byGpus ? "GPUs" : s.variable}${where === "" ? "" : ` (${where})`}`,
        xLabel: byGpus ? "GPUs (workers x TP)" : s.variable,
        yLabel: `${term.metric}${log ? " (log scale)" : ""}`,
        x: pts.map((p) => p.x),
        series: [
          { label: "met the SLA", values: met, points: true, color: "#2ca02c" },
          { label: "missed it", values: missed, points: true, color: "#d62728" },
        ],
        yMarks: [{ value: term.value, label: `SLA ${term.metric} ${term.op} ${term.value}` }],
        ...(y === null ? {} : { yRange: y.range }),
        ...(log ? { yLog: true } : {}),
        ...(answerX === null ? {} : { xMarks: [{ value: answerX, label: `answer ${answerX.toLocaleString("en-US", { maximumSignificantDigits: 6 })}` }] }),
      });
    }
  });
  return charts;
}

function rowsTable(input: SweepHtmlInput): string {
  const header = [
    "point",
    ...input.axes,
    "status",
    "done",
    "p90 TTFT (ms)",
    "mean TPOT (ms)",
    "p99 ITL (ms)",
    "req/s",
    "goodput (req/s)",
    ...(input.gpus === undefined ? [] : ["GPUs"]),
    ...(input.sla === undefined ? [] : ["SLA"]),
    "digest",
  ];
  const rows = input.rows.map((r, i): Cell[] => [
    r.point,
    ...input.axes.map((a) => (a in r.settings ? settingText(r.settings[a]) : "-")),
    r.status === "ok" ? "ok" : `${r.status}: ${r.reason ?? ""}`,
    metric(r, "completed_requests"),
    { value: metric(r, "p90_ttft_ms") },
    { value: metric(r, "mean_tpot_ms") },
    { value: metric(r, "p99_itl_ms") },
    { value: metric(r, "request_throughput_rps") },
    { value: metric(r, "goodput_rps") },
    ...(input.gpus === undefined ? [] : [input.gpus[i] ?? null]),
    ...(input.sla === undefined ? [] : [r.sla_met === undefined ? "-" : r.sla_met ? "met" : "missed"]),
    r.digest === null ? "-" : r.digest.slice(0, 12),
  ]);
  return `<div class="scroll">${table(header, rows, "rows")}</div>`;
}

/** A sweep's or a search's rows as one self-contained HTML page. */
export function renderSweepHtml(input: SweepHtmlInput): string {
  const axes = axisCharts(input);
  const gpus = gpuChart(input);
  const searches = searchCharts(input);
  const counts = { ok: 0, refused: 0, failed: 0, stopped: 0 };
  for (const r of input.rows) counts[r.status]++;
  const slaText = (input.sla ?? []).map((t) => `${t.metric}${t.op}${t.value}`).join(", ");
  const answers = (input.searches ?? []).map((s): Cell[] => [
    Object.entries(s.settings)
      .map(([k, v]) => `${k}=${settingText(v)}`)
      .join(", ") || "-",
    s.variable,
    s.answer === null || s.answer === undefined ? "none met the SLA" : settingText(s.answer),
    s.failing === null || s.failing === undefined ? "-" : settingText(s.failing),
    s.gpus ?? null,
  ]);
  const sections: Section[] = [
    {
      id: "summary",
      title: "Summary",
      html:
        `<p id="counts" data-ok="${counts.ok}" data-refused="${counts.refused}" data-failed="${counts.failed}">${input.rows.length} points: ${counts.ok} ok, ${counts.refused} refused, ${counts.failed} failed${counts.stopped === 0 ? "" : `, ${counts.stopped} stopped once their SLA was lost`}.${slaText === "" ? "" : ` SLA: ${escapeHtml(slaText)} (and every request completed).`}</p>` +
        (answers.length === 0 ? "" : `<div class="scroll">${table(["grid point", "searched", "answer", "lowest failing", "GPUs"], answers, "answers")}</div>`),
    },
    ...(searches.length === 0
      ? []
      : [
          {
            id: "frontier",
            title: "SLA frontier",
            html: `<p class="note">Every point a search tried: the SLA metric against what it varied, green where the SLA held, red where it did not; dashed: the SLA bound and the answer.</p>${chartGrid(searches)}`,
          },
        ]),
    ...(axes.length === 0 ? [] : [{ id: "latency", title: "Latency against the swept variables", html: chartGrid(axes) }]),
    ...(gpus.length === 0 ? [] : [{ id: "gpus-section", title: "Goodput against GPUs", html: chartGrid(gpus, 1) }]),
    { id: "points", title: "Points", html: rowsTable(input) },
  ];
  return page({ title: input.title ?? "kvsim sweep", subtitle: input.subtitle ?? [], sections, charts: [...searches, ...axes, ...gpus], assets: input.assets });
}
