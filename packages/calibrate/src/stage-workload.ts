/**
 * The workload a stage-summary run measured, rebuilt as kvsim trace records, and the per-stage
 * comparison of a replay of it with the measured means and percentiles.
 */
import type { TraceRecord } from "@kvsim/profile-schema";
import type { RequestRecord } from "@kvsim/replay-engine";
import { compareValue, type CompareValue } from "./compare.js";
import type { StageRun } from "./stage-summary.js";
import { mean, percentile } from "./stats.js";

export interface StageWorkloadOptions {
  /** Seeds the token ids and the prompts' order (default 0). */
  readonly seed?: number;
  /** Simulate only the first S seconds of each stage (stages stay back to back); default: whole stages. */
  readonly maxStageSeconds?: number;
  /** Tokens the chat template adds to every prompt; default {@link chatTemplateTokens}. */
  readonly templateTokens?: number;
}

/**
 * Tokens the server counted beyond the system prompt and the question: the chat template. The
 * successes-weighted mean of the stages' prompt_len means, minus system_prompt_len + question_len,
 * rounded, at least 0.
 */
export function chatTemplateTokens(run: StageRun): number {
  let sum = 0;
  let n = 0;
  for (const s of run.stages) {
    sum += s.promptLen.mean * s.successes;
    n += s.successes;
  }
  return Math.max(0, Math.round(sum / n - run.workload.systemPromptLen - run.workload.questionLen));
}

/** The output tokens each request of a stage asks for: its measured mean output length, rounded (at least 1). */
const stageOutputTokens = (run: StageRun, stage: number): number => Math.max(1, Math.round(run.stages[stage]!.outputLen.mean));

/** The request id of the j-th request of a stage, and back. */
const stageRequestId = (stage: number, j: number): string => `stage${stage}-${j}`;
const STAGE_ID = /^stage(\d+)-\d+$/;

/** A small seeded generator (xorshift32 over a seed spread by an odd multiplier): uint32 draws. */
function generator(seed: number): () => number {
  let x = Math.imul((seed >>> 0) ^ 0x5bd1e995, 0x2c1b3c6d) >>> 0 || 0x1234567;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

/**
 * kvsim trace records reproducing inference-perf's `shared_prefix` workload under `constant` load:
 *
 * * N = num_groups x num_prompts_per_group prompts; prompt p belongs to group floor(p / per group)
 *   and is the chat template (the same {@link chatTemplateTokens} tokens in every prompt, so the
 *   token counts match the server's prompt_len mean), the group's system prompt
 *   (system_prompt_len tokens) and its own question (question_len tokens), token ids seeded.
 * * Requests cycle through the prompts in one fixed shuffled order: request i (counted over all
 *   stages) sends prompt order[i mod N], so each whole prompt repeats every N requests, which
 *   prefix caching sees.
 * * Stage s: arrivals every 1 / rate s for its duration (or the first `maxStageSeconds`), stages
 *   back to back; each asks for the stage's measured mean output length, rounded. That mean is
 *   below the median (some requests stop early despite ignore_eos): the mean keeps the stage's
 *   decode work, the median would overstate it.
 *
 * Ids are `stage<s>-<j>`; {@link stageMetrics} groups a replay's records by them.
 */
export function stageWorkload(run: StageRun, options: StageWorkloadOptions = {}): TraceRecord[] {
  const w = run.workload;
  const next = generator(options.seed ?? 0);
  const tokenIds = (n: number): number[] => Array.from({ length: n }, () => next() >>> 1);
  const template = tokenIds(options.templateTokens ?? chatTemplateTokens(run));
  const systems = Array.from({ length: w.numGroups }, () => tokenIds(w.systemPromptLen));
  const n = w.numGroups * w.numPromptsPerGroup;
  const prompts: Uint32Array[] = [];
  for (let p = 0; p < n; p++) {
    const ids = Uint32Array.from([...template, ...systems[Math.floor(p / w.numPromptsPerGroup)]!, ...tokenIds(w.questionLen)]);
    prompts.push(ids);
  }
  // Fisher-Yates with the same generator: the order requests cycle through.
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = next() % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const out: TraceRecord[] = [];
  let startMs = 0;
  let i = 0;
  for (const s of run.stages) {
    const seconds = Math.min(s.durationS, options.maxStageSeconds ?? Infinity);
    const count = Math.max(1, Math.round(s.rate * seconds));
    const outputTokens = stageOutputTokens(run, s.stage);
    for (let j = 0; j < count; j++, i++) {
      const ids = prompts[order[i % n]!]!;
      out.push({
        line: out.length + 1,
        requestId: stageRequestId(s.stage, j),
        arrivalMs: startMs + (j * 1000) / s.rate,
        inputTokens: ids.length,
        outputTokens,
        inputTokenIds: ids,
      });
    }
    startMs += seconds * 1000;
  }
  return out;
}

/** One stage, simulated against measured. */
export interface StageComparison {
  readonly stage: number;
  readonly rate: number;
  readonly excluded: boolean;
  readonly excludedReason?: string;
  /** Successful requests measured; requests the replay completed, and those it did not. */
  readonly measuredRequests: number;
  readonly simulatedRequests: number;
  readonly simulatedIncomplete: number;
  readonly ttftMean: CompareValue;
  readonly ttftP90: CompareValue;
  /** (e2e mean - ttft mean) / (output mean - 1) on both sides. */
  readonly tpot: CompareValue;
  readonly e2eMean: CompareValue;
}

/**
 * Per stage: the replay's completed requests of that stage (ids from {@link stageWorkload})
 * against the measured figures, each as `{ measured, simulated, difference, error }` with a signed
 * relative error. Stages with failures stay in the list, marked excluded.
 */
export function stageMetrics(records: readonly RequestRecord[], run: StageRun): StageComparison[] {
  const byStage = run.stages.map(() => ({ ttft: [] as number[], e2e: [] as number[], out: [] as number[], incomplete: 0 }));
  for (const r of records) {
    const m = STAGE_ID.exec(r.request_id);
    const b = m === null ? undefined : byStage[Number(m[1])];
    if (b === undefined) continue;
    if (r.status !== "completed" || r.ttft_ms === null || r.e2e_ms === null) {
      b.incomplete++;
      continue;
    }
    b.ttft.push(r.ttft_ms);
    b.e2e.push(r.e2e_ms);
    b.out.push(r.output_tokens);
  }
  return run.stages.map((s, k) => {
    const b = byStage[k]!;
    const ttft = mean(b.ttft);
    const e2e = mean(b.e2e);
    const out = mean(b.out);
    const tpot = ttft === null || e2e === null || out === null || out < 2 ? null : (e2e - ttft) / (out - 1);
    return {
      stage: s.stage,
      rate: s.rate,
      excluded: s.excluded,
      ...(s.excludedReason === undefined ? {} : { excludedReason: s.excludedReason }),
      measuredRequests: s.successes,
      simulatedRequests: b.ttft.length,
      simulatedIncomplete: b.incomplete,
      ttftMean: compareValue(s.ttftMs.mean, ttft),
      ttftP90: compareValue(s.ttftMs.p90, percentile(b.ttft, 90)),
      tpot: compareValue(s.tpotMs, tpot),
      e2eMean: compareValue(s.e2eMs.mean, e2e),
    };
  });
}
