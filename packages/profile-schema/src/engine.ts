import { z } from "zod";
import { gpuDatasheet, GpuInlineFieldsSchema, KNOWN_GPU_NAMES } from "./gpus.js";
import { MAX_REQUEST_TOKENS } from "./limits.js";
import { finiteNumber, nonNegativeInt, positiveInt } from "./primitives.js";
import { SpeculativeConfigSchema } from "./speculative.js";

/** The most pool pages one rank may have. */
export const MAX_PAGES_PER_RANK = 2 ** 24;

/** The most data-parallel ranks one worker may have. */
const MAX_DATA_PARALLEL_SIZE = 1024;
/** A memory size in GiB: finite, >= 0, at most 2^20 GiB (a typo guard). */
const gib = () =>
  finiteNumber()
    .min(0, { error: "must not be negative", abort: true })
    .max(2 ** 20, { error: "must be at most 1048576 GiB", abort: true });

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
    .describe(
      "vLLM's async scheduling: step k + 1 is planned while step k runs, so arrivals and freed blocks are seen one step later (aggregated ranks only; vLLM turns it on where it can, kvsim's default is off).",
    ),
  scheduler_reserve_full_isl: z
    .boolean()
    .describe("Admit a waiting request only if blocks for its whole sequence fit, not just its first chunk (vLLM's default is on, kvsim's is off)."),
  data_parallel_size: positiveInt()
    .max(MAX_DATA_PARALLEL_SIZE, { error: `must be at most ${MAX_DATA_PARALLEL_SIZE}`, abort: true })
    .describe(
      "vLLM ranks per worker, each with its own KV pool (num_gpu_blocks is per rank), behind one front end: vLLM's data-parallel load balancer places each request on the rank with the least waiting x 4 + running (ties to the lowest rank).",
    ),
  enable_expert_parallel: z
    .boolean()
    .describe(
      "With data_parallel_size > 1, the ranks step in lockstep as vLLM's do for MoE models: every rank runs each step (an idle one a dummy batch), a step lasts as long as the slowest rank's, and the ranks pause only when vLLM's every-32-steps check finds none with a request. With data_parallel_size 1 it changes nothing.",
    ),
  cudagraph_capture_sizes: z
    .array(positiveInt())
    .min(1, { error: "must list at least one batch size", abort: true })
    .refine((sizes) => sizes.every((s, i) => i === 0 || s > sizes[i - 1]!), { error: "must be strictly increasing", abort: true })
    .describe(
      "Batch sizes vLLM captured CUDA graphs for: the linear timing model pads a decode-only step's sequence count up to the next one (none above the largest).",
    ),
  // KV capacity from GPU memory (capacity.ts): used only when num_gpu_blocks is not given.
  // A string refined against the table (not z.enum), so an inline object with a bad field fails
  // the name branch on its type and its own problems are reported (document.ts, zodIssues).
  gpu: z
    .union(
      [
        z
          .string()
          .refine((name) => gpuDatasheet(name) !== undefined, {
            error: `must be a known GPU: ${KNOWN_GPU_NAMES.join(", ")} (kvsim gpus lists them), or a GPU described inline (or give gpu_memory_gib)`,
            abort: true,
          })
          .meta({ enum: [...KNOWN_GPU_NAMES] }),
        GpuInlineFieldsSchema,
      ],
      { error: "must be a known GPU's name (kvsim gpus lists them) or a GPU described inline" },
    )
    .describe(
      "A known GPU (name or alias; `kvsim gpus` lists them) or one described inline by its datasheet figures: its memory sizes the KV cache when num_gpu_blocks is not given.",
    ),
  gpu_memory_gib: gib()
    .refine((v) => v > 0, { error: "must be greater than 0", abort: true })
    .describe("Total GPU memory in GiB as CUDA reports it; sizes the KV cache when num_gpu_blocks is not given."),
  gpu_memory_utilization: finiteNumber()
    .refine((v) => v > 0 && v <= 1, { error: "must be in (0, 1]", abort: true })
    .describe("vLLM's gpu_memory_utilization: the share of GPU memory the rank may use (default 0.9)."),
  weights_gib: gib().describe("Model weights on one rank in GiB; overrides the profile's memory.weights_bytes."),
  activation_peak_gib: gib().describe("Activation peak plus non-torch memory of vLLM's profile run in GiB; overrides kvsim's estimate."),
  cuda_graph_memory_gib: gib().describe("CUDA graph memory reserved before the KV cache in GiB; overrides kvsim's estimate (0 for enforce_eager)."),
  speculative_config: SpeculativeConfigSchema.describe(
    "Speculative decoding, as vLLM's --speculative-config: decode rows verify 1 + num_speculative_tokens tokens and emit the accepted drafts plus one (off when absent). A role's speculative_config replaces the spec's whole; prefill ranks never speculate.",
  ),
};

/**
 * vLLM settings of one rank. Defaults follow vLLM v1 and the Dynamo mocker, except
 * `num_gpu_blocks`, which a real deployment derives from GPU memory: set it, or give `gpu` or
 * `gpu_memory_gib` and let resolveEngine derive it (an explicit `num_gpu_blocks` wins).
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
  gpu: fields.gpu.optional(),
  gpu_memory_gib: fields.gpu_memory_gib.optional(),
  gpu_memory_utilization: fields.gpu_memory_utilization.optional(),
  weights_gib: fields.weights_gib.optional(),
  activation_peak_gib: fields.activation_peak_gib.optional(),
  cuda_graph_memory_gib: fields.cuda_graph_memory_gib.optional(),
  speculative_config: fields.speculative_config.optional(),
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
