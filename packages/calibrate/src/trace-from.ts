/**
 * A kvsim trace from a measured run: the same requests (ids, arrival times, lengths) so that a
 * replay of them can be compared with the run, with the prompts' token ids when they are known
 * (prefix caching is then replayed exactly).
 */
import { duplicateKey, InputError, jsonSyntaxError } from "@kvsim/profile-schema";
import type { MeasuredRun } from "./measured.js";

/** The prompts of a run's workload, by request id. */
export type PromptTokens = ReadonlyMap<string, readonly number[]>;

/** The line of each request's prompt in the file parsePromptTokens read it from (for messages). */
const promptLines = new WeakMap<PromptTokens, ReadonlyMap<string, number>>();

/**
 * Reads prompts from JSONL, one request a line in the order they were sent: line N (counting
 * non-empty lines from 0) is request `bench-N` (vllm bench serve's naming) unless the line has a
 * `request_id`. The token ids are `input_tok_ids` or `input_token_ids`.
 */
export function parsePromptTokens(text: string, file: string): PromptTokens {
  const out = new Map<string, readonly number[]>();
  const lineOf = new Map<string, number>();
  const lines = text.split("\n");
  let n = 0;
  for (let i = 0; i < lines.length; i++) {
    const t = lines[i]!.trim();
    if (t === "") continue;
    const line = i + 1;
    let o: unknown;
    try {
      o = JSON.parse(t);
    } catch {
      const err = jsonSyntaxError(t);
      throw new InputError(file, [{ line, column: err.column, path: "", message: err.message }]);
    }
    if (o === null || typeof o !== "object" || Array.isArray(o)) throw new InputError(file, [{ line, path: "", message: "must be a JSON object" }]);
    const dup = duplicateKey(t);
    if (dup !== undefined)
      throw new InputError(file, [{ line, column: dup.offset + 1, path: dup.key, message: `duplicate key (also at column ${dup.firstOffset + 1})` }]);
    const rec = o as Record<string, unknown>;
    const key = "input_tok_ids" in rec ? "input_tok_ids" : "input_token_ids";
    const ids = rec[key];
    if (!Array.isArray(ids) || ids.length === 0)
      throw new InputError(file, [{ line, path: key, message: "is required: a non-empty list of the prompt's token ids (input_tok_ids or input_token_ids)" }]);
    for (let j = 0; j < ids.length; j++) {
      const v = ids[j] as unknown;
      if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 2 ** 32 - 1)
        throw new InputError(file, [{ line, path: `${key}[${j}]`, message: `must be a token id, an integer in [0, 2^32 - 1] (got ${JSON.stringify(v)})` }]);
    }
    const id = typeof rec.request_id === "string" ? rec.request_id : `bench-${n}`;
    const first = lineOf.get(id);
    if (first !== undefined) throw new InputError(file, [{ line, path: "request_id", message: `repeats request ${id} (first on line ${first})` }]);
    out.set(id, ids as number[]);
    lineOf.set(id, line);
    n++;
  }
  promptLines.set(out, lineOf);
  return out;
}

/**
 * The kvsim trace lines (JSONL text) of a measured run's requests, by arrival: `request_id`,
 * `arrival_ms` (from the run's first arrival), `input_token_ids` when `prompts` has the request
 * (its length must be the measured prompt length) else `input_tokens`, and `output_tokens`.
 */
export function measuredToTrace(run: MeasuredRun, prompts?: PromptTokens, promptsFile = "<prompts>"): string {
  if (prompts !== undefined) {
    // A prompt for a request the run does not have is a mismatched file, not something to skip.
    const known = new Set([...run.requests.map((r) => r.requestId), ...(run.skippedIds ?? [])]);
    for (const id of prompts.keys()) {
      if (known.has(id)) continue;
      const line = promptLines.get(prompts)?.get(id);
      throw new InputError(promptsFile, [
        {
          ...(line === undefined ? {} : { line }),
          path: "request_id",
          message: `${id} is not a request of the measured run ${run.file} (line N is request bench-N unless it has a request_id)`,
        },
      ]);
    }
  }
  let out = "";
  for (const r of run.requests) {
    if (r.arrivalMs === null)
      throw new InputError(run.file, [{ line: r.line, path: "", message: "has no arrival times (a vllm bench JSON without start_times): a trace needs them" }]);
    const ids = prompts?.get(r.requestId);
    if (ids !== undefined && ids.length !== r.inputTokens) {
      throw new InputError(promptsFile, [
        { path: r.requestId, message: `has ${ids.length} prompt token ids, the measured request (${run.file}:${r.line}) has ${r.inputTokens} prompt tokens` },
      ]);
    }
    const line =
      ids === undefined
        ? { request_id: r.requestId, arrival_ms: Number(r.arrivalMs.toFixed(3)), input_tokens: r.inputTokens, output_tokens: r.outputTokens }
        : { request_id: r.requestId, arrival_ms: Number(r.arrivalMs.toFixed(3)), input_token_ids: ids, output_tokens: r.outputTokens };
    out += `${JSON.stringify(line)}\n`;
  }
  return out;
}
