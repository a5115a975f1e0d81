/**
 * The drafter's price, added to whatever timing model prices the target's steps. The target model
 * prices the verification itself (its decode rows compute 1 + d tokens: StepBatch.decodeTokens);
 * this wrapper adds the k drafter passes that propose the next step's drafts for every row that
 * sampled:
 *
 *   * mtp, eagle, eagle3: k passes of a draft head. The roofline prices a pass from the shape
 *     (`draft_layers` average decoder layers and the LM head); the other models as
 *     `draft_cost_fraction` (default draft_layers / the model's layers) of the model's own
 *     decode-only step over the same rows.
 *   * draft_model: k passes of a smaller model, each `draft_cost_fraction` of the target's
 *     decode-only step over the same rows.
 *   * ngram: the CPU lookup, `ngram_cpu_us_per_row` per row.
 *
 * The drafter's time is reported as decode time.
 */
import type { Profile, SpeculativeConfig } from "@kvsim/profile-schema";
import { newBatch, type MutableBatch } from "./step-rows.js";
import type { StepBatch, StepTiming, TimingModel } from "./timing-model.js";

/** n-gram lookup time per decoding row and step when the spec gives none, µs. */
const DEFAULT_NGRAM_CPU_US_PER_ROW = 10;

/** A timing model that can price one pass of a draft head from the model's shape (the roofline). */
interface DraftHeadPricer {
  readonly draftHeadPassMs: (rows: number, kvTokens: number, layers: number) => number;
}

const pricesDraftHead = (m: TimingModel): m is TimingModel & DraftHeadPricer => typeof (m as Partial<DraftHeadPricer>).draftHeadPassMs === "function";

/** Why the drafter of `config` cannot be priced on this profile and timing, or undefined. */
export function speculativeTimingProblem(config: SpeculativeConfig, profile: Profile, timingType: string): string | undefined {
  if (config.method !== "mtp" && config.method !== "eagle" && config.method !== "eagle3") return undefined;
  if (config.draft_cost_fraction !== undefined || timingType === "roofline" || profile.model_shape !== undefined) return undefined;
  return `draft_cost_fraction is required for method ${config.method} here: the profile has no model_shape to take the draft head's share of the model from (one draft-head pass as a share of the target's decode step, e.g. 1 / the model's layers plus its LM head's share)`;
}

/** The target's timing model plus the drafter. */
export class SpeculativeTiming implements TimingModel {
  readonly type: TimingModel["type"];
  private readonly scratch: MutableBatch = newBatch();
  private readonly k: number;
  private readonly layers: number;
  /** Share of a decode-only step per drafter pass (mtp/eagle off the roofline, draft_model). */
  private readonly fraction: number;
  private readonly cpuMsPerRow: number;

  constructor(
    readonly inner: TimingModel,
    private readonly config: SpeculativeConfig,
    profile: Profile,
  ) {
    this.type = inner.type;
    this.k = config.num_speculative_tokens;
    this.layers = config.draft_layers ?? 1;
    const numLayers = profile.model_shape?.num_layers;
    this.fraction = config.draft_cost_fraction ?? (numLayers === undefined ? 0 : this.layers / numLayers);
    this.cpuMsPerRow = (config.ngram_cpu_us_per_row ?? DEFAULT_NGRAM_CPU_US_PER_ROW) / 1000;
  }

  step(batch: StepBatch): StepTiming {
    const target = this.inner.step(batch);
    const rows = batch.decode.count;
    if (rows === 0) return target;
    const kv = batch.decode.sumSequenceTokens;
    let drafterMs: number;
    let clamped = 0;
    const method = this.config.method;
    if (method === "ngram") {
      drafterMs = rows * this.cpuMsPerRow;
    } else if (method !== "draft_model" && this.config.draft_cost_fraction === undefined && pricesDraftHead(this.inner)) {
      drafterMs = this.k * this.inner.draftHeadPassMs(rows, kv, this.layers);
    } else {
      // A draft model, or a draft head off the roofline: a share of the target's decode step.
      const pass = this.decodeOnly(rows, kv);
      clamped = pass.clamped;
      drafterMs = this.k * this.fraction * pass.ms;
    }
    return { prefillMs: target.prefillMs, decodeMs: target.decodeMs + drafterMs, clamped: target.clamped + clamped };
  }

  /** The target's price of a decode-only step of `rows` one-token rows attending `kv` tokens. */
  private decodeOnly(rows: number, kv: number): { ms: number; clamped: number } {
    const shortcut = this.inner.decodeOnlyMs;
    if (shortcut !== undefined) return { ms: shortcut(rows, kv), clamped: 0 };
    const b = this.scratch;
    b.decode.count = rows;
    b.decode.sumSequenceTokens = kv;
    b.decode.tokens = rows;
    b.decodeRows = rows;
    b.decodeKvTokens = kv;
    b.decodeTokens = rows;
    b.decodeAttentionPairs = kv;
    const t = this.inner.step(b);
    return { ms: t.prefillMs + t.decodeMs, clamped: t.clamped };
  }
}
