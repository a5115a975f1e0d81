/**
 * The report's browser code. It runs in the page, not in Node: `clientSource()` gives its text,
 * which the page calls with the inlined uPlot and the page's data. It must stay self-contained
 * (no imports, no outer variables): only its own text is inlined.
 */

/** One line or point series of a chart. */
export interface SeriesSpec {
  readonly label: string;
  readonly values: readonly (number | null)[];
  readonly color?: string;
  /** Points only, no line (scatter-like data on a sorted x). */
  readonly points?: boolean;
  readonly dash?: boolean;
  /** Draw the line across null values (a series defined at a few x only). */
  readonly spanGaps?: boolean;
}

/** A chart as the page draws it: x values shared by every series (sorted), labels and marks. */
export interface ChartSpec {
  readonly id: string;
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly x: readonly number[];
  readonly series: readonly SeriesSpec[];
  /** Vertical dashed lines (an SLA on a latency axis). */
  readonly xMarks?: readonly { readonly value: number; readonly label: string }[];
  /** Horizontal dashed lines (an SLA on a metric axis). */
  readonly yMarks?: readonly { readonly value: number; readonly label: string }[];
  /** Charts with the same key share their cursor (time series). */
  readonly sync?: string;
  readonly height?: number;
  /** Log scale on x (latency CDFs spanning decades). */
  readonly xLog?: boolean;
}

// The browser and uPlot surfaces this code uses, described here so the package needs no DOM
// library (its users compile without one).
interface Ctx {
  save(): void;
  restore(): void;
  setLineDash(d: number[]): void;
  beginPath(): void;
  moveTo(x: number, y: number): void;
  lineTo(x: number, y: number): void;
  stroke(): void;
  fillText(t: string, x: number, y: number): void;
  lineWidth: number;
  strokeStyle: string;
  fillStyle: string;
  font: string;
}
interface Plot {
  readonly ctx: Ctx;
  readonly bbox: { left: number; top: number; width: number; height: number };
  valToPos(v: number, scale: string, canvasPixels?: boolean): number;
  setSize(size: { width: number; height: number }): void;
}
interface Element {
  getBoundingClientRect(): { width: number; height: number };
}
interface Browser {
  document: { getElementById(id: string): Element | null; body: { dataset: Record<string, string | undefined> } };
  addEventListener(type: string, f: () => void): void;
  setTimeout(f: () => void, ms: number): number;
  clearTimeout(id: number): void;
  kvsimCharts?: unknown;
}
type PlotCtor = new (opts: object, data: unknown[], target: Element) => Plot;

export function kvsimReportMain(uPlot: PlotCtor, charts: readonly ChartSpec[]): void {
  const window = globalThis as unknown as Browser;
  const document = window.document;
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  const drawn: { id: string; title: string; xLabel: string; yLabel: string; series: string[]; height: number; plot: Plot }[] = [];
  const widthOf = (el: Element) => Math.max(320, Math.floor(el.getBoundingClientRect().width) - 8);
  /** A scale range covering the data and the marks, with a little room. */
  const reach = (marks: number[]) => (_u: unknown, min: number | null, max: number | null) => {
    const lo = Math.min(min ?? marks[0]!, ...marks);
    const hi = Math.max(max ?? marks[0]!, ...marks);
    const pad = (hi - lo) * 0.04 || Math.abs(hi) * 0.1 || 1;
    return [lo >= 0 && lo - pad < 0 ? 0 : lo - pad, hi + pad];
  };
  for (const c of charts) {
    const el = document.getElementById(c.id);
    if (el === null) continue;
    const marks = (u: Plot) => {
      const ctx = u.ctx;
      ctx.save();
      ctx.setLineDash([6, 4]);
      ctx.lineWidth = 1.5;
      ctx.strokeStyle = "#d00";
      ctx.fillStyle = "#d00";
      ctx.font = "12px sans-serif";
      for (const m of c.xMarks ?? []) {
        const x = u.valToPos(m.value, "x", true);
        if (!(x >= u.bbox.left && x <= u.bbox.left + u.bbox.width)) continue;
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
        ctx.fillText(m.label, x + 4, u.bbox.top + 14);
      }
      for (const m of c.yMarks ?? []) {
        const y = u.valToPos(m.value, "y", true);
        if (!(y >= u.bbox.top && y <= u.bbox.top + u.bbox.height)) continue;
        ctx.beginPath();
        ctx.moveTo(u.bbox.left, y);
        ctx.lineTo(u.bbox.left + u.bbox.width, y);
        ctx.stroke();
        ctx.fillText(m.label, u.bbox.left + 4, y - 4);
      }
      ctx.restore();
    };
    const series: object[] = [{ label: c.xLabel }];
    c.series.forEach((s, i) => {
      const color = s.color ?? palette[i % palette.length];
      const one: Record<string, unknown> = { label: s.label, stroke: color, width: 1.5, spanGaps: s.spanGaps === true };
      if (s.dash === true) one.dash = [5, 3];
      if (s.points === true) {
        one.paths = () => null;
        one.points = { show: true, size: 4, stroke: color, fill: color };
      } else {
        one.points = { show: false };
      }
      series.push(one);
    });
    const opts = {
      title: c.title,
      width: widthOf(el),
      height: c.height ?? 260,
      // The scales reach the marks, so an SLA beyond the data still shows where it lies.
      scales: {
        x: { time: false, ...(c.xLog === true ? { distr: 3 } : {}), ...(c.xMarks === undefined || c.xMarks.length === 0 ? {} : { range: reach(c.xMarks.map((m) => m.value)) }) },
        ...(c.yMarks === undefined || c.yMarks.length === 0 ? {} : { y: { range: reach(c.yMarks.map((m) => m.value)) } }),
      },
      axes: [
        { label: c.xLabel, stroke: "#333", grid: { stroke: "#eee" } },
        { label: c.yLabel, stroke: "#333", size: 70, grid: { stroke: "#eee" } },
      ],
      cursor: { drag: { x: true, y: false }, ...(c.sync === undefined ? {} : { sync: { key: c.sync } }) },
      legend: { live: true },
      series,
      hooks: { draw: [marks] },
    };
    const plot = new uPlot(opts, [c.x, ...c.series.map((s) => s.values)], el);
    drawn.push({ id: c.id, title: c.title, xLabel: c.xLabel, yLabel: c.yLabel, series: c.series.map((s) => s.label), height: opts.height, plot });
  }
  let pending = 0;
  window.addEventListener("resize", () => {
    window.clearTimeout(pending);
    pending = window.setTimeout(() => {
      for (const d of drawn) {
        const el = document.getElementById(d.id);
        if (el !== null) d.plot.setSize({ width: widthOf(el), height: d.height });
      }
    }, 100);
  });
  window.kvsimCharts = drawn;
  document.body.dataset.chartsDrawn = String(drawn.length);
}

/** The browser code's text (an expression: a function of uPlot and the chart specs). */
export function clientSource(): string {
  return kvsimReportMain.toString();
}
