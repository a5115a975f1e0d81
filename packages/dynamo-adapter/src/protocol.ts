import { MAX_REQUEST_TOKENS, MAX_VIRTUAL_TIME_MS, MAX_VIRTUAL_TIME_TEXT } from "@kvsim/profile-schema";
import { describeJson, JsonSyntaxError, parseJsonExact, type JsonValue } from "./json-u64.js";

/**
 * The request side of the line-delimited JSON protocol: one JSON object per line, each with an
 * `id` (string or integer, echoed in the response) and an `op`. Parsing is strict: unknown keys,
 * missing fields and wrong types are refused with a message that names the field.
 */

/** A prompt as Dynamo's engine `Request`: u32 token ids and an output length. */
export interface ProtocolRequest {
  readonly request_id: string;
  readonly tokens: readonly number[];
  readonly max_output_tokens: number;
}

export type RequestId = string | number;

export type ProtocolCommand =
  | { readonly op: "submit"; readonly request: ProtocolRequest }
  | { readonly op: "submit_handoff_prefill"; readonly handoff_id: string; readonly request: ProtocolRequest }
  | { readonly op: "reserve_destination"; readonly handoff_id: string; readonly request: ProtocolRequest }
  | { readonly op: "activate_destination"; readonly handoff_id: string }
  | { readonly op: "cancel_destination"; readonly handoff_id: string }
  | { readonly op: "release_source"; readonly handoff_id: string }
  | { readonly op: "cancel_source"; readonly handoff_id: string }
  | { readonly op: "cancel_request"; readonly request_id: string }
  | { readonly op: "step"; readonly now_ms: number }
  | { readonly op: "metrics" }
  | { readonly op: "info" }
  | { readonly op: "handoff_delay"; readonly transfer_timing: JsonValue; readonly destination_reserved?: JsonValue };

export type ProtocolOp = ProtocolCommand["op"];

/** Error codes of the protocol's `{code, message}` error object. */
export type ProtocolErrorCode =
  /** The line is not JSON. */
  | "parse_error"
  /** JSON, but not a valid request: not an object, no or bad id, unknown op, missing field, wrong type. */
  | "invalid_request"
  /** The rank refused the command (its reason); nothing changed. */
  | "command_refused"
  /** A step before the end of the previous pass. */
  | "invalid_time"
  /** A broken invariant inside the rank; the session refuses every later command. */
  | "internal_error"
  /** The timing model refused to price a pass (timing outside_grid "refuse"); the session refuses every later command. */
  | "timing_refused"
  /** A previous internal error poisoned the session. */
  | "session_poisoned";

export type ParsedLine =
  | { readonly ok: true; readonly id: RequestId; readonly command: ProtocolCommand }
  | { readonly ok: false; readonly id: RequestId | null; readonly code: "parse_error" | "invalid_request"; readonly message: string };

type Obj = Readonly<Record<string, JsonValue>>;

const isObj = (v: JsonValue | undefined): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

const show = (v: JsonValue | undefined): string => describeJson(v);

class Invalid extends Error {}

const invalid = (message: string): never => {
  throw new Invalid(message);
};

/** The fields each op takes besides `id` and `op`. */
const FIELDS: Readonly<Record<ProtocolOp, readonly string[]>> = {
  submit: ["request"],
  submit_handoff_prefill: ["handoff_id", "request"],
  reserve_destination: ["handoff_id", "request"],
  activate_destination: ["handoff_id"],
  cancel_destination: ["handoff_id"],
  release_source: ["handoff_id"],
  cancel_source: ["handoff_id"],
  cancel_request: ["request_id"],
  step: ["now_ms"],
  metrics: [],
  info: [],
  handoff_delay: ["transfer_timing", "destination_reserved"],
};

const isOp = (op: string): op is ProtocolOp => Object.hasOwn(FIELDS, op);

function nonEmptyString(o: Obj, key: string, where = key): string {
  const v = o[key];
  if (typeof v !== "string" || v === "") invalid(`${where} must be a non-empty string, got ${show(v)}`);
  return v as string;
}

const U32_MAX = 0xffffffff;

function request(v: JsonValue | undefined): ProtocolRequest {
  if (!isObj(v)) return invalid(`request must be an object, got ${show(v)}`);
  for (const key of Object.keys(v)) {
    if (key === "output_token_ids") invalid("request.output_token_ids is not supported: kvsim samples its own deterministic output token ids");
    if (key !== "request_id" && key !== "tokens" && key !== "max_output_tokens") invalid(`request.${key}: unknown key`);
  }
  const id = nonEmptyString(v, "request_id", "request.request_id");
  const tokens = v.tokens;
  if (!Array.isArray(tokens)) return invalid(`request.tokens must be an array of u32 token ids, got ${show(tokens)}`);
  const list = tokens as readonly JsonValue[];
  if (list.length === 0) invalid("request.tokens must hold at least one token");
  if (list.length > MAX_REQUEST_TOKENS) invalid(`request.tokens must hold at most ${MAX_REQUEST_TOKENS} (2^24) tokens, got ${list.length}`);
  for (let i = 0; i < list.length; i++) {
    const t = list[i];
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t > U32_MAX) invalid(`request.tokens[${i}] must be a u32 token id, got ${show(t)}`);
  }
  const max = v.max_output_tokens;
  if (typeof max !== "number" || !Number.isSafeInteger(max) || max < 0 || max > MAX_REQUEST_TOKENS) {
    invalid(`request.max_output_tokens must be an integer from 0 to ${MAX_REQUEST_TOKENS} (2^24), got ${show(max)}`);
  }
  return { request_id: id, tokens: list as readonly number[], max_output_tokens: max as number };
}

function command(op: ProtocolOp, o: Obj): ProtocolCommand {
  switch (op) {
    case "submit":
      return { op, request: request(o.request) };
    case "submit_handoff_prefill":
    case "reserve_destination":
      return { op, handoff_id: nonEmptyString(o, "handoff_id"), request: request(o.request) };
    case "activate_destination":
    case "cancel_destination":
    case "release_source":
    case "cancel_source":
      return { op, handoff_id: nonEmptyString(o, "handoff_id") };
    case "cancel_request":
      return { op, request_id: nonEmptyString(o, "request_id") };
    case "step": {
      const now = o.now_ms;
      // Past 10^13 ms a double no longer resolves a pass: the clock would stop.
      if (typeof now !== "number" || !Number.isFinite(now) || now < 0 || now > MAX_VIRTUAL_TIME_MS) {
        invalid(`now_ms must be a number from 0 to ${MAX_VIRTUAL_TIME_TEXT}, got ${show(now)}`);
      }
      return { op, now_ms: now as number };
    }
    case "metrics":
    case "info":
      return { op };
    case "handoff_delay": {
      if (o.transfer_timing === undefined) invalid("transfer_timing is required");
      const t = o.transfer_timing!;
      return o.destination_reserved === undefined ? { op, transfer_timing: t } : { op, transfer_timing: t, destination_reserved: o.destination_reserved };
    }
  }
}

/**
 * Parses one protocol line. Never throws: a line that is not JSON is a `parse_error`, anything
 * else wrong an `invalid_request`; the id is echoed whenever it could be read.
 */
export function parseLine(line: string): ParsedLine {
  let value: JsonValue;
  try {
    value = parseJsonExact(line);
  } catch (e) {
    if (e instanceof JsonSyntaxError) return { ok: false, id: null, code: "parse_error", message: `not JSON: ${e.message}` };
    throw e;
  }
  if (!isObj(value)) return { ok: false, id: null, code: "invalid_request", message: `a request must be a JSON object, got ${show(value)}` };
  const rawId = value.id;
  const idOk = typeof rawId === "string" || (typeof rawId === "number" && Number.isSafeInteger(rawId));
  const id: RequestId | null = idOk ? rawId : null;
  try {
    if (!idOk) invalid(`id must be a string or an integer, got ${show(rawId)}`);
    const op = value.op;
    if (typeof op !== "string") return invalid(`op must be a string, got ${show(op)}`);
    if (!isOp(op)) return invalid(`unknown op ${describeJson(op)}; ops: ${Object.keys(FIELDS).join(", ")}`);
    const allowed = FIELDS[op];
    for (const key of Object.keys(value)) {
      if (key !== "id" && key !== "op" && !allowed.includes(key)) invalid(`${key}: unknown key for op ${op}`);
    }
    return { ok: true, id: id!, command: command(op, value) };
  } catch (e) {
    if (e instanceof Invalid) return { ok: false, id, code: "invalid_request", message: e.message };
    throw e;
  }
}
