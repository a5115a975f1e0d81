// What kvsim calibrate writes: the spec with the fitted timing, and the error tables it prints.
import { dirname, isAbsolute, relative, resolve } from "node:path";
import { Document, isScalar, visit } from "yaml";
import type { Comparison, FitWarning, StageComparison } from "@kvsim/calibrate";
import { textTable } from "../text-table.js";

/** The spec's raw document with `timing` (and `frontend`) replaced and relative paths rebased onto the output's folder. */
export function writtenSpec(
  raw: unknown,
  specFile: string,
  outFile: string,
  timing: Record<string, unknown>,
  frontendMs: number | undefined,
): Record<string, unknown> {
  const doc = structuredClone(raw) as Record<string, unknown>;
  const from = specFile === "<stdin>" ? process.cwd() : dirname(resolve(specFile));
  const to = dirname(resolve(outFile));
  const rebase = (v: unknown): unknown => {
    if (typeof v !== "string" || isAbsolute(v)) return v;
    const r = relative(to, resolve(from, v));
    return r.startsWith(".") ? r : `./${r}`;
  };
  doc.profile = rebase(doc.profile);
  for (const role of ["prefill", "decode"] as const) {
    const r = doc[role];
    if (r !== null && typeof r === "object" && "profile" in r) (r as Record<string, unknown>).profile = rebase((r as Record<string, unknown>).profile);
  }
  const w = doc.workload;
  if (w !== null && typeof w === "object" && "trace" in w) (w as Record<string, unknown>).trace = rebase((w as Record<string, unknown>).trace);
  doc.timing = timing;
  if (frontendMs !== undefined) doc.frontend = { overhead_ms: frontendMs };
  return doc;
}

/** YAML with lists of plain values on one line (cudagraph_capture_sizes: [1, 2, 4, ...]). */
function yamlText(value: unknown): string {
  const doc = new Document(value);
  visit(doc, {
    Seq(_, node) {
      if (node.items.every((i) => isScalar(i))) node.flow = true;
    },
  });
  return doc.toString({ lineWidth: 0 });
}

/** A spec as written to `out`: JSON for a .json name, else YAML. */
export const specText = (out: string, doc: Record<string, unknown>): string => (out.endsWith(".json") ? `${JSON.stringify(doc, null, 2)}\n` : yamlText(doc));

const fmt = (v: number | null, digits = 2): string =>
  v === null ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const pct = (v: number | null): string => (v === null ? "-" : `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}%`);

const NAMES = { ttft: "TTFT", tpot: "TPOT", itl: "ITL", e2e: "E2E" } as const;

/** Fit part and held-out part side by side: measured, simulated and error of each. */
export function errorTable(fit: Comparison, held: Comparison | undefined): string {
  const rows: string[][] = [["latency (ms)", "", "fit: measured", "simulated", "error", "held out: measured", "simulated", "error"]];
  fit.latency.forEach((l, i) => {
    if (l.metric === "itl" && l.stat !== "mean") return;
    const h = held?.latency[i];
    rows.push([
      NAMES[l.metric],
      l.stat,
      fmt(l.measured),
      fmt(l.simulated),
      pct(l.error),
      fmt(h?.measured ?? null),
      fmt(h?.simulated ?? null),
      pct(h?.error ?? null),
    ]);
  });
  const names = ["req/s", "tok/s"];
  fit.throughput.forEach((t, i) => {
    const h = held?.throughput[i];
    rows.push([
      "throughput",
      names[i]!,
      fmt(t.measured),
      fmt(t.simulated),
      pct(t.error),
      fmt(h?.measured ?? null),
      fmt(h?.simulated ?? null),
      pct(h?.error ?? null),
    ]);
  });
  return textTable(rows, 2);
}

/** Each stage's measured, simulated and error of TTFT mean and p90, TPOT and E2E mean. */
export function stageTable(stages: readonly StageComparison[]): string {
  const rows: string[][] = [
    ["stage", "req/s", "part", "TTFT mean: measured", "simulated", "error", "TTFT p90 error", "TPOT: measured", "simulated", "error", "E2E mean error"],
  ];
  for (const s of stages) {
    rows.push([
      String(s.stage),
      fmt(s.rate),
      s.excluded ? "excluded" : "fit",
      fmt(s.ttftMean.measured),
      fmt(s.ttftMean.simulated),
      pct(s.ttftMean.error),
      pct(s.ttftP90.error),
      fmt(s.tpot.measured),
      fmt(s.tpot.simulated),
      pct(s.tpot.error),
      pct(s.e2eMean.error),
    ]);
  }
  return textTable(rows, 1);
}

export function warningLines(warnings: readonly FitWarning[]): string[] {
  if (warnings.length === 0) return ["fit checks: the fit part's TPOT and TTFT means are within 10% and every fitted term is determined by the data"];
  return warnings.flatMap((w) => [`warning: ${w.message}`, ...(w.settle === undefined ? [] : [`  what would settle it: ${w.settle}`])]);
}
