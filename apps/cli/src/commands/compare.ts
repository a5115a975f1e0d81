import {
  clockStartFor,
  compareRuns,
  detectMeasuredFormat,
  fromEnginePickup,
  parseMeasured,
  selectRequests,
  type CompareSelection,
  type Comparison,
  type CompareValue,
  type MeasuredFormat,
  type MeasuredRun,
} from "@kvsim/calibrate";
import { renderCompareHtml, type CompareSamples } from "@kvsim/report-html";
import { chartAssets } from "../html-assets.js";
import { checkOutputs, readText, UsageError, writeOutputs, type CliIo } from "../io.js";
import type { RegisterCommand } from "./index.js";
import { textTable } from "../text-table.js";

export interface CompareOptions {
  readonly measured?: string;
  readonly requests?: string;
  readonly fromRequest?: string;
  readonly afterMs?: string;
  readonly format: string;
  readonly html?: string;
  readonly force?: boolean;
}

/** Reads and parses a measured run (any format parseMeasured detects). */
export function readMeasured(file: string): MeasuredRun {
  return parseMeasured(readText(file), file);
}

function parseSelection(opts: CompareOptions): CompareSelection {
  if (opts.fromRequest !== undefined && opts.afterMs !== undefined) throw new UsageError("give --from-request or --after-ms, not both");
  if (opts.fromRequest !== undefined) {
    const k = Number(opts.fromRequest);
    if (!/^\d+$/.test(opts.fromRequest.trim()) || !Number.isSafeInteger(k))
      throw new UsageError(`--from-request must be a whole number of requests (0-based, by arrival), got "${opts.fromRequest}"`);
    return { kind: "from_request", index: k };
  }
  if (opts.afterMs !== undefined) {
    const t = Number(opts.afterMs);
    if (opts.afterMs.trim() === "" || !Number.isFinite(t) || t < 0)
      throw new UsageError(`--after-ms must be a non-negative number of ms, got "${opts.afterMs}"`);
    return { kind: "after_ms", ms: t };
  }
  return { kind: "all" };
}

const num = (v: number | null, digits = 2): string =>
  v === null ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const signedPct = (v: number | null): string => (v === null ? "-" : `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}%`);
const signedNum = (v: number | null): string => (v === null ? "-" : `${v >= 0 ? "+" : ""}${num(v)}`);

export function describeSelection(s: CompareSelection): string {
  switch (s.kind) {
    case "all":
      return "every request";
    case "from_request":
      return `requests from #${s.index} by arrival (0-based)`;
    case "after_ms":
      return `requests arriving at or after ${s.ms} ms`;
  }
}

const METRIC_NAMES = { ttft: "TTFT", tpot: "TPOT", itl: "ITL", e2e: "E2E" } as const;

/** The comparison as a table: latency rows (ms), throughput rows, notes. */
export function formatComparison(c: Comparison, measuredLabel: string, simulatedLabel: string): string {
  const row = (name: string, stat: string, v: CompareValue) => [name, stat, num(v.measured), num(v.simulated), signedNum(v.difference), signedPct(v.error)];
  const lines = [
    `kvsim compare: measured ${measuredLabel}, simulated ${simulatedLabel}`,
    `requests: ${c.selected} selected (${describeSelection(c.selection)}), ${c.matched} compared${c.missingCount > 0 ? `, ${c.missingCount} missing from the simulation (${c.missing.join(", ")}${c.missingCount > c.missing.length ? ", ..." : ""})` : ""}`,
    "",
    textTable(
      [
        ["latency (ms)", "", "measured", "simulated", "sim - meas", "error"],
        ...c.latency.map((l) => row(METRIC_NAMES[l.metric], l.stat, l)),
        ["", "", "", "", "", ""],
        row("throughput", "req/s", c.throughput[0]!),
        row("throughput", "tok/s", c.throughput[1]!),
      ],
      2,
    ),
  ];
  if (c.notes.length > 0) lines.push("", ...c.notes.map((n) => `note: ${n}`));
  return `${lines.join("\n")}\n`;
}

/** The compared requests' values on both sides (the selection's measured requests the simulation completed too). */
function compareSamples(measured: MeasuredRun, simulated: MeasuredRun, selection: CompareSelection): CompareSamples {
  const simById = new Map(simulated.requests.map((r) => [r.requestId, r]));
  const pairs = selectRequests(measured, selection).flatMap((m) => {
    const s = simById.get(m.requestId);
    return s === undefined ? [] : [[m, s] as const];
  });
  const side = (k: 0 | 1) => {
    const rs = pairs.map((p) => p[k]);
    return {
      ttft: rs.map((r) => r.ttftMs),
      tpot: rs.flatMap((r) => (r.tpotMs === null ? [] : [r.tpotMs])),
      // Per-token gaps only where every request has them (as the comparison's ITL percentiles).
      itl: rs.every((r) => r.itlsMs !== undefined) ? rs.flatMap((r) => r.itlsMs!) : [],
      e2e: rs.map((r) => r.e2eMs),
    };
  };
  const m = side(0);
  const s = side(1);
  return {
    ttft: { measured: m.ttft, simulated: s.ttft },
    tpot: { measured: m.tpot, simulated: s.tpot },
    itl: { measured: m.itl, simulated: s.itl },
    e2e: { measured: m.e2e, simulated: s.e2e },
  };
}

const FORMAT_WORDS: Readonly<Record<MeasuredFormat, string>> = {
  "vllm-requests": "vLLM per-request stats (a measured run)",
  "vllm-bench": "a vllm bench serve JSON (a measured run)",
  "kvsim-requests": "kvsim replay --requests records (a simulated run)",
};

/**
 * --requests must be kvsim's records (the simulated side); a measured vLLM file there is refused,
 * and named a swap when --measured holds kvsim's records. Files of no known format fall through to
 * the parser's located message.
 */
function checkSides(measuredFile: string, measured: MeasuredFormat | undefined, requestsFile: string, requests: MeasuredFormat | undefined): void {
  if (requests === undefined || requests === "kvsim-requests") return;
  const swapped =
    measured === "kvsim-requests"
      ? `; --measured ${measuredFile} holds ${FORMAT_WORDS[measured]}: the two files look swapped, try --measured ${requestsFile} --requests ${measuredFile}`
      : "";
  throw new UsageError(
    `--requests ${requestsFile} holds ${FORMAT_WORDS[requests]}, but --requests takes the simulated side (kvsim replay --requests records)${swapped}`,
  );
}

/** `kvsim compare`: a measured run against a simulated one, request by request id. */
export function compareCommand(io: CliIo, opts: CompareOptions): number {
  if (opts.format !== "table" && opts.format !== "json") throw new UsageError(`--format must be table or json, got "${opts.format}"`);
  if (opts.measured === undefined)
    throw new UsageError("--measured <file> is required (vLLM per-request stats JSONL, a vllm bench serve --save-detailed JSON, or kvsim records)");
  if (opts.requests === undefined) throw new UsageError("--requests <file> is required (the per-request records of kvsim replay --requests)");
  const selection = parseSelection(opts);
  checkOutputs([{ flag: "--html", path: opts.html }], opts.force === true);
  const assets = opts.html === undefined ? undefined : chartAssets();
  const measuredText = readText(opts.measured);
  const requestsText = readText(opts.requests);
  checkSides(opts.measured, detectMeasuredFormat(measuredText), opts.requests, detectMeasuredFormat(requestsText));
  const measured = parseMeasured(measuredText, opts.measured);
  const read = parseMeasured(requestsText, opts.requests);
  // Against vLLM's per-request stats, a simulated request's clock starts at the engine's pickup.
  const simulated = read.format === "kvsim-requests" && clockStartFor(measured) === "engine-pickup" ? fromEnginePickup(read) : read;
  const c = compareRuns(measured, simulated, selection);
  if (opts.html !== undefined && assets !== undefined) {
    const labels = [`measured ${measured.file} (${measured.format})`, `simulated ${simulated.file} (${simulated.format})`];
    const html = renderCompareHtml({
      assets,
      title: "kvsim compare",
      subtitle: [...labels, `requests: ${c.selected} selected (${describeSelection(c.selection)}), ${c.matched} compared`],
      figures: [
        ...c.latency.map((l) => ({ name: METRIC_NAMES[l.metric], stat: l.stat, measured: l.measured, simulated: l.simulated, error: l.error })),
        { name: "throughput", stat: "req/s", ...c.throughput[0]! },
        { name: "throughput", stat: "tok/s", ...c.throughput[1]! },
      ],
      samples: compareSamples(measured, simulated, selection),
      notes: c.notes,
    });
    writeOutputs([{ flag: "--html", path: opts.html, text: html }], opts.force === true);
  }
  if (opts.format === "json") {
    io.out(
      `${JSON.stringify({ measured: { file: measured.file, format: measured.format, lacks: measured.lacks }, simulated: { file: simulated.file, format: simulated.format }, ...c }, null, 2)}\n`,
    );
    return 0;
  }
  io.out(formatComparison(c, `${measured.file} (${measured.format})`, `${simulated.file} (${simulated.format})`));
  return 0;
}

export const registerCompare: RegisterCommand = (program, ctx) => {
  program
    .command("compare")
    .description(
      "Compare a measured run with a simulated one, request by request id: TTFT, TPOT, ITL and E2E (mean, median, p90, p99, numpy-style percentiles as vllm bench prints them) and throughput, each with its signed error (simulated - measured) / measured.",
    )
    .option(
      "--measured <file>",
      "the measured run: vLLM per-request stats (requests.jsonl), vllm bench serve --save-result --save-detailed JSON, or kvsim replay --requests records",
    )
    .option("--requests <file>", "the simulated run: kvsim replay --requests records (JSONL)")
    .option("--from-request <K>", "compare only the measured requests from position K on, by arrival (0-based): the held-out part")
    .option("--after-ms <T>", "compare only the requests arriving T ms or more after the measured run's first arrival")
    .option("--format <format>", "table or json", "table")
    .option("--html <file>", "also write a self-contained HTML page: the figures and measured against simulated CDFs of TTFT, TPOT, ITL and E2E")
    .option("--force", "overwrite an existing --html file", false)
    .addHelpText(
      "after",
      `
Measured formats (detected from their fields):
  vLLM per-request stats  JSONL: request_id, input_toks, output_toks, queued_ts, scheduled_ts,
                          first_token_ts, last_token_ts (engine seconds; TTFT from queued_ts,
                          when the engine picks the request up at a step boundary: the simulated
                          TTFT and E2E start at that pickup too, from the records' admitted_ms).
                          Lacks per-token times: ITL percentiles are "-" (mean ITL is exact).
  vllm bench JSON         --save-result --save-detailed: input_lens, output_lens, ttfts, itls,
                          errors, start_times. Client-side times; entry N is request bench-N;
                          without start_times, no throughput and no --after-ms.
  kvsim records           kvsim replay --requests. Lacks per-token times (as above).`,
    )
    .action(ctx.run((opts: CompareOptions) => compareCommand(ctx.io, opts)));
};
