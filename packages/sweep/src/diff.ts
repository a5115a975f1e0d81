/** One metric of two reports side by side. */
export interface MetricChange {
  readonly metric: string;
  readonly a: number | null;
  readonly b: number | null;
  /** b - a; null when either is missing. */
  readonly change: number | null;
  /** (b - a) / |a|; 0 when both are 0; null when a is 0 and b is not, or either is missing. */
  readonly relative: number | null;
  /** Other names of the same figure, folded into this row (vLLM's `median_ttft_ms` for `p50_ttft_ms`, ...). */
  readonly aliases?: readonly string[];
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

function split(report: Record<string, unknown>): { metrics: Map<string, number | null>; settings: Map<string, unknown> } {
  const metrics = new Map<string, number | null>();
  const settings = new Map<string, unknown>();
  for (const [k, v] of Object.entries(report)) {
    if (k === "digest") continue;
    // A top-level null is a metric without a value (latencies when no request completed).
    if (typeof v === "number" || v === null) metrics.set(k, v);
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
  const all = keys.map((metric): MetricChange => {
    const x = sa.metrics.get(metric) ?? null;
    const y = sb.metrics.get(metric) ?? null;
    const change = x === null || y === null ? null : y - x;
    const relative = x === null || y === null ? null : x === 0 ? (y === 0 ? 0 : null) : (y - x) / Math.abs(x);
    return { metric, a: x, b: y, change, relative };
  });
  const metrics = foldAliases(all);
  const settingKeys = [...sa.settings.keys(), ...[...sb.settings.keys()].filter((k) => !sa.settings.has(k))];
  const settings = settingKeys
    .filter((k) => !same(sa.settings.get(k), sb.settings.get(k)))
    .map((setting) => ({ setting, a: sa.settings.get(setting), b: sb.settings.get(setting) }));
  return { metrics, settings, sameDigest: typeof a.digest === "string" && a.digest === b.digest };
}

/** vLLM's names of report figures that are not a pattern of another name. */
const VLLM_NAMES: Readonly<Record<string, string>> = {
  completed: "completed_requests",
  request_throughput: "request_throughput_rps",
  output_throughput: "output_throughput_tok_s",
  request_goodput: "goodput_rps",
};

/** The name a figure is listed under: `median_*` as `p50_*`, `*_e2el_ms` as `*_e2e_ms`, vLLM's names as kvsim's. */
export function canonicalMetric(metric: string): string {
  const name = metric.replace(/^median_(ttft|tpot|itl|e2e|e2el)_ms$/, "p50_$1_ms").replace(/_e2el_ms$/, "_e2e_ms");
  return VLLM_NAMES[name] ?? name;
}

/**
 * One row per figure: a metric whose canonical name is another metric's, with the same values on
 * both sides, is folded into that row as an alias (a differing value keeps its own row, so
 * nothing is hidden). The row keeps the canonical name and the place of its first member.
 */
function foldAliases(metrics: readonly MetricChange[]): MetricChange[] {
  const groups = new Map<string, MetricChange[]>();
  for (const m of metrics) {
    const key = canonicalMetric(m.metric);
    groups.set(key, [...(groups.get(key) ?? []), m]);
  }
  const out: MetricChange[] = [];
  const placed = new Set<string>();
  for (const m of metrics) {
    const key = canonicalMetric(m.metric);
    if (placed.has(key)) continue;
    placed.add(key);
    const members = groups.get(key)!;
    const head = members.find((x) => x.metric === key) ?? members[0]!;
    const folded = members.filter((x) => x !== head && x.a === head.a && x.b === head.b);
    out.push(folded.length === 0 ? head : { ...head, aliases: folded.map((x) => x.metric) });
    for (const x of members) if (x !== head && !folded.includes(x)) out.push(x);
  }
  return out;
}
