import { parse as parseCsv } from "csv-parse/sync";
import { parseTree, printParseErrorCode, type ParseError } from "jsonc-parser";
import { z } from "zod";
import { describeJsonError, renderValue, zodIssues } from "./document.js";
import { InputError, type InputIssue } from "./errors.js";
import { deepNestingOffset, scanJsonText } from "./json-text.js";
import { MAX_NESTING_DEPTH, MAX_SPEEDUP, MAX_VIRTUAL_TIME_MS, MAX_VIRTUAL_TIME_TEXT, MIN_SPEEDUP } from "./limits.js";
import { finiteNumber, nonBlank, positiveInt } from "./primitives.js";

import { MAX_REQUEST_TOKENS } from "./limits.js";

export { MAX_REQUEST_TOKENS };
const tokenCount = () => positiveInt().max(MAX_REQUEST_TOKENS, { error: `must be at most ${MAX_REQUEST_TOKENS} (2^24) tokens`, abort: true });
import type { TraceFormat } from "./spec.js";

/** One request of a trace, in the file's own time (the replay engine normalises to the first arrival). */
export interface TraceRecord {
  /** 1-based line of the record in the file. */
  readonly line: number;
  readonly requestId?: string;
  /** Mooncake `timestamp`; Azure `TIMESTAMP` as UTC epoch ms (sub-ms digits kept); kvsim `arrival_ms`. */
  readonly arrivalMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Mooncake: one id per trace block of the prompt; equal ids are equal prefix blocks. */
  readonly hashIds?: readonly number[];
  /** kvsim: the prompt's token ids, when the trace gives them. */
  readonly inputTokenIds?: Uint32Array;
  readonly sessionId?: string;
}

export interface TraceReadOptions {
  readonly format: TraceFormat;
  /** Names the source in every error (a path, or a label such as `<stdin>`). */
  readonly file: string;
  /** Mooncake: tokens per hash id (default 512). */
  readonly traceBlockSize?: number;
  /**
   * The spec's speedup (default 1): arrivals are divided by it in the replay, so each arrival, once
   * divided, must lie within MAX_VIRTUAL_TIME_MS of the first.
   */
  readonly speedup?: number;
}

/** What parsing one line needs besides the format. */
export type TraceLineOptions = Omit<TraceReadOptions, "format">;

/** Tokens per Mooncake hash id when the spec names none. */
export const DEFAULT_TRACE_BLOCK_SIZE = 512;
/** The first line of an Azure LLM inference trace. */
export const AZURE_TRACE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens";

const MAX_U32 = 2 ** 32 - 1;
const arrivalTime = () => finiteNumber().min(0, { error: "must not be negative" });

/**
 * An array of integers in [0, max]. Only the first bad element is reported: a prompt of 100,000
 * bad ids needs one message, not 100,000.
 */
const idArray = (plural: string, one: string, max: number) =>
  z
    // Returning undefined for a missing field keeps zod's message, which reads "is required".
    .array(z.unknown(), { error: (iss) => (iss.input === undefined ? undefined : `expected an array of ${plural}`) })
    .superRefine((ids, ctx) => {
      for (let i = 0; i < ids.length; i++) {
        const v = ids[i];
        if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > max) {
          ctx.addIssue({ code: "custom", path: [i], message: `must be ${one} (got ${renderValue(v)})` });
          return;
        }
      }
    })
    .transform((ids) => ids as number[]);

/** One line of a Mooncake JSONL trace. */
export const MooncakeTraceLineSchema = z.strictObject({
  /** Arrival in ms. */
  timestamp: arrivalTime(),
  input_length: tokenCount(),
  output_length: tokenCount(),
  /** One id per `trace_block_size` tokens of the prompt. */
  hash_ids: idArray("non-negative integers", "a non-negative integer", Number.MAX_SAFE_INTEGER),
  session_id: nonBlank().optional(),
});
export type MooncakeTraceLine = z.infer<typeof MooncakeTraceLineSchema>;

/** One line of a kvsim JSONL trace: the prompt by length (`input_tokens`) or by token ids. */
export const KvsimTraceLineSchema = z
  .strictObject({
    request_id: nonBlank(),
    arrival_ms: arrivalTime(),
    input_tokens: tokenCount().optional(),
    input_token_ids: idArray("unsigned 32-bit integers", `an integer in [0, ${MAX_U32}]`, MAX_U32).optional(),
    output_tokens: tokenCount(),
  })
  .superRefine((l, ctx) => {
    if (l.input_tokens === undefined && l.input_token_ids === undefined) {
      ctx.addIssue({ code: "custom", path: ["input_tokens"], message: "is required (or input_token_ids)" });
    }
    if (l.input_token_ids?.length === 0) {
      ctx.addIssue({ code: "custom", path: ["input_token_ids"], message: "must hold at least 1 token (got [])" });
    }
    if (l.input_tokens !== undefined && l.input_token_ids !== undefined && l.input_token_ids.length > 0 && l.input_tokens !== l.input_token_ids.length) {
      ctx.addIssue({
        code: "custom",
        path: ["input_tokens"],
        message: `must equal the length of input_token_ids (got ${l.input_tokens}, input_token_ids has ${l.input_token_ids.length})`,
      });
    }
  });
export type KvsimTraceLine = z.infer<typeof KvsimTraceLineSchema>;

/** One data row of an Azure LLM inference CSV trace, its counts already read as numbers. */
export const AzureTraceRowSchema = z.strictObject({
  /** UTC, e.g. `2023-11-16 18:15:46.6805900`. */
  TIMESTAMP: z.string(),
  ContextTokens: tokenCount(),
  GeneratedTokens: tokenCount(),
});
export type AzureTraceRow = z.infer<typeof AzureTraceRowSchema>;

const ALLOWED_KEYS: Record<"mooncake" | "kvsim", string> = {
  mooncake: Object.keys(MooncakeTraceLineSchema.shape).join(", "),
  kvsim: Object.keys(KvsimTraceLineSchema.shape).join(", "),
};
const TIME_FIELD: Record<TraceFormat, string> = { mooncake: "timestamp", azure: "TIMESTAMP", kvsim: "arrival_ms" };

/** A parsed line and how its arrival time reads in the file (for the non-decreasing check). */
interface ParsedLine {
  readonly record: TraceRecord;
  readonly shownTime: string;
}

function fail(file: string, line: number, issues: readonly InputIssue[]): never {
  throw new InputError(
    file,
    issues.map((i) => ({ ...i, line })),
  );
}

function checkBlockSize(size: number | undefined): number {
  const b = size ?? DEFAULT_TRACE_BLOCK_SIZE;
  if (!Number.isSafeInteger(b) || b < 1) throw new RangeError(`traceBlockSize must be a positive integer, got ${b}`);
  return b;
}

const tooDeep = (file: string, line: number, offset: number): never =>
  fail(file, line, [
    { path: "", message: `nests arrays and objects more than ${MAX_NESTING_DEPTH} levels deep, at column ${offset + 1}; a trace line is one flat object` },
  ]);

/**
 * JSON.parse is the fast path; on failure jsonc-parser finds the column of the first problem.
 * One more pass refuses a key given twice (JSON.parse keeps the last) and deep nesting (which
 * would overflow the validators).
 */
function parseJsonLine(text: string, file: string, line: number): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    // jsonc-parser recurses once per level: refuse deep nesting before it can overflow the stack.
    const deep = deepNestingOffset(text, MAX_NESTING_DEPTH);
    if (deep !== undefined) tooDeep(file, line, deep);
    const errors: ParseError[] = [];
    parseTree(text, errors, { disallowComments: true, allowTrailingComma: false });
    const first = errors[0];
    const what = first === undefined ? (e instanceof Error ? e.message : String(e)) : describeJsonError(printParseErrorCode(first.error));
    throw new InputError(file, [{ path: "", message: `malformed JSON: ${what}`, line, ...(first === undefined ? {} : { column: first.offset + 1 }) }]);
  }
  const problem = scanJsonText(text, MAX_NESTING_DEPTH);
  if (problem?.kind === "deep") tooDeep(file, line, problem.offset);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    fail(file, line, [{ path: "", message: `expected a JSON object (got ${renderValue(value)})` }]);
  }
  if (problem?.kind === "duplicate") {
    fail(file, line, [{ path: problem.key, message: `duplicate key (also at column ${problem.firstOffset + 1})`, column: problem.offset + 1 }]);
  }
  return value as Record<string, unknown>;
}

function validateLine<S extends z.ZodType>(schema: S, value: unknown, format: "mooncake" | "kvsim", file: string, line: number): z.output<S> {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return result.data;
  const issues = zodIssues(result.error).map((i) => (i.message === "unknown key" ? { ...i, message: `unknown key (allowed: ${ALLOWED_KEYS[format]})` } : i));
  return fail(file, line, issues);
}

/**
 * A Mooncake line that MooncakeTraceLineSchema certainly accepts, checked by hand (the schema
 * costs tens of microseconds a line); undefined for anything else, which then goes through the
 * schema for its messages. It accepts a subset of what the schema accepts, with the same output.
 */
function plainMooncakeLine(v: Record<string, unknown>): MooncakeTraceLine | undefined {
  for (const k in v) {
    if (k !== "timestamp" && k !== "input_length" && k !== "output_length" && k !== "hash_ids" && k !== "session_id") return undefined;
  }
  const { timestamp, input_length, output_length, hash_ids, session_id } = v;
  if (typeof timestamp !== "number" || !Number.isFinite(timestamp) || timestamp < 0) return undefined;
  const count = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= MAX_REQUEST_TOKENS;
  if (!count(input_length) || !count(output_length) || !Array.isArray(hash_ids)) return undefined;
  for (const id of hash_ids as unknown[]) {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id > Number.MAX_SAFE_INTEGER) return undefined;
  }
  if (session_id === undefined) return { timestamp, input_length, output_length, hash_ids: hash_ids as number[] };
  if (typeof session_id !== "string" || session_id.trim() === "") return undefined;
  return { timestamp, input_length, output_length, hash_ids: hash_ids as number[], session_id };
}

function parseMooncake(text: string, line: number, file: string, blockSize: number): ParsedLine {
  const value = parseJsonLine(text, file, line);
  const l = plainMooncakeLine(value) ?? validateLine(MooncakeTraceLineSchema, value, "mooncake", file, line);
  const capacity = l.hash_ids.length * blockSize;
  if (capacity < l.input_length) {
    fail(file, line, [
      {
        path: "hash_ids",
        message: `${l.hash_ids.length} ids x ${blockSize} tokens = ${capacity} tokens cannot cover input_length ${l.input_length}`,
      },
    ]);
  }
  const record: TraceRecord = {
    line,
    arrivalMs: l.timestamp,
    inputTokens: l.input_length,
    outputTokens: l.output_length,
    hashIds: l.hash_ids,
    ...(l.session_id === undefined ? {} : { sessionId: l.session_id }),
  };
  return { record, shownTime: String(l.timestamp) };
}

function parseKvsim(text: string, line: number, file: string): ParsedLine {
  const l = validateLine(KvsimTraceLineSchema, parseJsonLine(text, file, line), "kvsim", file, line);
  const ids = l.input_token_ids === undefined ? undefined : Uint32Array.from(l.input_token_ids);
  const record: TraceRecord = {
    line,
    requestId: l.request_id,
    arrivalMs: l.arrival_ms,
    // The schema guarantees one of the two, and equal lengths when both are given.
    inputTokens: l.input_tokens ?? ids?.length ?? 0,
    outputTokens: l.output_tokens,
    ...(ids === undefined ? {} : { inputTokenIds: ids }),
  };
  return { record, shownTime: String(l.arrival_ms) };
}

const AZURE_TIME = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z?$/;
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** `2023-11-16 18:15:46.6805900` as UTC epoch ms, the digits below a ms kept as a fraction. */
function azureTimeMs(s: string): number | undefined {
  const m = AZURE_TIME.exec(s);
  if (m === null) return undefined;
  const [y, mo, d, h, mi, sec] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const whole = Date.UTC(y, mo - 1, d, h, mi, sec);
  const t = new Date(whole);
  // Date.UTC rolls 2023-02-30 over to March: a round trip catches impossible dates and times.
  if (
    y < 1970 ||
    t.getUTCFullYear() !== y ||
    t.getUTCMonth() !== mo - 1 ||
    t.getUTCDate() !== d ||
    t.getUTCHours() !== h ||
    t.getUTCMinutes() !== mi ||
    t.getUTCSeconds() !== sec
  ) {
    return undefined;
  }
  const frac = m[7] ?? "";
  return frac === "" ? whole : whole + Number(frac) / 10 ** (frac.length - 3);
}

function parseAzure(text: string, line: number, file: string): ParsedLine {
  let rows: string[][];
  try {
    rows = parseCsv(text);
  } catch (e) {
    fail(file, line, [{ path: "", message: `malformed CSV: ${e instanceof Error ? e.message : String(e)}` }]);
  }
  const fields = rows[0] ?? [];
  if (rows.length !== 1 || fields.length !== 3) {
    fail(file, line, [{ path: "", message: `expected 3 fields (${AZURE_TRACE_HEADER}), found ${fields.length}` }]);
  }
  const [stamp, context, generated] = fields as [string, string, string];
  const issues: InputIssue[] = [];
  const arrivalMs = azureTimeMs(stamp.trim());
  if (arrivalMs === undefined) {
    issues.push({ path: "TIMESTAMP", message: `expected a UTC time such as 2023-11-16 18:15:46.6805900 (got ${renderValue(stamp)})` });
  }
  const count = (name: string, raw: string): number | undefined => {
    if (!DECIMAL.test(raw.trim())) {
      issues.push({ path: name, message: `expected a number (got ${renderValue(raw)})` });
      return undefined;
    }
    return Number(raw.trim());
  };
  const row = { TIMESTAMP: stamp, ContextTokens: count("ContextTokens", context), GeneratedTokens: count("GeneratedTokens", generated) };
  const result = AzureTraceRowSchema.safeParse(row, { reportInput: true });
  if (!result.success) {
    const seen = new Set(issues.map((i) => i.path));
    issues.push(...zodIssues(result.error).filter((i) => !seen.has(i.path)));
  }
  if (issues.length > 0 || !result.success || arrivalMs === undefined) return fail(file, line, issues);
  const record: TraceRecord = { line, arrivalMs, inputTokens: result.data.ContextTokens, outputTokens: result.data.GeneratedTokens };
  return { record, shownTime: stamp.trim() };
}

function parseLine(format: TraceFormat, text: string, line: number, options: TraceLineOptions, blockSize: number): ParsedLine | undefined {
  if (text.trim() === "") return undefined;
  switch (format) {
    case "mooncake":
      return parseMooncake(text, line, options.file, blockSize);
    case "azure":
      return parseAzure(text, line, options.file);
    case "kvsim":
      return parseKvsim(text, line, options.file);
  }
}

/**
 * Parses one line of a trace: a record, or undefined for a blank line. Throws an InputError naming
 * the file, the line and the field, with the offending value. Rules that span lines (the Azure
 * header, non-decreasing arrivals, unique request ids, a non-empty trace) are readTrace's.
 */
export function parseTraceLine(format: TraceFormat, text: string, lineNumber: number, options: TraceLineOptions): TraceRecord | undefined {
  return parseLine(format, text, lineNumber, options, checkBlockSize(options.traceBlockSize))?.record;
}

/**
 * Streams the records of a trace, one line at a time (the trace never has to be one string). Each
 * item of `lines` is one line, with or without its `\r`. Blank lines are skipped; the first bad
 * line ends the stream with an InputError naming the file, the line and the field.
 */
export async function* readTrace(lines: AsyncIterable<string> | Iterable<string>, options: TraceReadOptions): AsyncGenerator<TraceRecord> {
  const { format, file } = options;
  const blockSize = checkBlockSize(options.traceBlockSize);
  const speedup = options.speedup ?? 1;
  if (!(speedup >= MIN_SPEEDUP && speedup <= MAX_SPEEDUP)) throw new RangeError(`speedup must be in [${MIN_SPEEDUP}, ${MAX_SPEEDUP}], got ${speedup}`);
  let firstArrival: { readonly ms: number; readonly shown: string; readonly line: number } | undefined;
  let lineNumber = 0;
  let records = 0;
  let needHeader = format === "azure";
  let last: { readonly ms: number; readonly shown: string; readonly line: number } | undefined;
  const firstLineOf = new Map<string, number>();
  for await (const raw of lines) {
    lineNumber++;
    let text = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (lineNumber === 1 && text.startsWith("\uFEFF")) text = text.slice(1);
    if (text.trim() === "") continue;
    if (needHeader) {
      if (text !== AZURE_TRACE_HEADER)
        fail(file, lineNumber, [{ path: "", message: `the first line must be the header ${AZURE_TRACE_HEADER} (got ${renderValue(text)})` }]);
      needHeader = false;
      continue;
    }
    const parsed = parseLine(format, text, lineNumber, options, blockSize);
    if (parsed === undefined) continue;
    const { record, shownTime } = parsed;
    if (last !== undefined && record.arrivalMs < last.ms) {
      fail(file, lineNumber, [
        {
          path: TIME_FIELD[format],
          message: `arrival times must not decrease: got ${shownTime}, earlier than ${last.shown} on line ${last.line}`,
        },
      ]);
    }
    last = { ms: record.arrivalMs, shown: shownTime, line: lineNumber };
    firstArrival ??= last;
    // The replay's clock starts at the first arrival; past 10^13 ms a double cannot resolve a pass.
    if ((record.arrivalMs - firstArrival.ms) / speedup > MAX_VIRTUAL_TIME_MS) {
      const divided = speedup === 1 ? "" : ` (after dividing by speedup ${speedup})`;
      fail(file, lineNumber, [
        {
          path: TIME_FIELD[format],
          message: `arrives more than ${MAX_VIRTUAL_TIME_TEXT} after the first request on line ${firstArrival.line}${divided}: got ${shownTime}, the first was ${firstArrival.shown}`,
        },
      ]);
    }
    if (record.requestId !== undefined) {
      const first = firstLineOf.get(record.requestId);
      if (first !== undefined)
        fail(file, lineNumber, [{ path: "request_id", message: `must be unique in the file (got ${renderValue(record.requestId)}, also on line ${first})` }]);
      firstLineOf.set(record.requestId, lineNumber);
    }
    records++;
    yield record;
  }
  if (records === 0) {
    const why =
      format === "azure" && needHeader
        ? `the trace is empty (expected the header ${AZURE_TRACE_HEADER}, then one row per request)`
        : "the trace has no requests";
    throw new InputError(file, [{ path: "", message: why }]);
  }
}
