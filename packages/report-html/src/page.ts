import { clientSource, type ChartSpec } from "./client.js";

/** The charting library's browser files, inlined into every page (the caller reads them). */
export interface ChartAssets {
  /** uPlot's `dist/uPlot.iife.min.js` (defines the global `uPlot`). */
  readonly js: string;
  /** uPlot's `dist/uPlot.min.css`. */
  readonly css: string;
}

/** The npm package and files the pages inline (the version the package is tested with). */
export const CHART_LIBRARY = { package: "uplot", version: "1.6.32", js: "dist/uPlot.iife.min.js", css: "dist/uPlot.min.css", license: "MIT" } as const;

/** Text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** JSON safe inside a `<script>` element (no `</script>`, no HTML comment openers). */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

/** Inlined script text: a `</script` inside it would end the element early. */
function scriptText(js: string): string {
  return js.replace(/<\/script/gi, "<\\/script");
}

/** A number as a table shows it: grouped thousands, `digits` decimals (none for integers). */
export function formatNumber(v: number | null | undefined, digits = 2): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "-";
  const d = Number.isInteger(v) ? 0 : digits;
  return v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
}

/** A table: header cells, then rows of cells (strings are escaped; `raw` cells are HTML). */
export type Cell =
  | string
  | number
  | null
  | { readonly raw: string }
  /** A number: `key` names it in the report (data-key, its exact value in data-value); `text` overrides how it shows. */
  | { readonly value: number | null; readonly digits?: number; readonly key?: string; readonly text?: string };

function cellHtml(c: Cell): string {
  if (c === null) return "<td>-</td>";
  if (typeof c === "string") return `<td>${escapeHtml(c)}</td>`;
  if (typeof c === "number") return `<td class="num">${formatNumber(c)}</td>`;
  if ("raw" in c) return `<td>${c.raw}</td>`;
  const key = c.key === undefined ? "" : ` data-key="${escapeHtml(c.key)}" data-value="${c.value === null ? "" : String(c.value)}"`;
  return `<td class="num"${key}>${c.text === undefined ? formatNumber(c.value, c.digits) : escapeHtml(c.text)}</td>`;
}

export function table(header: readonly string[], rows: readonly (readonly Cell[])[], id?: string): string {
  const head = `<tr>${header.map((h) => `<th>${escapeHtml(h)}</th>`).join("")}</tr>`;
  const body = rows.map((r) => `<tr>${r.map(cellHtml).join("")}</tr>`).join("\n");
  return `<table${id === undefined ? "" : ` id="${id}"`}><thead>${head}</thead><tbody>\n${body}\n</tbody></table>`;
}

/** A section of the page. */
export interface Section {
  readonly id: string;
  readonly title: string;
  readonly html: string;
}

/** Chart placeholders for a grid of charts (the page's script draws them). */
export function chartGrid(charts: readonly ChartSpec[], columns = 2): string {
  return `<div class="grid g${columns}">${charts.map((c) => `<div class="chart" id="${escapeHtml(c.id)}" data-title="${escapeHtml(c.title)}"></div>`).join("")}</div>`;
}

const STYLE = `
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; background: #fff; }
header { padding: 16px 24px; background: #f4f6f8; border-bottom: 1px solid #dde; }
header h1 { margin: 0 0 4px; font-size: 20px; }
header p { margin: 2px 0; color: #555; }
main { padding: 8px 24px 40px; max-width: 1400px; }
section { margin-top: 24px; }
h2 { font-size: 17px; border-bottom: 1px solid #eee; padding-bottom: 4px; }
nav a { margin-right: 12px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #e3e3e3; padding: 3px 8px; text-align: left; }
th { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; padding: 8px; overflow: auto; max-height: 420px; }
.grid { display: grid; gap: 12px; }
.g1 { grid-template-columns: 1fr; }
.g2 { grid-template-columns: repeat(auto-fit, minmax(min(480px, 100%), 1fr)); }
.grid > * { min-width: 0; }
.chart { min-height: 300px; }
.note { color: #666; font-size: 13px; }
.tables { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.scroll { max-width: 100%; overflow-x: auto; }
code { overflow-wrap: anywhere; }
header p.timing { color: #333; }
header .label { font-weight: 600; }
.warnings { margin: 8px 0 4px; padding: 0; list-style: none; }
.warnings li { background: #fff4e5; border: 1px solid #f0b429; border-left: 6px solid #d9822b; padding: 6px 10px; margin: 4px 0; color: #5c3c00; max-width: 1100px; }
.warnings li strong { color: #8a4b00; }
@media (max-width: 600px) {
  header { padding: 12px; }
  main { padding: 4px 12px 32px; }
  th, td { padding: 2px 5px; }
}
`;

/** The whole page: one self-contained HTML document (no network needed to view it). */
export function page(opts: {
  title: string;
  subtitle: readonly string[];
  /** What the timings rest on (the timing model and its caveat), shown in the header. */
  timing?: string;
  /** Shown in the header, each in a box that stands out (a saturated run, a cutoff). */
  warnings?: readonly string[];
  sections: readonly Section[];
  charts: readonly ChartSpec[];
  assets: ChartAssets;
}): string {
  const nav = opts.sections.map((s) => `<a href="#${s.id}">${escapeHtml(s.title)}</a>`).join("");
  const timing = opts.timing === undefined ? "" : `<p class="timing" id="timing"><span class="label">timing:</span> ${escapeHtml(opts.timing)}</p>`;
  const warnings =
    opts.warnings === undefined || opts.warnings.length === 0
      ? ""
      : `<ul class="warnings" id="warnings">${opts.warnings.map((w) => `<li><strong>warning:</strong> ${escapeHtml(w)}</li>`).join("")}</ul>`;
  const body = opts.sections.map((s) => `<section id="${s.id}"><h2>${escapeHtml(s.title)}</h2>\n${s.html}\n</section>`).join("\n");
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kvsim">
<title>${escapeHtml(opts.title)}</title>
<style>${opts.assets.css}</style>
<style>${STYLE}</style>
</head>
<body>
<header><h1>${escapeHtml(opts.title)}</h1>${opts.subtitle.map((l) => `<p>${escapeHtml(l)}</p>`).join("")}${timing}${warnings}<nav>${nav}</nav></header>
<main>
${body}
<p class="note">Charts: drag across a chart to zoom in, double-click to zoom out; time series share their cursor. Drawn with uPlot (MIT licence), inlined.</p>
</main>
<script>${scriptText(opts.assets.js)}</script>
<script type="application/json" id="kvsim-charts">${scriptJson(opts.charts)}</script>
<script>(${scriptText(clientSource())})(uPlot, JSON.parse(document.getElementById("kvsim-charts").textContent));</script>
</body>
</html>
`;
}
