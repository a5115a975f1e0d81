import { z } from "zod";
import { finiteNumber, nonNegativeInt, positiveInt, rangedNumber } from "./primitives.js";

/** The most draft tokens one step may propose per request (vLLM's configs use 1 to about 10). */
const MAX_SPECULATIVE_TOKENS = 64;

/** vLLM's speculative methods kvsim models (`--speculative-config` `method`). */
const SpeculativeMethodSchema = z.enum(["mtp", "eagle", "eagle3", "ngram", "draft_model"]);
export type SpeculativeMethod = z.infer<typeof SpeculativeMethodSchema>;

const probability = () => rangedNumber(0, 1, "");

/**
 * Speculative decoding, named after vLLM's `--speculative-config`: the drafter proposes
 * `num_speculative_tokens` tokens per decoding request and step, the target model verifies them
 * (1 + k tokens per row), and the accepted prefix plus one token is emitted. Whether a draft is
 * accepted is drawn from the acceptance model with a seeded generator, so a run is deterministic
 * for its seed.
 */
export const SpeculativeConfigSchema = z
  .strictObject({
    method: SpeculativeMethodSchema.describe(
      "The drafter: mtp (the model's multi-token-prediction layers), eagle or eagle3 (an EAGLE head), ngram (prompt lookup, on the CPU) or draft_model (a smaller model).",
    ),
    num_speculative_tokens: positiveInt()
      .max(MAX_SPECULATIVE_TOKENS, { error: `must be at most ${MAX_SPECULATIVE_TOKENS}`, abort: true })
      .describe("Draft tokens proposed per decoding request and step (k): a decode row verifies 1 + k tokens."),
    acceptance_rate: probability()
      .optional()
      .describe("Each draft position is accepted with this probability, given the positions before it were (give this or acceptance_per_position)."),
    acceptance_per_position: z
      .array(probability())
      .min(1, { error: "must list at least one probability", abort: true })
      .optional()
      .describe(
        "Per draft position, the share of drafts whose token at that position is accepted (so are all before it): what vLLM logs as its per-position acceptance rate, num_speculative_tokens entries, non-increasing.",
      ),
    seed: nonNegativeInt()
      .max(2 ** 32 - 1, { error: "must be at most 2^32 - 1", abort: true })
      .optional()
      .describe("Seed of the acceptance draws (default 0); the same seed gives the same run."),
    draft_cost_fraction: finiteNumber()
      .min(0, { error: "must not be negative", abort: true })
      .max(10, { error: "must be at most 10", abort: true })
      .optional()
      .describe(
        "One drafter pass as a share of the target's decode step of the same rows: required for draft_model; for mtp, eagle and eagle3 the default is draft_layers / the model's layers (roofline: priced from the shape instead); unused for ngram.",
      ),
    draft_layers: positiveInt()
      .max(64, { error: "must be at most 64", abort: true })
      .optional()
      .describe("mtp, eagle, eagle3: decoder layers of the draft head (default 1); each of the k drafter passes runs them and the LM head."),
    ngram_cpu_us_per_row: rangedNumber(0, 1e6, "µs").optional().describe("ngram: CPU time of the lookup per decoding row and step, µs (default 10)."),
  })
  .superRefine((s, ctx) => {
    const rate = s.acceptance_rate !== undefined;
    const per = s.acceptance_per_position !== undefined;
    if (rate === per) {
      ctx.addIssue({
        code: "custom",
        path: [rate ? "acceptance_per_position" : "acceptance_rate"],
        message: rate
          ? "give acceptance_rate or acceptance_per_position, not both"
          : "is required: give acceptance_rate (one probability for every position) or acceptance_per_position",
      });
    }
    if (per && s.acceptance_per_position!.length !== s.num_speculative_tokens) {
      ctx.addIssue({
        code: "custom",
        path: ["acceptance_per_position"],
        message: `must list one probability per draft position: ${s.num_speculative_tokens} (num_speculative_tokens), got ${s.acceptance_per_position!.length}`,
      });
    }
    const per_ = s.acceptance_per_position;
    if (per_ !== undefined) {
      const i = per_.findIndex((v, j) => j > 0 && v > per_[j - 1]!);
      if (i > 0) {
        ctx.addIssue({
          code: "custom",
          path: ["acceptance_per_position", i],
          message: `must not exceed the position before it (${per_[i - 1]}): a draft is accepted only when every draft before it is, so the per-position rates never rise`,
        });
      }
    }
    if (s.method === "draft_model" && s.draft_cost_fraction === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["draft_cost_fraction"],
        message: "is required for method draft_model: one draft-model pass as a share of the target's decode step (e.g. 0.1 for a model a tenth the size)",
      });
    }
    if (s.draft_layers !== undefined && s.method !== "mtp" && s.method !== "eagle" && s.method !== "eagle3") {
      ctx.addIssue({ code: "custom", path: ["draft_layers"], message: `applies to mtp, eagle and eagle3 only, not ${s.method}` });
    }
    if (s.ngram_cpu_us_per_row !== undefined && s.method !== "ngram") {
      ctx.addIssue({ code: "custom", path: ["ngram_cpu_us_per_row"], message: `applies to method ngram only, not ${s.method}` });
    }
    if (s.draft_cost_fraction !== undefined && s.method === "ngram") {
      ctx.addIssue({
        code: "custom",
        path: ["draft_cost_fraction"],
        message: "does not apply to method ngram (its lookup runs on the CPU: see ngram_cpu_us_per_row)",
      });
    }
  });
export type SpeculativeConfig = z.infer<typeof SpeculativeConfigSchema>;

/**
 * The conditional acceptance probability of each draft position (k entries): p_i, the chance that
 * position i is accepted given positions 1..i-1 were. `acceptance_rate` is every p_i; the
 * per-position rates a_i of `acceptance_per_position` give p_i = a_i / a_(i-1) (0 after a 0).
 */
export function acceptanceByPosition(config: SpeculativeConfig): readonly number[] {
  const per = config.acceptance_per_position;
  if (per !== undefined) return per.map((a, i) => (i === 0 ? a : (per[i - 1] ?? 0) === 0 ? 0 : a / per[i - 1]!));
  return Array.from({ length: config.num_speculative_tokens }, () => config.acceptance_rate ?? 0);
}

/**
 * Expected tokens a decode row emits per step with all k drafts verified (vLLM's mean acceptance
 * length), from the conditional probabilities p_i: 1 + Σ over i of Π_{j <= i} p_j (position i is
 * accepted only when 1..i all are).
 */
export function expectedTokensPerStep(conditional: readonly number[]): number {
  let all = 1;
  let sum = 1;
  for (const p of conditional) {
    all *= p;
    sum += all;
  }
  return sum;
}
