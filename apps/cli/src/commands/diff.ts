import { formatPath, InputError, parseDocumentText } from "@kvsim/profile-schema";
import { canonicalMetric, diffReports, type MetricChange } from "@kvsim/sweep";
import { readText, UsageError, type CliIo } from "../io.js";
import type { RegisterCommand } from "./index.js";
import { textTable } from "../text-table.js";

/** The path to the first number in `value` that is not finite (JSON's 1e400 reads as Infinity), or undefined. */
function nonFinitePath(value: unknown): PropertyKey[] | undefined {
  const stack: { v: unknown; path: PropertyKey[] }[] = [{ v: value, path: [] }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { v, path } = item;
    if (typeof v === "number" && !Number.isFinite(v)) return path;
    if (v === null || typeof v !== "object") continue;
    const entries: [PropertyKey, unknown][] = Array.isArray(v) ? v.map((x: unknown, i) => [i, x]) : Object.entries(v);
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ v: entries[i]![1], path: [...path, entries[i]![0]] });
  }
  return undefined;
}

function readReport(file: string): Record<string, unknown> {
  const doc = parseDocumentText(readText(file), file, "json");
  const v = doc.value;
  if (v === null || typeof v !== "object" || Array.isArray(v) || !("digest" in v)) {
    throw new InputError(file, [{ path: "", message: "is not a kvsim report (a JSON object with a digest, as written by kvsim replay --report)" }]);
  }
  const bad = nonFinitePath(v);
  if (bad !== undefined)
    throw new InputError(file, [
      { path: formatPath(bad), message: "is not a finite number (1e400 and the like overflow a double; kvsim writes none)", ...(doc.locate(bad) ?? {}) },
    ]);
  return v;
}

const fmt = (v: number | null, digits = 2): string =>
  v === null
    ? "-"
    : Number.isInteger(v)
      ? v.toLocaleString("en-US")
      : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const signed = (v: number | null, digits = 2): string => (v === null ? "-" : `${v > 0 ? "+" : ""}${fmt(v, digits)}`);
const pct = (v: number | null): string => (v === null ? "-" : `${v > 0 ? "+" : ""}${(v * 100).toFixed(1)}%`);

/** The alias rules behind folded names, each once: `median_* = p50_*`, `*_e2el_ms = *_e2e_ms`, `completed = completed_requests`. */
function aliasRules(aliases: readonly string[]): string[] {
  const rules = new Set<string>();
  for (const a of aliases) {
    if (a.startsWith("median_")) rules.add("median_* = p50_*");
    if (a.endsWith("_e2el_ms")) rules.add("*_e2el_ms = *_e2e_ms");
    if (!a.startsWith("median_") && !a.endsWith("_e2el_ms")) rules.add(`${a} = ${canonicalMetric(a)}`);
  }
  return [...rules];
}

/** `kvsim diff <a> <b>`: every metric side by side with its change, then the settings that differ. */
export function diffCommand(io: CliIo, fileA: string, fileB: string, format: string): number {
  if (format !== "table" && format !== "json") throw new UsageError(`--format must be table or json, got "${format}"`);
  const d = diffReports(readReport(fileA), readReport(fileB));
  if (format === "json") {
    io.out(`${JSON.stringify({ a: fileA, b: fileB, same_digest: d.sameDigest, metrics: d.metrics, settings: d.settings }, null, 2)}\n`);
    return 0;
  }
  const row = (m: MetricChange) => [m.metric, fmt(m.a), fmt(m.b), signed(m.change), pct(m.relative)];
  const lines = [
    `kvsim diff: a = ${fileA}, b = ${fileB}${d.sameDigest ? " (the same digest)" : ""}`,
    "",
    textTable([["metric", "a", "b", "b - a", "change"], ...d.metrics.map(row)]),
  ];
  const rules = aliasRules(d.metrics.flatMap((m) => m.aliases ?? []));
  if (rules.length > 0) lines.push(`(one row per figure; the same figures under other names: ${rules.join(", ")})`);
  lines.push("");
  const shown = (v: unknown): string => {
    if (v === undefined) return "(absent)";
    const text = JSON.stringify(v);
    return text.length > 60 ? `${text.slice(0, 57)}...` : text;
  };
  if (d.settings.length === 0) lines.push("settings and other fields: none differs");
  else lines.push("settings and other fields that differ:", textTable(d.settings.map((s) => [`  ${s.setting}`, shown(s.a), shown(s.b)])));
  io.out(`${lines.join("\n")}\n`);
  return 0;
}

export const registerDiff: RegisterCommand = (program, ctx) => {
  program
    .command("diff")
    .description(
      "Compare two replay reports (kvsim replay --report): every metric side by side with the absolute and relative change, and the settings that differ.",
    )
    .argument("<report-a>", "the first report (JSON)")
    .argument("<report-b>", "the second report (JSON)")
    .option("--format <format>", "table or json", "table")
    .action(ctx.run((a: string, b: string, flags: { format: string }) => diffCommand(ctx.io, a, b, flags.format)));
};
