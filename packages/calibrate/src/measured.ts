/**
 * Measured runs: per-request latencies from a real (or simulated) run, in one shape whatever file
 * they came from. Pure: the caller reads the file and passes its text.
 */
import { pickupWaits, type PickupTimes } from "./pickup.js";
import { duplicateKey, InputError, jsonSyntaxError, MAX_REQUEST_TOKENS, MAX_VIRTUAL_TIME_MS, type InputIssue } from "@kvsim/profile-schema";

/** The formats `parseMeasured` reads. */
export type MeasuredFormat = "vllm-requests" | "vllm-bench" | "kvsim-requests";

/** One completed request of a measured run. Times in ms; arrivals relative to the run's first arrival. */
export interface MeasuredRequest {
  /** 1-based line of the request in its file (vllm-bench: 1, the file is one JSON document). */
  readonly line: number;
  readonly requestId: string;
  /** null when the file has no arrival times (vllm-bench without start_times). */
  readonly arrivalMs: number | null;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly ttftMs: number;
  readonly e2eMs: number;
  /** (e2e - ttft) / (output - 1); null for a one-token output. */
  readonly tpotMs: number | null;
  /** Queued to scheduled (vLLM per-request stats only). */
  readonly queueMs?: number;
  /** Every gap between two output tokens, when the file has them (vllm-bench). */
  readonly itlsMs?: readonly number[];
  /** Arrival to the engine's pickup (kvsim records with admitted_ms and token times; see pickup.ts). */
  readonly pickupWaitMs?: number;
}

export interface MeasuredRun {
  readonly format: MeasuredFormat;
  readonly file: string;
  /** Completed requests, by arrival (file order when the file has no arrival times). */
  readonly requests: readonly MeasuredRequest[];
  /** Requests the file lists that did not complete (failed, rejected): not compared. */
  readonly skipped: number;
  /** Their ids, when the file names them (a prompts file may list them too). */
  readonly skippedIds?: readonly string[];
  /** What this format cannot tell, in words (for help and reports). */
  readonly lacks: readonly string[];
}

/** What each format lacks, as `kvsim calibrate --help` and the README say it. */
export const MEASURED_FORMAT_LACKS: Readonly<Record<MeasuredFormat, readonly string[]>> = {
  "vllm-requests": ["per-token times (ITL percentiles; mean ITL is exact)", "token ids (take them from the workload)"],
  "vllm-bench": [
    "engine timestamps (client-side times include HTTP and detokenisation)",
    "arrival times unless start_times is present (no throughput, no --after-ms)",
    "request ids (entry N is matched to the workload's request bench-N)",
  ],
  "kvsim-requests": ["per-token times (ITL percentiles; mean ITL is exact)"],
};

function fail(file: string, issues: InputIssue[]): never {
  throw new InputError(file, issues);
}

/** Reads a finite number field of a JSON object, naming file, line and field when it is not one. */
function num(file: string, line: number, obj: Record<string, unknown>, key: string, where = key): number {
  const v = obj[key];
  if (v === undefined || v === null) fail(file, [{ line, path: where, message: "is required" }]);
  if (typeof v !== "number" || !Number.isFinite(v)) fail(file, [{ line, path: where, message: `must be a finite number (got ${JSON.stringify(v)})` }]);
  return v;
}

/**
 * The latest timestamp a measured file may state, in seconds: 10^10 s (about 317 years, kvsim's
 * latest virtual time). vLLM's timestamps are an engine's monotonic clock (seconds since boot) and
 * a bench's are seconds too; a larger one is a unit mistake or damage, and would stretch the run.
 */
const MAX_MEASURED_SECONDS = MAX_VIRTUAL_TIME_MS / 1000;

/** A timestamp or duration in seconds: a finite number from 0 to MAX_MEASURED_SECONDS. */
function seconds(file: string, line: number, obj: Record<string, unknown>, key: string, where = key): number {
  const v = num(file, line, obj, key, where);
  if (v < 0 || v > MAX_MEASURED_SECONDS) fail(file, [{ line, path: where, message: `must be from 0 to 10^10 seconds (about 317 years) (got ${v})` }]);
  return v;
}

/** A time in ms in kvsim's records: a finite number from 0 to MAX_VIRTUAL_TIME_MS. */
function millis(file: string, line: number, obj: Record<string, unknown>, key: string): number {
  const v = num(file, line, obj, key);
  if (v < 0 || v > MAX_VIRTUAL_TIME_MS) fail(file, [{ line, path: key, message: `must be from 0 to 10^13 ms (about 317 years) (got ${v})` }]);
  return v;
}

function count(file: string, line: number, obj: Record<string, unknown>, key: string, min: number, where = key): number {
  const v = num(file, line, obj, key, where);
  if (!Number.isInteger(v) || v < min) fail(file, [{ line, path: where, message: `must be an integer of at least ${min} (got ${v})` }]);
  // A trace written from the run (trace from-measured) must replay: kvsim's limit per request.
  if (v > MAX_REQUEST_TOKENS)
    fail(file, [{ line, path: where, message: `must be at most 2^24 = ${MAX_REQUEST_TOKENS} tokens, kvsim's largest request (got ${v})` }]);
  return v;
}

function parseJsonLine(file: string, line: number, text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    const err = jsonSyntaxError(text);
    fail(file, [{ line, column: err.column, path: "", message: err.message }]);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) fail(file, [{ line, path: "", message: "must be a JSON object" }]);
  // JSON.parse keeps the last of two equal keys; traces and specs refuse them, and so does this.
  const dup = duplicateKey(text);
  if (dup !== undefined) fail(file, [{ line, column: dup.offset + 1, path: dup.key, message: `duplicate key (also at column ${dup.firstOffset + 1})` }]);
  return v as Record<string, unknown>;
}

function jsonLines(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const t = lines[i]!.trim();
    if (t !== "") out.push({ line: i + 1, text: t });
  }
  return out;
}

function requestId(file: string, line: number, obj: Record<string, unknown>): string {
  const v = obj.request_id;
  if (v === undefined || v === null) fail(file, [{ line, path: "request_id", message: "is required" }]);
  if (typeof v !== "string" || v.trim() === "") fail(file, [{ line, path: "request_id", message: `must be a non-empty string (got ${JSON.stringify(v)})` }]);
  return v;
}

/** Sorted by arrival, ties in file order; arrivals made relative to the first. */
function byArrival(requests: MeasuredRequest[]): MeasuredRequest[] {
  const sorted = requests.map((r, i) => ({ r, i })).sort((a, b) => (a.r.arrivalMs ?? 0) - (b.r.arrivalMs ?? 0) || a.i - b.i);
  const first = sorted[0]?.r.arrivalMs ?? 0;
  return sorted.map(({ r }) => (r.arrivalMs === null ? r : { ...r, arrivalMs: r.arrivalMs - first }));
}

function checkUniqueIds(file: string, requests: readonly MeasuredRequest[]): void {
  const seen = new Map<string, number>();
  for (const r of requests) {
    const prev = seen.get(r.requestId);
    if (prev !== undefined) fail(file, [{ line: r.line, path: "request_id", message: `repeats ${r.requestId} (first on line ${prev})` }]);
    seen.set(r.requestId, r.line);
  }
}

const tpot = (ttft: number, e2e: number, out: number): number | null => (out >= 2 ? (e2e - ttft) / (out - 1) : null);

/**
 * vLLM v1's per-request state stats, one JSON object a line: request_id, input_toks, output_toks
 * and the engine's monotonic queued_ts, scheduled_ts, first_token_ts, last_token_ts (seconds).
 * TTFT is from queued_ts, as vLLM measures it; arrivals are queued_ts.
 */
function parseVllmRequests(text: string, file: string): MeasuredRun {
  const requests: MeasuredRequest[] = [];
  for (const { line, text: t } of jsonLines(text)) {
    const o = parseJsonLine(file, line, t);
    const id = requestId(file, line, o);
    const input = count(file, line, o, "input_toks", 1);
    const output = count(file, line, o, "output_toks", 1);
    const queued = seconds(file, line, o, "queued_ts");
    const scheduled = seconds(file, line, o, "scheduled_ts");
    const first = seconds(file, line, o, "first_token_ts");
    const last = seconds(file, line, o, "last_token_ts");
    if (scheduled < queued) fail(file, [{ line, path: "scheduled_ts", message: `is before queued_ts (${scheduled} < ${queued})` }]);
    if (first < scheduled)
      fail(file, [
        { line, path: "first_token_ts", message: `is before scheduled_ts: the request produced a token before it was scheduled (${first} < ${scheduled})` },
      ]);
    if (last < first)
      fail(file, [{ line, path: "last_token_ts", message: `is before first_token_ts: the request finished before its first token (${last} < ${first})` }]);
    const ttft = (first - queued) * 1000;
    const e2e = (last - queued) * 1000;
    requests.push({
      line,
      requestId: id,
      arrivalMs: queued * 1000,
      inputTokens: input,
      outputTokens: output,
      ttftMs: ttft,
      e2eMs: e2e,
      tpotMs: tpot(ttft, e2e, output),
      queueMs: (scheduled - queued) * 1000,
    });
  }
  checkUniqueIds(file, requests);
  return { format: "vllm-requests", file, requests: byArrival(requests), skipped: 0, lacks: MEASURED_FORMAT_LACKS["vllm-requests"] };
}

/** kvsim's `replay --requests` records; requests that did not complete are skipped. */
function parseKvsimRequests(text: string, file: string): MeasuredRun {
  const requests: MeasuredRequest[] = [];
  let skipped = 0;
  const skippedIds: string[] = [];
  // Every record's times that place an engine pickup (optional fields; absent, no pickup wait).
  const times: PickupTimes[] = [];
  /** For each request, its index in times. */
  const timeIndex: number[] = [];
  const optionalMs = (o: Record<string, unknown>, key: string): number | null => (typeof o[key] === "number" && Number.isFinite(o[key]) ? o[key] : null);
  for (const { line, text: t } of jsonLines(text)) {
    const o = parseJsonLine(file, line, t);
    const id = requestId(file, line, o);
    if (typeof o.arrival_ms === "number")
      times.push({
        arrivalMs: o.arrival_ms,
        admittedMs: optionalMs(o, "admitted_ms"),
        firstTokenMs: optionalMs(o, "first_token_ms"),
        lastTokenMs: optionalMs(o, "last_token_ms"),
      });
    if (o.status !== "completed") {
      if (typeof o.status !== "string") fail(file, [{ line, path: "status", message: "is required (completed, rejected, failed or in_flight)" }]);
      skipped++;
      skippedIds.push(id);
      continue;
    }
    const arrival = millis(file, line, o, "arrival_ms");
    const ttft = num(file, line, o, "ttft_ms");
    const e2e = millis(file, line, o, "e2e_ms");
    const input = count(file, line, o, "input_tokens", 1);
    const output = count(file, line, o, "output_tokens", 1);
    if (ttft < 0) fail(file, [{ line, path: "ttft_ms", message: `must not be negative: the first token came before the request arrived (got ${ttft})` }]);
    if (e2e < ttft) fail(file, [{ line, path: "e2e_ms", message: `is less than ttft_ms: the request finished before its first token (${e2e} < ${ttft})` }]);
    timeIndex.push(times.length - 1);
    requests.push({
      line,
      requestId: id,
      arrivalMs: arrival,
      inputTokens: input,
      outputTokens: output,
      ttftMs: ttft,
      e2eMs: e2e,
      tpotMs: tpot(ttft, e2e, output),
    });
  }
  checkUniqueIds(file, requests);
  // The waits need every record's step ends, so they are placed once all lines are read.
  const waits = pickupWaits(times);
  const withWaits = requests.map((r, j) => (times[timeIndex[j]!]!.admittedMs === null ? r : { ...r, pickupWaitMs: waits[timeIndex[j]!]! }));
  return { format: "kvsim-requests", file, requests: byArrival(withWaits), skipped, skippedIds, lacks: MEASURED_FORMAT_LACKS["kvsim-requests"] };
}

/**
 * `vllm bench serve --save-result --save-detailed`: one JSON object whose lists hold one entry per
 * request: input_lens, output_lens, ttfts (s), itls (lists, s), errors ("" on success) and, in
 * newer vLLM, start_times (s). Entry N is request `bench-N`.
 */
function parseVllmBench(text: string, file: string): MeasuredRun {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the text, newlines and all: say where instead.
    const err = jsonSyntaxError(text);
    fail(file, [{ line: err.line, column: err.column, path: "", message: err.message }]);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc))
    fail(file, [{ path: "", message: "must be a JSON object (vllm bench serve --save-result --save-detailed)" }]);
  const dup = duplicateKey(text);
  if (dup !== undefined) {
    const before = text.slice(0, dup.offset);
    const line = before.split("\n").length;
    const column = dup.offset - before.lastIndexOf("\n");
    fail(file, [{ line, column, path: dup.key, message: "duplicate key (JSON.parse would keep the last)" }]);
  }
  const o = doc as Record<string, unknown>;
  const list = (key: string, required: boolean): unknown[] | undefined => {
    const v = o[key];
    if (v === undefined && !required) return undefined;
    if (v === undefined) fail(file, [{ path: key, message: "is required (save the result with --save-detailed)" }]);
    if (!Array.isArray(v)) fail(file, [{ path: key, message: "must be a list with one entry per request" }]);
    return v as unknown[];
  };
  const inputs = list("input_lens", true)!;
  const outputs = list("output_lens", true)!;
  const ttfts = list("ttfts", true)!;
  const itls = list("itls", true)!;
  const errors = list("errors", false);
  const starts = list("start_times", false);
  const n = inputs.length;
  for (const [key, l] of [
    ["output_lens", outputs],
    ["ttfts", ttfts],
    ["itls", itls],
    ["errors", errors],
    ["start_times", starts],
  ] as const) {
    if (l !== undefined && l.length !== n) fail(file, [{ path: key, message: `has ${l.length} entries, input_lens has ${n}` }]);
  }
  const requests: MeasuredRequest[] = [];
  let skipped = 0;
  const skippedIds: string[] = [];
  const field = (l: unknown[], key: string, i: number): Record<string, unknown> => ({ [`${key}[${i}]`]: l[i] });
  for (let i = 0; i < n; i++) {
    const err = errors?.[i];
    if (typeof err === "string" && err !== "") {
      skipped++;
      skippedIds.push(`bench-${i}`);
      continue;
    }
    const output = count(file, 1, field(outputs, "output_lens", i), `output_lens[${i}]`, 0);
    if (output === 0) {
      skipped++;
      skippedIds.push(`bench-${i}`);
      continue;
    }
    const input = count(file, 1, field(inputs, "input_lens", i), `input_lens[${i}]`, 1);
    const ttft = seconds(file, 1, field(ttfts, "ttfts", i), `ttfts[${i}]`) * 1000;
    const gaps = itls[i];
    if (!Array.isArray(gaps)) fail(file, [{ line: 1, path: `itls[${i}]`, message: "must be a list of seconds between output tokens" }]);
    const itlsMs: number[] = [];
    for (let j = 0; j < gaps.length; j++) {
      const g = gaps[j] as unknown;
      if (typeof g !== "number" || !Number.isFinite(g) || g < 0 || g > MAX_MEASURED_SECONDS)
        fail(file, [{ line: 1, path: `itls[${i}][${j}]`, message: `must be a number of seconds from 0 to 10^10 (got ${JSON.stringify(g)})` }]);
      itlsMs.push(g * 1000);
    }
    const e2e = ttft + itlsMs.reduce((a, b) => a + b, 0);
    const arrival = starts === undefined ? null : seconds(file, 1, field(starts, "start_times", i), `start_times[${i}]`) * 1000;
    requests.push({
      line: 1,
      requestId: `bench-${i}`,
      arrivalMs: arrival,
      inputTokens: input,
      outputTokens: output,
      ttftMs: ttft,
      e2eMs: e2e,
      tpotMs: tpot(ttft, e2e, output),
      itlsMs,
    });
  }
  const lacks = MEASURED_FORMAT_LACKS["vllm-bench"].filter((l) => starts === undefined || !l.startsWith("arrival"));
  return { format: "vllm-bench", file, requests: byArrival(requests), skipped, skippedIds, lacks };
}

/** Which format a file's text is in, from its first object's fields; undefined when none fits. */
export function detectMeasuredFormat(text: string): MeasuredFormat | undefined {
  const t = text.trimStart();
  if (t.startsWith("{")) {
    const firstLine = t.split("\n", 1)[0]!;
    let first: unknown;
    try {
      first = JSON.parse(firstLine);
    } catch {
      // A pretty-printed document: the bench JSON.
      return /"ttfts"\s*:/.test(t) ? "vllm-bench" : undefined;
    }
    if (first !== null && typeof first === "object" && !Array.isArray(first)) {
      const keys = first as Record<string, unknown>;
      if ("ttfts" in keys) return "vllm-bench";
      if ("queued_ts" in keys || "first_token_ts" in keys) return "vllm-requests";
      if ("ttft_ms" in keys || "status" in keys) return "kvsim-requests";
    }
  }
  return undefined;
}

/**
 * Parses a measured run. Without `format`, it is detected from the fields (see
 * {@link detectMeasuredFormat}). Throws an InputError naming the file, the line and the field of
 * the first problem; a run with no completed request is refused.
 */
export function parseMeasured(text: string, file: string, format?: MeasuredFormat): MeasuredRun {
  const f = format ?? detectMeasuredFormat(text);
  if (f === undefined) {
    fail(file, [
      {
        line: 1,
        path: "",
        message:
          "is not a measured run kvsim reads: expected vLLM per-request stats (JSONL with queued_ts, first_token_ts, ...), a vllm bench serve --save-detailed JSON (with ttfts and itls) or kvsim replay --requests records (JSONL with ttft_ms)",
      },
    ]);
  }
  const run = f === "vllm-requests" ? parseVllmRequests(text, file) : f === "vllm-bench" ? parseVllmBench(text, file) : parseKvsimRequests(text, file);
  if (run.requests.length === 0) fail(file, [{ path: "", message: "holds no completed request" }]);
  return run;
}
