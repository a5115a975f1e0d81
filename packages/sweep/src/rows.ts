import { NON_CANONICAL_KEYS, type ReplayReport } from "@kvsim/replay-engine";

/**
 * How a point ended: `ok` (the replay ran; its report is in the row), `refused` (invalid input:
 * the point's spec, its trace, or settings the ranks refuse), `failed` (the replay could not
 * finish) or `stopped` (the task's `stop` ended it once its SLA was lost; only tasks that ask).
 */
export type PointStatus = "ok" | "refused" | "failed" | "stopped";

/** The report of one point without the digest and the wall-clock fields (those are row fields). */
export type PointReport = Omit<ReplayReport, "digest" | "wall_time_ms" | "simulated_requests_per_wall_s">;

/**
 * One row of a sweep or search: one point. The data shape the sweep writes as JSON lines and that
 * plots read (see the README for every field).
 */
export interface SweepRow {
  /** The point's index: row-major over the grid axes (searches: the order of evaluation). */
  readonly point: number;
  /** Spec path to value: what this point set on the base spec. */
  readonly settings: Readonly<Record<string, unknown>>;
  readonly status: PointStatus;
  /** Why a point was refused or failed; null when ok. */
  readonly reason: string | null;
  /** Every metric of the replay report; null unless ok. */
  readonly report: PointReport | null;
  /** The report's digest (the same inputs give the same digest); null unless ok. */
  readonly digest: string | null;
  /** Host time the point took, in ms (not part of the digest). */
  readonly wall_time_ms: number;
  /** With an SLA: whether this point met it. */
  readonly sla_met?: boolean;
}

/** The row of a point whose replay finished. */
export function okRow(point: number, settings: Readonly<Record<string, unknown>>, report: ReplayReport, wallTimeMs: number): SweepRow {
  const copy: Record<string, unknown> = { ...report };
  for (const k of NON_CANONICAL_KEYS) Reflect.deleteProperty(copy, k);
  return { point, settings, status: "ok", reason: null, report: copy as PointReport, digest: report.digest, wall_time_ms: wallTimeMs };
}

/** The row of a point that was refused or failed. */
export function badRow(
  point: number,
  settings: Readonly<Record<string, unknown>>,
  status: Exclude<PointStatus, "ok">,
  reason: string,
  wallTimeMs: number,
): SweepRow {
  return { point, settings, status, reason, report: null, digest: null, wall_time_ms: wallTimeMs };
}

/** Flattens a report to dotted keys: `handoffs.count`, `handoffs.payload_bytes`, ... */
function flatten(value: unknown, prefix: string, out: Map<string, unknown>): void {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix === "" ? k : `${prefix}.${k}`, out);
  } else {
    out.set(prefix, value);
  }
}

export type Cell = string | number | boolean | null;

/**
 * Rows as one flat table (for CSV): `point`, one column per setting path (in the order they first
 * appear), `status`, `reason`, every report metric (nested ones dotted: `handoffs.count`), `digest`,
 * `wall_time_ms` and, when any row has it, `sla_met`. A cell a row has no value for is null.
 */
export function rowsTable(rows: readonly SweepRow[]): { columns: string[]; cells: Cell[][] } {
  const settingKeys: string[] = [];
  const metricKeys: string[] = [];
  const seenSetting = new Set<string>();
  const seenMetric = new Set<string>();
  const flat = rows.map((r) => {
    const m = new Map<string, unknown>();
    if (r.report !== null) flatten(r.report, "", m);
    for (const k of Object.keys(r.settings)) {
      if (!seenSetting.has(k)) {
        seenSetting.add(k);
        settingKeys.push(k);
      }
    }
    for (const k of m.keys()) {
      if (!seenMetric.has(k)) {
        seenMetric.add(k);
        metricKeys.push(k);
      }
    }
    return m;
  });
  const withSla = rows.some((r) => r.sla_met !== undefined);
  const columns = ["point", ...settingKeys, "status", "reason", ...metricKeys, "digest", "wall_time_ms", ...(withSla ? ["sla_met"] : [])];
  const cell = (v: unknown): Cell =>
    v === undefined || v === null ? null : typeof v === "number" || typeof v === "string" || typeof v === "boolean" ? v : JSON.stringify(v);
  const cells = rows.map((r, i) => [
    r.point,
    ...settingKeys.map((k) => cell(r.settings[k])),
    r.status,
    r.reason,
    ...metricKeys.map((k) => cell(flat[i]!.get(k))),
    r.digest,
    r.wall_time_ms,
    ...(withSla ? [r.sla_met ?? null] : []),
  ]);
  return { columns, cells };
}
