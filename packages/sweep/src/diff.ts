/** One metric of two reports side by side. */
export interface MetricChange {
  readonly metric: string;
  readonly a: number | null;
  readonly b: number | null;
  /** b - a; null when either is missing. */
  readonly change: number | null;
  /** (b - a) / |a|; 0 when both are 0; null when a is 0 and b is not, or either is missing. */
  readonly relative: number | null;
}

/** A setting (any non-metric field) that differs between the two reports. */
export interface SettingChange {
  readonly setting: string;
  readonly a: unknown;
  readonly b: unknown;
}

export interface ReportDiff {
  readonly metrics: readonly MetricChange[];
  readonly settings: readonly SettingChange[];
  /** Whether the two digests are equal (the same inputs and model give the same digest). */
  readonly sameDigest: boolean;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** Objects of metrics: their numeric leaves are metrics too (`handoffs.count`, `saturation.offered_rps`). */
const METRIC_OBJECTS = new Set(["handoffs", "saturation", "cutoff"]);

function leaves(value: unknown, prefix: string, out: Map<string, unknown>): void {
  if (isRecord(value)) {
    for (const [k, v] of Object.entries(value)) leaves(v, prefix === "" ? k : `${prefix}.${k}`, out);
  } else {
    out.set(prefix, value);
  }
}

function split(report: Record<string, unknown>): { metrics: Map<string, number>; settings: Map<string, unknown> } {
  const metrics = new Map<string, number>();
  const settings = new Map<string, unknown>();
  for (const [k, v] of Object.entries(report)) {
    if (k === "digest") continue;
    if (typeof v === "number") metrics.set(k, v);
    else if (isRecord(v) && METRIC_OBJECTS.has(k)) {
      for (const [sk, sv] of Object.entries(v)) {
        if (typeof sv === "number") metrics.set(`${k}.${sk}`, sv);
        else leaves(sv, `${k}.${sk}`, settings);
      }
    } else leaves(v, k, settings);
  }
  return { metrics, settings };
}

const same = (x: unknown, y: unknown): boolean => JSON.stringify(x) === JSON.stringify(y);

/**
 * Compares two reports (as written by `kvsim replay --report`): every metric (the top-level
 * numbers and `handoffs.*`) side by side with the absolute and relative change, in a's order then
 * b's new ones; and every other field that differs (run metadata, settings) by its dotted path.
 */
export function diffReports(a: Record<string, unknown>, b: Record<string, unknown>): ReportDiff {
  const sa = split(a);
  const sb = split(b);
  const keys = [...sa.metrics.keys(), ...[...sb.metrics.keys()].filter((k) => !sa.metrics.has(k))];
  const metrics = keys.map((metric): MetricChange => {
    const x = sa.metrics.get(metric) ?? null;
    const y = sb.metrics.get(metric) ?? null;
    const change = x === null || y === null ? null : y - x;
    const relative = x === null || y === null ? null : x === 0 ? (y === 0 ? 0 : null) : (y - x) / Math.abs(x);
    return { metric, a: x, b: y, change, relative };
  });
  const settingKeys = [...sa.settings.keys(), ...[...sb.settings.keys()].filter((k) => !sa.settings.has(k))];
  const settings = settingKeys.filter((k) => !same(sa.settings.get(k), sb.settings.get(k))).map((setting) => ({ setting, a: sa.settings.get(setting), b: sb.settings.get(setting) }));
  return { metrics, settings, sameDigest: typeof a.digest === "string" && a.digest === b.digest };
}
