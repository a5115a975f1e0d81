import type { ChartSpec } from "./client.js";
import { chooseAxis } from "./axes.js";
import { round } from "./downsample.js";
import { chartGrid, escapeHtml, formatNumber, page, table, type Cell, type ChartAssets, type Section } from "./page.js";

/** One figure of `kvsim compare` on both sides. */
export interface CompareFigure {
  readonly name: string;
  readonly stat: string;
  readonly measured: number | null;
  readonly simulated: number | null;
  /** (simulated - measured) / measured; null when either side lacks it. */
  readonly error: number | null;
}

/** Each metric's values on both sides, over the compared requests (ITL: every gap, when known). */
export type CompareSamples = Readonly<Record<"ttft" | "tpot" | "itl" | "e2e", { readonly measured: readonly number[]; readonly simulated: readonly number[] }>>;

export interface CompareHtmlInput {
  readonly assets: ChartAssets;
  readonly title?: string;
  readonly subtitle?: readonly string[];
  readonly figures: readonly CompareFigure[];
  readonly samples: CompareSamples;
  readonly notes?: readonly string[];
}

/** Points per side a CDF is evaluated at (its quantiles; the chart's x is their union). */
const COMPARE_CDF_POINTS = 1001;

/** Nearest-rank quantiles of a sorted sample at `points` evenly spaced levels. */
function quantiles(sorted: readonly number[], points: number): number[] {
  const n = sorted.length;
  if (n <= points) return [...sorted];
  return Array.from({ length: points }, (_, k) => sorted[Math.round(((n - 1) * k) / (points - 1))]!);
}

/** The fraction of a sorted sample at or below x. */
function cdfAt(sorted: readonly number[], x: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo / sorted.length;
}

/**
 * The CDFs of both sides on one x axis: the union of each side's quantiles (at most
 * COMPARE_CDF_POINTS each), each side's exact empirical CDF at those values (null for an empty side).
 */
function twoCdfs(measured: readonly number[], simulated: readonly number[]): { x: number[]; measured: (number | null)[]; simulated: (number | null)[] } {
  const m = [...measured].sort((a, b) => a - b);
  const s = [...simulated].sort((a, b) => a - b);
  const x = [...new Set([...quantiles(m, COMPARE_CDF_POINTS), ...quantiles(s, COMPARE_CDF_POINTS)])].sort((a, b) => a - b);
  const at = (sorted: number[]) => x.map((v) => (sorted.length === 0 ? null : round(cdfAt(sorted, v))));
  return { x: x.map((v) => round(v)!), measured: at(m), simulated: at(s) };
}

const NAMES = { ttft: "TTFT", tpot: "TPOT", itl: "ITL", e2e: "E2E" } as const;

/** `kvsim compare`'s result as one self-contained HTML page: the figures and measured-vs-simulated CDFs. */
export function renderCompareHtml(input: CompareHtmlInput): string {
  const charts: ChartSpec[] = [];
  for (const m of ["ttft", "tpot", "itl", "e2e"] as const) {
    const { measured, simulated } = input.samples[m];
    if (measured.length === 0 && simulated.length === 0) continue;
    const c = twoCdfs(measured, simulated);
    // A long tail on either side (an 18 s gap among 20 ms ones) gets a log scale.
    const axis = chooseAxis(c.x);
    const log = axis?.log === true;
    charts.push({
      id: `cdf-${m}`,
      title: NAMES[m],
      xLabel: `${NAMES[m]} (ms${log ? ", log scale" : ""})`,
      ...(axis === null ? {} : { xRange: axis.range }),
      ...(log ? { xLog: true } : {}),
      yLabel: "fraction of requests",
      x: c.x,
      series: [
        { label: `measured (${measured.length})`, values: c.measured },
        { label: `simulated (${simulated.length})`, values: c.simulated },
      ],
    });
  }
  const rows = input.figures.map((f): Cell[] => [
    f.name,
    f.stat,
    { value: f.measured },
    { value: f.simulated },
    f.error === null ? "-" : `${f.error >= 0 ? "+" : ""}${formatNumber(f.error * 100, 1)}%`,
  ]);
  const sections: Section[] = [
    {
      id: "figures",
      title: "Measured against simulated",
      html:
        `<div class="scroll">${table(["", "", "measured", "simulated", "error"], rows, "figures")}</div>` +
        (input.notes ?? []).map((n) => `<p class="note">note: ${escapeHtml(n)}</p>`).join(""),
    },
    ...(charts.length === 0
      ? []
      : [
          {
            id: "cdfs",
            title: "CDFs",
            html: `<p class="note">The compared requests on both sides (ITL: every gap between two tokens, where the file has them).</p>${chartGrid(charts)}`,
          },
        ]),
  ];
  return page({ title: input.title ?? "kvsim compare", subtitle: input.subtitle ?? [], sections, charts, assets: input.assets });
}
