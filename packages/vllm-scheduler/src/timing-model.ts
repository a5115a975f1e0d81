/**
 * Step-time models. `fixed`, `polynomial` and `profile` (docs/rules/replay.md §4) price a
 * pass as prefill time over the requests with prompt work plus decode time over the requests that
 * sample; `linear` prices the whole step with one formula (see the package README).
 */
import type { EngineSettings, Profile, Timing } from "@kvsim/profile-schema";
import { InterpolationGrid, type OutsideGridPolicy } from "./grid.js";
import { kvBlockSizeTokens } from "./geometry.js";
import { decodeTokensOf } from "./batch-sums.js";
import { paddedBatchSize } from "./padding.js";
import { createRooflineTiming } from "./roofline.js";

export { paddedBatchSize };

/** The requests with prompt work in one pass. */
export interface PrefillBatch {
  readonly count: number;
  /** Σ over the batch of (prefix before the chunk + prompt tokens of the chunk). */
  readonly sumIsl: number;
  /** Σ over the batch of the prefix before the chunk (prefix-cache hit and earlier chunks). */
  readonly sumPrefix: number;
}

/** The requests that sample a token at the end of one pass. */
export interface DecodeBatch {
  readonly count: number;
  /** Σ over the batch of the sequence length before the sampled token is appended. */
  readonly sumSequenceTokens: number;
  /**
   * Σ tokens the decode rows compute: 1 + the drafts verified per row with speculative decoding;
   * absent or 0: `count` (one each). The profile table prices it as the batch size.
   */
  readonly tokens?: number;
}

/**
 * Everything one step schedules, as the rank charges it. A row is one scheduled request. A decode
 * row computes the one token at the end of a sequence that already has output (on a decode-role
 * rank every row counts as one); every other row is a prompt row (a prefill chunk, or a recompute
 * after preemption). A prefill-role rank charges no decode batch and a decode-role rank no prefill
 * batch or prompt rows.
 */
export interface StepBatch {
  /** The rows with prompt work, over prompt positions only (the two-part models price it). */
  readonly prefill: PrefillBatch;
  /** The rows that sample a token (the two-part models price it). */
  readonly decode: DecodeBatch;
  readonly promptRows: number;
  /** Σ tokens the prompt rows compute in this step. */
  readonly promptTokens: number;
  /** Σ tokens the prompt rows already held before this step (prefix-cache hit and earlier chunks). */
  readonly promptContextTokens: number;
  readonly decodeRows: number;
  /** Σ over decode rows of the tokens they attend (those before the computed one, and it). */
  readonly decodeKvTokens: number;
  /**
   * Σ over prompt rows of the causal (query, key) pairs their chunk attends: n x (context +
   * (n + 1) / 2) for a chunk of n tokens after `context` held ones. The roofline prices prompt
   * attention with it; absent, it is estimated from the sums as if the rows were equal.
   */
  readonly promptAttentionPairs?: number;
  /** Σ tokens the decode rows compute (speculative decoding: 1 + drafts each); absent or 0: decodeRows. */
  readonly decodeTokens?: number;
  /** Σ over decode rows of their causal (query, key) pairs (see RooflineLoad.decodePairs); absent or 0: decodeKvTokens. */
  readonly decodeAttentionPairs?: number;
}

/** The price of one step, split for reports: prompt work and the rest. */
export interface StepTiming {
  readonly prefillMs: number;
  readonly decodeMs: number;
  /** Profile-table queries that fell outside the grid and were clamped (0, 1 or 2). */
  readonly clamped: number;
}

/** Prices one step; an object per rank, built by {@link createTimingModel}. */
export interface TimingModel {
  readonly type: Timing["type"];
  step(batch: StepBatch): StepTiming;
  /**
   * The whole price (prefill + decode ms) of a decode-only step: `rows` decode rows that sample,
   * attending `kvTokens` tokens in all (the sum of their sequence lengths), no prompt row. The
   * same number `step` gives for that batch, without building it; undefined when the model has
   * no such shortcut (it may clamp or refuse), then `step` prices it.
   */
  readonly decodeOnlyMs?: (rows: number, kvTokens: number) => number;
}

/** One part of a two-part model's price. */
export interface TimingEstimate {
  readonly ms: number;
  /** True when a profile-table query fell outside the grid and was clamped. */
  readonly clamped: boolean;
}

/** The `fixed`, `polynomial` and `profile` models: prefill time plus decode time. */
abstract class TwoPartTiming implements TimingModel {
  abstract readonly type: Timing["type"];
  abstract prefill(batch: PrefillBatch): TimingEstimate;
  abstract decode(batch: DecodeBatch): TimingEstimate;
  step(batch: StepBatch): StepTiming {
    const p = this.prefill(batch.prefill);
    const d = this.decode(batch.decode);
    return { prefillMs: p.ms, decodeMs: d.ms, clamped: (p.clamped ? 1 : 0) + (d.clamped ? 1 : 0) };
  }
}

const ZERO: TimingEstimate = { ms: 0, clamped: false };

/** Integer means of a prefill batch, as the upstream simulator queries its models. */
function means(batch: PrefillBatch): { meanIsl: number; meanPrefix: number } {
  return { meanIsl: Math.floor(batch.sumIsl / batch.count), meanPrefix: Math.floor(batch.sumPrefix / batch.count) };
}

/** The upstream simulator's uncalibrated prefill polynomial in x = batch x new tokens per request. */
export function polynomialPrefillMs(batchSize: number, newTokensPerRequest: number): number {
  if (batchSize === 0 || newTokensPerRequest === 0) return 0;
  const x = batchSize * newTokensPerRequest;
  return 4.209989e-7 * x * x + 1.518344e-2 * x + 1.650142e1;
}

/** The upstream decode polynomial in the KV occupancy p = min(1, active / total); total 0 means p = 1. */
export function polynomialDecodeMs(activeKvTokens: number, totalKvTokens: number): number {
  const p = totalKvTokens === 0 ? 1 : Math.min(1, activeKvTokens / totalKvTokens);
  return Math.max(1, -25.74 * p * p + 54.01 * p + 5.74);
}

class FixedTiming extends TwoPartTiming {
  readonly type = "fixed";
  readonly decodeOnlyMs = (rows: number): number => (rows === 0 ? 0 : this.decodeMs);
  constructor(
    private readonly prefillMs: number,
    private readonly decodeMs: number,
  ) {
    super();
  }
  prefill(batch: PrefillBatch): TimingEstimate {
    return batch.count === 0 ? ZERO : { ms: this.prefillMs, clamped: false };
  }
  decode(batch: DecodeBatch): TimingEstimate {
    return batch.count === 0 ? ZERO : { ms: this.decodeMs, clamped: false };
  }
}

class PolynomialTiming extends TwoPartTiming {
  readonly type = "polynomial";
  readonly decodeOnlyMs = (rows: number, kvTokens: number): number => (rows === 0 ? 0 : polynomialDecodeMs(kvTokens, this.totalKvTokens));
  constructor(private readonly totalKvTokens: number) {
    super();
  }
  prefill(batch: PrefillBatch): TimingEstimate {
    if (batch.count === 0) return ZERO;
    const { meanIsl, meanPrefix } = means(batch);
    return { ms: polynomialPrefillMs(batch.count, Math.max(0, meanIsl - meanPrefix)), clamped: false };
  }
  decode(batch: DecodeBatch): TimingEstimate {
    if (batch.count === 0) return ZERO;
    return { ms: polynomialDecodeMs(batch.sumSequenceTokens, this.totalKvTokens), clamped: false };
  }
}

class ProfileTiming extends TwoPartTiming {
  readonly type = "profile";
  constructor(
    private readonly prefillGrid: InterpolationGrid | undefined,
    private readonly decodeGrid: InterpolationGrid | undefined,
    private readonly policy: OutsideGridPolicy,
  ) {
    super();
  }
  prefill(batch: PrefillBatch): TimingEstimate {
    if (batch.count === 0) return ZERO;
    if (this.prefillGrid === undefined) throw new RangeError("profile timing: the profile has no forward_pass.prefill table");
    const { value, clamped } = this.prefillGrid.lookup([batch.count, batch.sumIsl - batch.sumPrefix, batch.sumPrefix], this.policy);
    return { ms: value, clamped };
  }
  decode(batch: DecodeBatch): TimingEstimate {
    if (batch.count === 0) return ZERO;
    if (this.decodeGrid === undefined) throw new RangeError("profile timing: the profile has no forward_pass.decode table");
    // Verification of 1 + d tokens per row costs like a decode batch of that many tokens.
    const { value, clamped } = this.decodeGrid.lookup(
      [batch.tokens !== undefined && batch.tokens > 0 ? batch.tokens : batch.count, batch.sumSequenceTokens],
      this.policy,
    );
    return { ms: value, clamped };
  }
}

/** The coefficients of the `linear` model, in its units. */
export type LinearTimingCoefficients = Omit<Extract<Timing, { type: "linear" }>, "type">;

/**
 * The share of the experts a step's tokens touch, expected when each of `tokens` tokens is routed
 * to `perToken` of `experts` experts uniformly at random: 1 - (1 - perToken / experts)^tokens
 * (an expert escapes one token with probability 1 - k/E, all of them with its tokens-th power).
 */
export function expertShareTouched(tokens: number, experts: number, perToken: number): number {
  if (tokens <= 0) return 0;
  return 1 - Math.pow(1 - perToken / experts, tokens);
}

/**
 * One formula for the whole step: `step_ms` + `per_sequence_ms` x sequences (padded in a
 * decode-only step) + `per_kv_token_us` x decode KV tokens / 1000, and, when the step has prompt
 * rows, `prompt_step_ms` + (`per_prompt_token_us` x prompt tokens + `per_cached_token_us` x
 * context tokens) / 1000. With `experts`, + `all_experts_ms` x the expected share of the experts
 * touched by the step's tokens (sequences in a decode-only step, decode rows + prompt tokens
 * otherwise) times `tokenScale` (the data-parallel ranks whose tokens reach this rank's experts).
 * The prompt terms are reported as prefill time, the rest as decode time.
 */
class LinearTiming implements TimingModel {
  readonly type = "linear";
  readonly decodeOnlyMs = (rows: number, kvTokens: number): number => {
    if (rows === 0) return 0;
    const c = this.c;
    const padded = paddedBatchSize(rows, this.captureSizes);
    return c.step_ms + c.per_sequence_ms * padded + (c.per_kv_token_us * kvTokens) / 1000 + this.expertsMs(padded);
  };
  constructor(
    private readonly c: LinearTimingCoefficients,
    private readonly captureSizes: readonly number[] | undefined,
    private readonly tokenScale: number,
  ) {}
  private expertsMs(tokens: number): number {
    const e = this.c.experts;
    if (e === undefined || e.all_experts_ms === 0) return 0;
    return e.all_experts_ms * expertShareTouched(tokens * this.tokenScale, e.num_experts, e.num_experts_per_tok);
  }
  step(batch: StepBatch): StepTiming {
    // A decode row verifying 1 + d tokens (speculative decoding) counts as 1 + d sequences: vLLM
    // pads and launches the verification batch by its tokens.
    const decodeTokens = decodeTokensOf(batch);
    const rows = batch.promptRows + decodeTokens;
    if (rows === 0) return { prefillMs: 0, decodeMs: 0, clamped: 0 };
    const c = this.c;
    const sequences = batch.promptRows === 0 ? paddedBatchSize(rows, this.captureSizes) : rows;
    const tokens = batch.promptRows === 0 ? sequences : decodeTokens + batch.promptTokens;
    const decodeMs = c.step_ms + c.per_sequence_ms * sequences + (c.per_kv_token_us * batch.decodeKvTokens) / 1000 + this.expertsMs(tokens);
    const prefillMs =
      batch.promptRows === 0 ? 0 : c.prompt_step_ms + (c.per_prompt_token_us * batch.promptTokens + c.per_cached_token_us * batch.promptContextTokens) / 1000;
    return { prefillMs, decodeMs, clamped: 0 };
  }
}

/**
 * Builds the step-time model of a rank.
 *
 * * `fixed`: `prefill_ms` when the pass has prompt work, `decode_ms` when it samples.
 * * `polynomial`: docs/rules/replay.md §4.2, bit for bit. Prefill takes the batch size and
 *   the integer means of isl and prefix; decode takes Σ sequence length over
 *   total KV tokens = num_gpu_blocks x the full-attention (or linear) block size.
 * * `profile`: multilinear interpolation in the profile's forward_pass tables. Prefill queries
 *   (batch_size, new_tokens = Σ isl - Σ prefix, cached_tokens = Σ prefix); decode queries
 *   (batch_size, kv_tokens = Σ sequence length). Outside the grid, `refuse` throws a RangeError
 *   naming the query and the grid range; `clamp` clamps every coordinate and reports it.
 * * `linear`: {@link LinearTiming}; a decode-only step pads its sequence count up to the engine's
 *   next `cudagraph_capture_sizes` entry when the engine lists them. With `experts` and
 *   `enable_expert_parallel`, a step's tokens count `data_parallel_size` times: every lockstep
 *   rank sends as many (vLLM pads each rank's batch to the largest) to every rank's experts.
 */
export function createTimingModel(timing: Timing, profile: Profile, engine: EngineSettings): TimingModel {
  switch (timing.type) {
    case "fixed":
      return new FixedTiming(timing.prefill_ms, timing.decode_ms);
    case "polynomial":
      return new PolynomialTiming(engine.num_gpu_blocks * kvBlockSizeTokens(profile, engine));
    case "profile": {
      const fp = profile.forward_pass;
      const prefill =
        fp !== undefined && fp.prefill.length > 0
          ? new InterpolationGrid(
              "forward_pass.prefill",
              ["batch_size", "new_tokens", "cached_tokens"],
              fp.prefill.map((p) => ({ at: [p.batch_size, p.new_tokens, p.cached_tokens], value: p.latency_ms })),
            )
          : undefined;
      const decode =
        fp !== undefined && fp.decode.length > 0
          ? new InterpolationGrid(
              "forward_pass.decode",
              ["batch_size", "kv_tokens"],
              fp.decode.map((p) => ({ at: [p.batch_size, p.kv_tokens], value: p.latency_ms })),
            )
          : undefined;
      return new ProfileTiming(prefill, decode, timing.outside_grid);
    }
    case "linear": {
      const tokenScale = engine.enable_expert_parallel ? engine.data_parallel_size : 1;
      return new LinearTiming(timing, engine.cudagraph_capture_sizes, tokenScale);
    }
    case "roofline":
      return createRooflineTiming(timing, profile, engine);
  }
}
