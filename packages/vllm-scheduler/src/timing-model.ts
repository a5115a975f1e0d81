/**
 * Step-time models (aisimulate-replay.md section 4): a pass costs prefill time over the requests
 * with prompt work plus decode time over the requests that sample.
 */
import type { EngineSettings, Profile, Timing } from "@kvsim/profile-schema";
import { InterpolationGrid, type OutsideGridPolicy } from "./grid.js";
import { kvBlockSizeTokens } from "./geometry.js";

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
}

export interface TimingEstimate {
  readonly ms: number;
  /** True when a profile-table query fell outside the grid and was clamped. */
  readonly clamped: boolean;
}

export interface TimingModel {
  readonly type: Timing["type"];
  prefill(batch: PrefillBatch): TimingEstimate;
  decode(batch: DecodeBatch): TimingEstimate;
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

class FixedTiming implements TimingModel {
  readonly type = "fixed";
  constructor(
    private readonly prefillMs: number,
    private readonly decodeMs: number,
  ) {}
  prefill(batch: PrefillBatch): TimingEstimate {
    return batch.count === 0 ? ZERO : { ms: this.prefillMs, clamped: false };
  }
  decode(batch: DecodeBatch): TimingEstimate {
    return batch.count === 0 ? ZERO : { ms: this.decodeMs, clamped: false };
  }
}

class PolynomialTiming implements TimingModel {
  readonly type = "polynomial";
  constructor(private readonly totalKvTokens: number) {}
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

class ProfileTiming implements TimingModel {
  readonly type = "profile";
  constructor(
    private readonly prefillGrid: InterpolationGrid | undefined,
    private readonly decodeGrid: InterpolationGrid | undefined,
    private readonly policy: OutsideGridPolicy,
  ) {}
  prefill(batch: PrefillBatch): TimingEstimate {
    if (batch.count === 0) return ZERO;
    if (this.prefillGrid === undefined) throw new RangeError("profile timing: the profile has no forward_pass.prefill table");
    const { value, clamped } = this.prefillGrid.lookup([batch.count, batch.sumIsl - batch.sumPrefix, batch.sumPrefix], this.policy);
    return { ms: value, clamped };
  }
  decode(batch: DecodeBatch): TimingEstimate {
    if (batch.count === 0) return ZERO;
    if (this.decodeGrid === undefined) throw new RangeError("profile timing: the profile has no forward_pass.decode table");
    const { value, clamped } = this.decodeGrid.lookup([batch.count, batch.sumSequenceTokens], this.policy);
    return { ms: value, clamped };
  }
}

/**
 * Builds the step-time model of a rank.
 *
 * * `fixed`: `prefill_ms` when the pass has prompt work, `decode_ms` when it samples.
 * * `polynomial`: aisimulate-replay.md section 4.2, bit for bit. Prefill takes the batch size and
 *   the integer means of isl and prefix; decode takes Σ sequence length over
 *   total KV tokens = num_gpu_blocks x the full-attention (or linear) block size.
 * * `profile`: multilinear interpolation in the profile's forward_pass tables. Prefill queries
 *   (batch_size, new_tokens = Σ isl - Σ prefix, cached_tokens = Σ prefix); decode queries
 *   (batch_size, kv_tokens = Σ sequence length). Outside the grid, `refuse` throws a RangeError
 *   naming the query and the grid range; `clamp` clamps every coordinate and reports it.
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
  }
}
