/**
 * Stage summaries: a measured run known only by its aggregates per load stage (a rate, a duration,
 * mean and percentile TTFT and E2E, prompt and output lengths), as inference-perf's lifecycle
 * metrics give them. Many users have nothing finer. Pure: the caller reads the file.
 */
import { duplicateKey, InputError, jsonSyntaxError } from "@kvsim/profile-schema";

/** Mean and percentiles of one metric over a stage's successful requests; null when absent. */
export interface StageDistribution {
  readonly mean: number;
  readonly median: number | null;
  readonly p90: number | null;
  readonly p99: number | null;
}

/** The server's settings a stage-summary file records (the rest were vLLM's defaults). */
export interface StageEngine {
  readonly model: string;
  readonly tensorParallelSize: number;
  readonly maxModelLen: number | null;
  readonly maxNumBatchedTokens: number | null;
  readonly maxNumSeqs: number | null;
}

/** inference-perf's `shared_prefix` data with `output_len` tokens asked for each request. */
export interface SharedPrefixWorkload {
  readonly numGroups: number;
  readonly numPromptsPerGroup: number;
  readonly systemPromptLen: number;
  readonly questionLen: number;
  readonly outputLen: number;
}

/** One load stage: constant arrivals at `rate` for `durationS`, and what the client measured. */
export interface StageSummary {
  /** 0-based, in the order the stages ran. */
  readonly stage: number;
  /** Requests per second. */
  readonly rate: number;
  readonly durationS: number;
  readonly successes: number;
  readonly failures: number;
  /** Client-side, ms. */
  readonly ttftMs: StageDistribution;
  readonly e2eMs: StageDistribution;
  /** Tokens as the server counted them (the chat template included). */
  readonly promptLen: StageDistribution;
  readonly outputLen: StageDistribution;
  /**
   * The time per output token, ms: (e2e mean - ttft mean) / (output_len mean - 1). The file's own
   * `tpot` counts stream chunks, not tokens, and is not read. Null with a mean output under 2.
   */
  readonly tpotMs: number | null;
  /** Failures > 0: the stage was overloaded (client timeouts) and is not fitted on. */
  readonly excluded: boolean;
  /** Why it is excluded, in words; undefined when it is not. */
  readonly excludedReason?: string;
}

export interface StageRun {
  readonly format: "stage-summary";
  readonly file: string;
  /** The file's `experiment` name, or its file name. */
  readonly name: string;
  readonly engine: StageEngine;
  readonly workload: SharedPrefixWorkload;
  readonly stages: readonly StageSummary[];
  /** The GPU the file names, if any (informational: the spec's engine.gpu prices the replay). */
  readonly gpu: string | null;
  /** What the format cannot tell, in words. */
  readonly lacks: readonly string[];
}

export const STAGE_SUMMARY_LACKS: readonly string[] = [
  "per-request times (only stage means and percentiles: no per-request join, no held-out requests)",
  "the prompts' text (the shared-prefix workload is rebuilt with seeded token ids)",
  "engine timestamps (TTFT is client-side: HTTP, tokenisation and detokenisation included)",
];

type Json = Record<string, unknown>;

function fail(file: string, path: string, message: string): never {
  throw new InputError(file, [{ path, message }]);
}

function object(file: string, v: unknown, path: string): Json {
  if (v === undefined || v === null) fail(file, path, "is required");
  if (typeof v !== "object" || Array.isArray(v)) fail(file, path, "must be an object");
  return v as Json;
}

function list(file: string, v: unknown, path: string): unknown[] {
  if (v === undefined || v === null) fail(file, path, "is required");
  if (!Array.isArray(v)) fail(file, path, "must be a list");
  return v;
}

const join = (path: string, key: string): string => (path === "" ? key : `${path}.${key}`);

function number(file: string, o: Json, key: string, path: string, check?: { min: number; exclusive?: boolean; integer?: boolean }): number {
  const at = join(path, key);
  const v = o[key];
  if (v === undefined || v === null) fail(file, at, "is required");
  if (typeof v !== "number" || !Number.isFinite(v)) fail(file, at, `must be a finite number (got ${JSON.stringify(v)})`);
  if (check !== undefined) {
    if (check.integer === true && !Number.isInteger(v)) fail(file, at, `must be a whole number (got ${v})`);
    if (check.exclusive === true ? v <= check.min : v < check.min)
      fail(file, at, `must be ${check.exclusive === true ? "greater than" : "at least"} ${check.min} (got ${v})`);
  }
  return v;
}

function optionalNumber(file: string, o: Json, key: string, path: string): number | null {
  return o[key] === undefined || o[key] === null ? null : number(file, o, key, path, { min: 0 });
}

/** A {mean, median, p90, p99} object, scaled (seconds to ms); only the mean is required. */
function distribution(file: string, o: Json, key: string, path: string, scale: number): StageDistribution {
  const at = join(path, key);
  const d = object(file, o[key], at);
  const opt = (k: string) => {
    const v = optionalNumber(file, d, k, at);
    return v === null ? null : v * scale;
  };
  return { mean: number(file, d, "mean", at, { min: 0 }) * scale, median: opt("median"), p90: opt("p90"), p99: opt("p99") };
}

/** Whether a text looks like a stage-summary file (a JSON document with `stages` and `workload`). */
export function looksLikeStageSummary(text: string): boolean {
  const t = text.trimStart();
  if (!t.startsWith("{")) return false;
  try {
    const v = JSON.parse(t) as unknown;
    return v !== null && typeof v === "object" && !Array.isArray(v) && Array.isArray((v as Json).stages) && (v as Json).workload !== undefined;
  } catch {
    return false;
  }
}

/**
 * Parses a stage-summary file: `engine`, `workload` (inference-perf's `data.type: shared_prefix`
 * and `load.type: constant` with `load.stages[]` of rate and duration) and `stages[]` (per stage:
 * rate, successes, failures, and ttft, e2e in seconds and prompt_len, output_len in tokens, each
 * as mean with optional median, p90, p99). Throws an InputError naming the file and the field path.
 */
export function parseStageSummary(text: string, file: string): StageRun {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the text, newlines and all: say where instead.
    const err = jsonSyntaxError(text);
    throw new InputError(file, [{ line: err.line, column: err.column, path: "", message: err.message }]);
  }
  const dup = duplicateKey(text);
  if (dup !== undefined) {
    const before = text.slice(0, dup.offset);
    throw new InputError(file, [
      {
        line: before.split("\n").length,
        column: dup.offset - before.lastIndexOf("\n"),
        path: dup.key,
        message: "duplicate key (JSON.parse would keep the last)",
      },
    ]);
  }
  const root = object(file, doc, "");

  const e = object(file, root.engine, "engine");
  const model = e.model;
  if (typeof model !== "string" || model.trim() === "") fail(file, "engine.model", "must be a non-empty string (the served model)");
  const engine: StageEngine = {
    model,
    tensorParallelSize: e.tensor_parallelism === undefined ? 1 : number(file, e, "tensor_parallelism", "engine", { min: 1, integer: true }),
    maxModelLen: e.max_model_len == null ? null : number(file, e, "max_model_len", "engine", { min: 1, integer: true }),
    maxNumBatchedTokens: e.max_num_batched_tokens == null ? null : number(file, e, "max_num_batched_tokens", "engine", { min: 1, integer: true }),
    maxNumSeqs: e.max_num_seqs == null ? null : number(file, e, "max_num_seqs", "engine", { min: 1, integer: true }),
  };

  const w = object(file, root.workload, "workload");
  const data = object(file, w.data, "workload.data");
  if (data.type !== "shared_prefix") fail(file, "workload.data.type", `must be shared_prefix, the workload kvsim rebuilds (got ${JSON.stringify(data.type)})`);
  const sp = object(file, data.shared_prefix, "workload.data.shared_prefix");
  const spPath = "workload.data.shared_prefix";
  const workload: SharedPrefixWorkload = {
    numGroups: number(file, sp, "num_groups", spPath, { min: 1, integer: true }),
    numPromptsPerGroup: number(file, sp, "num_prompts_per_group", spPath, { min: 1, integer: true }),
    systemPromptLen: number(file, sp, "system_prompt_len", spPath, { min: 0, integer: true }),
    questionLen: number(file, sp, "question_len", spPath, { min: 1, integer: true }),
    outputLen: number(file, sp, "output_len", spPath, { min: 1, integer: true }),
  };
  const load = object(file, w.load, "workload.load");
  if (load.type !== "constant")
    fail(file, "workload.load.type", `must be constant (arrivals evenly spaced at the stage's rate), got ${JSON.stringify(load.type)}`);
  const loadStages = list(file, load.stages, "workload.load.stages");

  const raw = list(file, root.stages, "stages");
  if (raw.length === 0) fail(file, "stages", "holds no stage");
  if (raw.length !== loadStages.length) fail(file, "stages", `has ${raw.length} stages, workload.load.stages has ${loadStages.length}`);
  const stages: StageSummary[] = raw.map((s, i) => {
    const at = `stages[${i}]`;
    const o = object(file, s, at);
    const l = object(file, loadStages[i], `workload.load.stages[${i}]`);
    const rate = number(file, l, "rate", `workload.load.stages[${i}]`, { min: 0, exclusive: true });
    const durationS = number(file, l, "duration", `workload.load.stages[${i}]`, { min: 0, exclusive: true });
    const ownRate = o.rate === undefined ? rate : number(file, o, "rate", at);
    if (ownRate !== rate) fail(file, `${at}.rate`, `is ${ownRate}, workload.load.stages[${i}].rate is ${rate}`);
    const successes = number(file, o, "successes", at, { min: 0, integer: true });
    const failures = o.failures === undefined ? 0 : number(file, o, "failures", at, { min: 0, integer: true });
    if (successes === 0) fail(file, `${at}.successes`, "is 0: a stage with no successful request has no latencies to compare");
    const ttftMs = distribution(file, o, "ttft", at, 1000);
    const e2eMs = distribution(file, o, "e2e", at, 1000);
    const promptLen = distribution(file, o, "prompt_len", at, 1);
    const outputLen = distribution(file, o, "output_len", at, 1);
    if (e2eMs.mean < ttftMs.mean)
      fail(file, `${at}.e2e.mean`, `is less than ttft.mean: requests finished before their first token (${e2eMs.mean / 1000} < ${ttftMs.mean / 1000})`);
    const tpotMs = outputLen.mean >= 2 ? (e2eMs.mean - ttftMs.mean) / (outputLen.mean - 1) : null;
    const excluded = failures > 0;
    return {
      stage: i,
      rate,
      durationS,
      successes,
      failures,
      ttftMs,
      e2eMs,
      promptLen,
      outputLen,
      tpotMs,
      excluded,
      ...(excluded
        ? {
            excludedReason: `${failures} of ${successes + failures} requests failed (client timeouts): the stage was overloaded and its means cover only the requests that finished, so it is not fitted on`,
          }
        : {}),
    };
  });
  const name = typeof root.experiment === "string" && root.experiment !== "" ? root.experiment : file;
  return { format: "stage-summary", file, name, engine, workload, stages, gpu: typeof root.gpu === "string" ? root.gpu : null, lacks: STAGE_SUMMARY_LACKS };
}
