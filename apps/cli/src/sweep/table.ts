import { formatSla, metricValue, type SearchOutcome, type SlaTerm, type SweepRow, type WorkerCounts } from "@kvsim/sweep";
import { textTable } from "../text-table.js";

/** One formatter per number of digits: `toLocaleString` with options builds a new one per call, which a table of many rows feels. */
const formats = new Map<number, Intl.NumberFormat>();
const num = (v: number | undefined, digits = 2): string => {
  if (v === undefined) return "-";
  let f = formats.get(digits);
  if (f === undefined) {
    f = new Intl.NumberFormat("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
    formats.set(digits, f);
  }
  return f.format(v);
};
const value = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v));

/** Metric columns of the table: the SLA's metrics when there is one, else a standard set. */
function metricColumns(sla: readonly SlaTerm[] | undefined): string[] {
  const base = ["completed_requests", "p90_ttft_ms", "mean_tpot_ms", "p99_itl_ms", "request_throughput_rps"];
  if (sla === undefined) return base;
  return [...new Set(["completed_requests", ...sla.map((t) => t.metric), "request_throughput_rps"])];
}

const SHORT: Record<string, string> = {
  completed_requests: "done",
  request_throughput_rps: "req/s",
};

/** The rows as a table: settings, status, metrics, the SLA verdict, a short digest and the wall time; then the reasons of bad rows. */
function formatRowsTable(rows: readonly SweepRow[], sla: readonly SlaTerm[] | undefined, rates = false): string {
  const settingKeys = [...new Set(rows.flatMap((r) => Object.keys(r.settings)))];
  // A rate search shows the offered rate beside the served one (request_throughput_rps).
  const metrics = rates ? ["saturation.offered_rps", ...metricColumns(sla)] : metricColumns(sla);
  const short = rates ? { ...SHORT, "saturation.offered_rps": "offered req/s", request_throughput_rps: "served req/s" } : SHORT;
  const head = ["point", ...settingKeys, "status", ...metrics.map((m) => short[m] ?? m), ...(sla === undefined ? [] : ["sla"]), "digest", "wall ms"];
  const body = rows.map((r) => [
    String(r.point),
    ...settingKeys.map((k) => (k in r.settings ? value(r.settings[k]) : "")),
    r.status,
    ...metrics.map((m) => (r.report === null ? "-" : num(metricValue(r.report, m), m.endsWith("_requests") ? 0 : 2))),
    ...(sla === undefined ? [] : [r.sla_met === true ? "met" : "missed"]),
    r.digest === null ? "-" : r.digest.slice(0, 12),
    num(r.wall_time_ms, 0),
  ]);
  const lines = [textTable([head, ...body], settingKeys.length + 2)];
  const bad = rows.filter((r) => r.status !== "ok");
  if (bad.length > 0) lines.push("", ...bad.map((r) => `point ${r.point} ${r.status}: ${r.reason ?? ""}`));
  return lines.join("\n");
}

const count = (rows: readonly SweepRow[]) => {
  const ok = rows.filter((r) => r.status === "ok").length;
  const refused = rows.filter((r) => r.status === "refused").length;
  return `${rows.length} point${rows.length === 1 ? "" : "s"}: ${ok} ok, ${refused} refused, ${rows.length - ok - refused} failed`;
};

export function formatSweepTable(rows: readonly SweepRow[], run: { describe: string; wallMs: number; sla: readonly SlaTerm[] | undefined }): string {
  const lines = [`kvsim sweep: ${count(rows)} in ${num(run.wallMs / 1000, 1)} s (${run.describe})`];
  if (run.sla !== undefined)
    lines.push(`SLA: ${formatSla(run.sla)} (and every request completed): ${rows.filter((r) => r.sla_met === true).length} points met it`);
  lines.push("", formatRowsTable(rows, run.sla));
  return `${lines.join("\n")}\n`;
}

const candidate = (c: number | WorkerCounts): string =>
  typeof c === "number" ? String(c) : "workers" in c ? `${c.workers} workers` : `${c.prefill} prefill + ${c.decode} decode`;

export function formatSearchTable(
  rows: readonly SweepRow[],
  searches: readonly SearchOutcome[],
  run: { describe: string; wallMs: number; sla: readonly SlaTerm[]; find: string },
): string {
  const lines = [
    `kvsim sweep --find ${run.find}: ${count(rows)} in ${num(run.wallMs / 1000, 1)} s (${run.describe})`,
    `SLA: ${formatSla(run.sla)} (and every request completed)`,
  ];
  for (const s of searches) {
    lines.push("");
    const at = Object.entries(s.settings)
      .map(([k, v]) => `${k}=${value(v)}`)
      .join(", ");
    if (at !== "") lines.push(`at ${at}:`);
    lines.push(`search over ${s.variable}: ${s.probes.map((p) => `${candidate(p.candidate)} ${p.meets ? "met" : "missed"}`).join(", ")}`);
    if (run.find === "max-rate") {
      const tol = s.tolerance === undefined ? "" : ` (tolerance ${num(s.tolerance * 100, 1)}%)`;
      // In requests per second, with the searched value beside it when that is a speedup.
      const speedup = s.variable === "workload.speedup";
      const rate = (rps: number | null | undefined, x: unknown, full: boolean) => {
        const r = rps === null || rps === undefined ? "? req/s" : `${num(rps)} req/s`;
        return speedup ? `${r} (${full ? "workload.speedup" : "speedup"} ${value(x)})` : full ? `${r} (${s.variable})` : r;
      };
      lines.push(
        s.answer === null
          ? `answer: none: the SLA is missed at every rate tried, down to ${rate(s.failing_rps, s.failing, true)}`
          : s.failing === null
            ? `answer: ${rate(s.answer_rps, s.answer, true)}: the SLA is met at every rate tried (the search stops doubling there)`
            : `answer: ${rate(s.answer_rps, s.answer, true)} meets the SLA; ${rate(s.failing_rps, s.failing, false)} does not${tol}`,
      );
    } else {
      lines.push(s.answer === null ? "answer: none within --max-workers" : `answer: ${candidate(s.answer)} (${value(s.gpus)} GPUs)`);
    }
  }
  lines.push("", formatRowsTable(rows, run.sla, run.find === "max-rate"));
  return `${lines.join("\n")}\n`;
}
