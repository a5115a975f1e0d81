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

/** How an axis shows its values: plain numbers, or bytes (and bytes per second) with decimal units. */
type AxisUnit = "bytes" | "bytes/s";

/** A chart as the page draws it: x values shared by every series (sorted), labels and marks. */
export interface ChartSpec {
  readonly id: string;
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly x: readonly number[];
  readonly series: readonly SeriesSpec[];
  /** Vertical dashed lines (an SLA on a latency axis). Outside the x range: named at the plot's edge. */
  readonly xMarks?: readonly { readonly value: number; readonly label: string }[];
  /** Horizontal dashed lines (an SLA on a metric axis). Outside the y range: named at the plot's edge. */
  readonly yMarks?: readonly { readonly value: number; readonly label: string }[];
  /** Charts with the same key share their cursor (time series). */
  readonly sync?: string;
  readonly height?: number;
  /** Log scale on x (latency CDFs spanning decades). */
  readonly xLog?: boolean;
  /** Log scale on y (an SLA frontier whose misses run decades past the bound). */
  readonly yLog?: boolean;
  /** The x scale's range; absent: the data's, stretched to reach the marks. */
  readonly xRange?: readonly [number, number];
  /** The y scale's range; absent: the data's, stretched to reach the marks. */
  readonly yRange?: readonly [number, number];
  /** How the y axis shows its values (absent: plain numbers). */
  readonly yUnit?: AxisUnit;
  /** A line under the plot's title: what the axis leaves out (a clipped tail), drawn in the plot's corner. */
  readonly note?: string;
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
  fillRect(x: number, y: number, w: number, h: number): void;
  measureText(t: string): { width: number };
  lineWidth: number;
  strokeStyle: string;
  fillStyle: string;
  font: string;
  textAlign: string;
  textBaseline: string;
}
interface Plot {
  readonly ctx: Ctx;
  readonly bbox: { left: number; top: number; width: number; height: number };
  readonly scales: Record<string, { min?: number | null; max?: number | null } | undefined>;
  valToPos(v: number, scale: string, canvasPixels?: boolean): number;
  setSize(size: { width: number; height: number }): void;
}
interface Element {
  getBoundingClientRect(): { width: number; height: number };
}
interface Canvas {
  getContext(kind: "2d"): Ctx | null;
}
interface Browser {
  document: { getElementById(id: string): Element | null; createElement(tag: "canvas"): Canvas; body: { dataset: Record<string, string | undefined> } };
  addEventListener(type: string, f: () => void): void;
  setTimeout(f: () => void, ms: number): number;
  clearTimeout(id: number): void;
  devicePixelRatio?: number;
  kvsimCharts?: unknown;
}
type PlotCtor = new (opts: object, data: unknown[], target: Element) => Plot;

function kvsimReportMain(uPlot: PlotCtor, charts: readonly ChartSpec[]): void {
  const window = globalThis as unknown as Browser;
  const document = window.document;
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  const drawn: { id: string; title: string; xLabel: string; yLabel: string; series: string[]; height: number; plot: Plot }[] = [];
  const widthOf = (el: Element) => Math.max(240, Math.floor(el.getBoundingClientRect().width) - 8);
  // The axes' font, set on every axis so the space their values take can be measured.
  const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
  const LABEL_FONT = `bold ${FONT}`;
  const measure = document.createElement("canvas").getContext("2d");
  const textWidth = (t: string) => {
    if (measure === null) return t.length * 7;
    measure.font = FONT;
    return measure.measureText(t).width;
  };
  /** A number as an axis shows it: grouped thousands, at most 4 significant digits after the point. */
  const plain = (v: number) =>
    Math.abs(v) >= 1 || v === 0 ? v.toLocaleString("en-US", { maximumFractionDigits: 2 }) : v.toLocaleString("en-US", { maximumSignificantDigits: 4 });
  /** Bytes with a decimal unit: 0 B, 350 kB, 1.2 GB (and per second). */
  const bytes = (v: number, perSecond: boolean) => {
    const units = ["B", "kB", "MB", "GB", "TB", "PB"];
    let u = 0;
    let x = Math.abs(v);
    while (x >= 1000 && u < units.length - 1) {
      x /= 1000;
      u++;
    }
    const text = `${v < 0 ? "-" : ""}${x.toLocaleString("en-US", { maximumFractionDigits: x < 10 && u > 0 ? 1 : 0 })} ${units[u]}`;
    return perSecond ? `${text}/s` : text;
  };
  const formatter = (unit: ChartSpec["yUnit"]) => (v: number) => (unit === undefined ? plain(v) : bytes(v, unit === "bytes/s"));
  /** A scale range covering the data and the marks, with a little room. */
  const reach = (marks: number[]) => (_u: unknown, min: number | null, max: number | null) => {
    const lo = Math.min(min ?? marks[0]!, ...marks);
    const hi = Math.max(max ?? marks[0]!, ...marks);
    const pad = (hi - lo) * 0.04 || Math.abs(hi) * 0.1 || 1;
    return [lo >= 0 && lo - pad < 0 ? 0 : lo - pad, hi + pad];
  };
  const fixed = (r: readonly [number, number]) => () => [r[0], r[1]];
  for (const c of charts) {
    const el = document.getElementById(c.id);
    if (el === null) continue;
    const pxRatio = window.devicePixelRatio ?? 1;
    // Labels drawn in the plot (marks, the note), each placed where it overlaps none drawn before.
    const marks = (u: Plot) => {
      const ctx = u.ctx;
      const { left, top, width, height } = u.bbox;
      const placed: { x0: number; y0: number; x1: number; y1: number }[] = [];
      const lineHeight = 14 * pxRatio;
      const pad = 4 * pxRatio;
      /** Draws a label at the first candidate (x of its left edge, y of its baseline) that is inside the plot and clear of the others. */
      const label = (text: string, candidates: readonly (readonly [number, number])[]) => {
        const w = ctx.measureText(text).width;
        const box = ([x, y]: readonly [number, number]) => ({ x0: x - 1, y0: y - lineHeight + 2 * pxRatio, x1: x + w + 1, y1: y + 3 * pxRatio });
        const inside = (b: ReturnType<typeof box>) => b.x0 >= left && b.x1 <= left + width && b.y0 >= top && b.y1 <= top + height;
        const clear = (b: ReturnType<typeof box>) => placed.every((p) => b.x1 <= p.x0 || b.x0 >= p.x1 || b.y1 <= p.y0 || b.y0 >= p.y1);
        const at = candidates.find((p) => inside(box(p)) && clear(box(p))) ?? candidates.find((p) => inside(box(p))) ?? candidates[0]!;
        const b = box(at);
        // A white backing keeps the label legible over the data and the grid.
        const fill = ctx.fillStyle;
        ctx.fillStyle = "rgba(255,255,255,0.85)";
        ctx.fillRect(b.x0, b.y0, b.x1 - b.x0, b.y1 - b.y0);
        ctx.fillStyle = fill;
        ctx.fillText(text, at[0], at[1]);
        placed.push(b);
      };
      ctx.save();
      ctx.font = `${12 * pxRatio}px sans-serif`;
      ctx.textAlign = "left";
      ctx.textBaseline = "alphabetic";
      ctx.lineWidth = 1.5 * pxRatio;
      ctx.strokeStyle = "#d00";
      ctx.fillStyle = "#d00";
      if (c.note !== undefined) {
        ctx.fillStyle = "#555";
        const w = ctx.measureText(c.note).width;
        label(c.note, [
          [left + width - w - pad, top + lineHeight],
          [left + pad, top + lineHeight],
        ]);
        ctx.fillStyle = "#d00";
      }
      const scaleOf = (key: string) => u.scales[key] ?? {};
      for (const m of c.xMarks ?? []) {
        const s = scaleOf("x");
        const x = u.valToPos(m.value, "x", true);
        const w = ctx.measureText(m.label).width;
        if (x >= left && x <= left + width) {
          ctx.setLineDash([6 * pxRatio, 4 * pxRatio]);
          ctx.beginPath();
          ctx.moveTo(x, top);
          ctx.lineTo(x, top + height);
          ctx.stroke();
          ctx.setLineDash([]);
          const ys = [top + lineHeight, top + 2 * lineHeight + pad, top + height - pad, top + height / 2];
          label(m.label, [...ys.map((y) => [x + pad, y] as const), ...ys.map((y) => [x - pad - w, y] as const)]);
        } else {
          // Beyond the axis: named at the edge it lies past, with an arrow.
          const right = s.max != null && m.value > s.max;
          const text = right ? `${m.label} \u2192` : `\u2190 ${m.label}`;
          const tw = ctx.measureText(text).width;
          const x0 = right ? left + width - tw - pad : left + pad;
          // A CDF reaches the right edge at its top and the left edge at its bottom: the free corner first.
          const ys = [top + height - pad - 2 * lineHeight, top + height - pad - lineHeight, top + lineHeight, top + 2 * lineHeight + pad];
          label(
            text,
            (right ? ys : [...ys].reverse()).map((y) => [x0, y] as const),
          );
        }
      }
      for (const m of c.yMarks ?? []) {
        const s = scaleOf("y");
        const y = u.valToPos(m.value, "y", true);
        const w = ctx.measureText(m.label).width;
        if (y >= top && y <= top + height) {
          ctx.setLineDash([6 * pxRatio, 4 * pxRatio]);
          ctx.beginPath();
          ctx.moveTo(left, y);
          ctx.lineTo(left + width, y);
          ctx.stroke();
          ctx.setLineDash([]);
          const xs = [left + pad, left + width - w - pad, left + (width - w) / 2];
          label(m.label, [...xs.map((x) => [x, y - pad] as const), ...xs.map((x) => [x, y + lineHeight] as const)]);
        } else {
          const above = s.max != null && m.value > s.max;
          const text = `${above ? "\u2191" : "\u2193"} ${m.label}`;
          const tw = ctx.measureText(text).width;
          const y0 = above ? top + lineHeight : top + height - pad;
          label(
            text,
            [left + pad, left + width - tw - pad, left + (width - tw) / 2].map((x) => [x, y0] as const),
          );
        }
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
        one.points = { show: true, size: 5, stroke: color, fill: color };
      } else {
        one.points = { show: false };
      }
      series.push(one);
    });
    const xFormat = formatter(undefined);
    const yFormat = formatter(c.yUnit);
    const scale = (log: boolean | undefined, range: ChartSpec["xRange"], marks: ChartSpec["xMarks"]) => ({
      ...(log === true ? { distr: 3, log: 10 } : {}),
      ...(range !== undefined
        ? { range: fixed(range) }
        : marks === undefined || marks.length === 0 || log === true
          ? {}
          : { range: reach(marks.map((m) => m.value)) }),
    });
    const values = (format: (v: number) => string) => (_u: unknown, splits: (number | null)[]) => splits.map((v) => (v === null ? null : format(v)));
    // Room between ticks for the widest value the axis can show (so x values never touch).
    const xSpace = (_u: unknown, _i: number, min: number, max: number) => Math.max(40, textWidth(xFormat(min)), textWidth(xFormat(max))) + 16;
    // The y axis as wide as its widest value, so the values never run into the axis title.
    const ySize = (_u: unknown, shown: (string | null)[] | null) => {
      const widest = Math.max(0, ...(shown ?? []).map((v) => (v === null ? 0 : textWidth(v))));
      return Math.ceil(widest) + 10 + 5 + 6;
    };
    const opts = {
      title: c.title,
      width: widthOf(el),
      height: c.height ?? 260,
      // The scales reach the marks, so an SLA beyond the data still shows where it lies.
      scales: {
        x: { time: false, ...scale(c.xLog, c.xRange, c.xMarks) },
        y: scale(c.yLog, c.yRange, c.yMarks),
      },
      axes: [
        { label: c.xLabel, stroke: "#333", grid: { stroke: "#eee" }, font: FONT, labelFont: LABEL_FONT, space: xSpace, values: values(xFormat) },
        { label: c.yLabel, stroke: "#333", grid: { stroke: "#eee" }, font: FONT, labelFont: LABEL_FONT, size: ySize, space: 24, values: values(yFormat) },
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
