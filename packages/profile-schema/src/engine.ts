import { z } from "zod";
import { nonNegativeInt, positiveInt } from "./primitives.js";

/**
 * vLLM settings of one rank. Defaults follow vLLM v1 and the Dynamo mocker, except
 * `num_gpu_blocks`, which a real deployment derives from GPU memory: set it.
 */
export const EngineSettingsSchema = z.strictObject({
  /** Pool pages per rank, the null page included (P pages give P - 1 usable). */
  num_gpu_blocks: positiveInt().min(2, { error: "must be at least 2 (page 0 is the null page)" }).default(16384),
  /** Tokens per block; linear profiles only (grouped profiles take it from their groups). */
  block_size: positiveInt().optional(),
  max_num_batched_tokens: positiveInt().default(8192),
  max_num_seqs: positiveInt().default(256),
  /** Prompt + output limit; prompts that reach it are rejected. */
  max_model_len: positiveInt().optional(),
  enable_prefix_caching: z.boolean().default(true),
  enable_chunked_prefill: z.boolean().default(true),
  /** Caps the tokens one request gets in one step; 0 = off. */
  long_prefill_token_threshold: nonNegativeInt().default(0),
});
export type EngineSettings = z.infer<typeof EngineSettingsSchema>;
/** What a spec or role override may write: every field optional, no defaults filled. */
export const EngineOverridesSchema = EngineSettingsSchema.partial();
export type EngineOverrides = z.infer<typeof EngineOverridesSchema>;

/** The block size a linear profile uses when the engine names none. */
export const DEFAULT_LINEAR_BLOCK_SIZE = 16;

/** Fills every default of an engine settings object. */
export function engineSettings(overrides: EngineOverrides = {}): EngineSettings {
  return EngineSettingsSchema.parse(overrides);
}
