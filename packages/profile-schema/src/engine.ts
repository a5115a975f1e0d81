import { z } from "zod";
import { MAX_REQUEST_TOKENS } from "./limits.js";
import { nonNegativeInt, positiveInt } from "./primitives.js";

/** The most pool pages one rank may have. */
export const MAX_PAGES_PER_RANK = 2 ** 24;

/** The most data-parallel ranks one worker may have. */
export const MAX_DATA_PARALLEL_SIZE = 1024;

/** The engine fields without defaults, shared by the settings and the overrides schemas. */
const fields = {
  num_gpu_blocks: positiveInt()
    .min(2, { error: "must be at least 2 (page 0 is the null page)", abort: true })
    // A rank's pool is allocated up front; 2^24 pages is far beyond any GPU's KV cache and keeps a
    // typo (an extra few zeros) from exhausting the machine's memory.
    .max(MAX_PAGES_PER_RANK, { error: `must be at most ${MAX_PAGES_PER_RANK} (2^24) pages per rank`, abort: true })
    .describe("Pool pages per rank, the null page included (P pages give P - 1 usable)."),
  block_size: positiveInt()
    .max(MAX_REQUEST_TOKENS, { error: `must be at most ${MAX_REQUEST_TOKENS} (2^24) tokens`, abort: true })
    .describe("Tokens per block; linear profiles only (grouped profiles take it from their groups)."),
  max_num_batched_tokens: positiveInt().describe("Token budget of one forward pass."),
  max_num_seqs: positiveInt().describe("Most requests running at once."),
  max_model_len: positiveInt()
    .max(2 * MAX_REQUEST_TOKENS, { error: `must be at most ${2 * MAX_REQUEST_TOKENS} (2^25) tokens: a prompt and an output of 2^24 tokens each`, abort: true })
    .describe("Prompt + output limit; prompts that reach it are rejected."),
  enable_prefix_caching: z.boolean().describe("Serve prefix hits from cached blocks."),
  enable_chunked_prefill: z.boolean().describe("Split long prompts over several passes."),
  long_prefill_token_threshold: nonNegativeInt().describe("Caps the tokens one request gets in one step; 0 = off."),
  async_scheduling: z
    .boolean()
    .describe("vLLM's async scheduling: step k + 1 is planned while step k runs, so arrivals and freed blocks are seen one step later (aggregated ranks only; vLLM turns it on where it can, kvsim's default is off)."),
  scheduler_reserve_full_isl: z
    .boolean()
    .describe("Admit a waiting request only if blocks for its whole sequence fit, not just its first chunk (vLLM's default is on, kvsim's is off)."),
  data_parallel_size: positiveInt()
    .max(MAX_DATA_PARALLEL_SIZE, { error: `must be at most ${MAX_DATA_PARALLEL_SIZE}`, abort: true })
    .describe("Ranks behind one front end (vLLM's data-parallel load balancer places each request on the rank with the least waiting x 4 + running)."),
  enable_expert_parallel: z
    .boolean()
    .describe("With data_parallel_size > 1, the ranks step in lockstep: every rank runs a step (an idle one a dummy batch) and the step lasts as long as the slowest rank's."),
  cudagraph_capture_sizes: z
    .array(positiveInt())
    .min(1, { error: "must list at least one batch size", abort: true })
    .refine((sizes) => sizes.every((s, i) => i === 0 || s > sizes[i - 1]!), { error: "must be strictly increasing", abort: true })
    .describe("Batch sizes vLLM captured CUDA graphs for: the linear timing model pads a decode-only step's sequence count up to the next one (none above the largest)."),
};

/**
 * vLLM settings of one rank. Defaults follow vLLM v1 and the Dynamo mocker, except
 * `num_gpu_blocks`, which a real deployment derives from GPU memory: set it.
 */
export const EngineSettingsSchema = z.strictObject({
  num_gpu_blocks: fields.num_gpu_blocks.default(16384),
  block_size: fields.block_size.optional(),
  max_num_batched_tokens: fields.max_num_batched_tokens.default(8192),
  max_num_seqs: fields.max_num_seqs.default(256),
  max_model_len: fields.max_model_len.optional(),
  enable_prefix_caching: fields.enable_prefix_caching.default(true),
  enable_chunked_prefill: fields.enable_chunked_prefill.default(true),
  long_prefill_token_threshold: fields.long_prefill_token_threshold.default(0),
  async_scheduling: fields.async_scheduling.default(false),
  scheduler_reserve_full_isl: fields.scheduler_reserve_full_isl.default(false),
  data_parallel_size: fields.data_parallel_size.default(1),
  enable_expert_parallel: fields.enable_expert_parallel.default(false),
  cudagraph_capture_sizes: fields.cudagraph_capture_sizes.optional(),
});
export type EngineSettings = z.infer<typeof EngineSettingsSchema>;

/**
 * What a spec or role override may write: every field optional and **no default filled**, so a
 * role override such as `{ max_num_seqs: 16 }` changes only that field when merged over the
 * spec's `engine` (defaults are filled once, by engineSettings, after the merge).
 */
export const EngineOverridesSchema = z.strictObject(fields).partial();
export type EngineOverrides = z.infer<typeof EngineOverridesSchema>;

/** The block size a linear profile uses when the engine names none. */
export const DEFAULT_LINEAR_BLOCK_SIZE = 16;

/** Fills every default of an engine settings object. */
export function engineSettings(overrides: EngineOverrides = {}): EngineSettings {
  return EngineSettingsSchema.parse(overrides);
}
