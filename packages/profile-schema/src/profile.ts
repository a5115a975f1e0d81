import { z } from "zod";
import { ModelShapeSchema } from "./model-shape.js";
import { byteCount, durationMs, nonBlank, nonNegativeInt, positiveInt } from "./primitives.js";

/** How a cache group holds tokens (docs/rules/grouped-pd.md §1). */
const CacheGroupKindSchema = z.enum(["full_attention", "sliding_window", "convolution", "state"]);
export type CacheGroupKind = z.infer<typeof CacheGroupKindSchema>;

/** Kinds whose blocks are limited to a window of recent tokens. */
export const isWindowKind = (kind: CacheGroupKind): boolean => kind === "sliding_window" || kind === "convolution";

export const CacheGroupSchema = z
  .strictObject({
    name: nonBlank().describe("Group identity, unique in the profile."),
    kind: CacheGroupKindSchema.describe("How the group holds tokens."),
    /** Informational; bytes are never multiplied by it. */
    num_layers: positiveInt().describe("Layers in the group; informational, bytes are never multiplied by it."),
    block_size_tokens: positiveInt().describe("Tokens per block of this group."),
    /** Required for sliding_window and convolution groups, refused otherwise. */
    window_tokens: positiveInt().optional().describe("Window in tokens; required for sliding_window and convolution groups, refused otherwise."),
    /** A prefix-cacheable `state` group is a Mamba-type state (Mamba, KDA). Optional in old profiles. */
    prefix_cacheable: z
      .boolean()
      .optional()
      .describe("The group's blocks can serve prefix hits; a prefix-cacheable state group is a Mamba-type state. Needed for P/D."),
    /** Bytes one block of this group moves in a handoff, without page padding. Optional in old profiles. */
    transfer_bytes_per_block: byteCount().optional().describe("Bytes one block moves in a P/D handoff, without page padding (at most 2^53). Needed for P/D."),
    /** vLLM 0.32.0 only: extra checkpoint blocks a Mamba-type group takes at the end of the prompt. */
    prefill_checkpoint_blocks: nonNegativeInt()
      .optional()
      .describe("vLLM 0.32.0, Mamba-type groups only: extra checkpoint blocks taken in the chunk that reaches the end of the prompt; they never move."),
  })
  .superRefine((g, ctx) => {
    const windowed = isWindowKind(g.kind);
    if (windowed && g.window_tokens === undefined) {
      ctx.addIssue({ code: "custom", path: ["window_tokens"], message: `is required for a ${g.kind} group` });
    }
    if (!windowed && g.window_tokens !== undefined) {
      ctx.addIssue({ code: "custom", path: ["window_tokens"], message: `is only allowed on sliding_window and convolution groups, not on a ${g.kind} group` });
    }
  });
export type CacheGroup = z.infer<typeof CacheGroupSchema>;

/** One measured prefill pass: totals over the batch. */
export const PrefillPointSchema = z.strictObject({
  batch_size: positiveInt(),
  /** Prompt tokens computed in the pass, summed over the batch. */
  new_tokens: nonNegativeInt(),
  /** Prefix (already cached or computed) tokens read in the pass, summed over the batch. */
  cached_tokens: nonNegativeInt(),
  latency_ms: durationMs().describe("Measured pass latency, ms (0 to 10^6, about 17 minutes)."),
});
export type PrefillPoint = z.infer<typeof PrefillPointSchema>;

/** One measured decode pass: totals over the batch. */
export const DecodePointSchema = z.strictObject({
  batch_size: positiveInt(),
  /** KV tokens read by the pass, summed over the batch. */
  kv_tokens: nonNegativeInt(),
  latency_ms: durationMs().describe("Measured pass latency, ms (0 to 10^6, about 17 minutes)."),
});
export type DecodePoint = z.infer<typeof DecodePointSchema>;

/** Returns the index pairs of a table whose axis values do not form a complete grid. */
function gridProblems(points: readonly number[][]): string | undefined {
  if (points.length === 0) return undefined;
  const dims = points[0]!.length;
  const axes: Set<number>[] = Array.from({ length: dims }, () => new Set<number>());
  const seen = new Set<string>();
  for (const p of points) {
    const key = p.join(",");
    if (seen.has(key)) return `has two points at (${key})`;
    seen.add(key);
    p.forEach((v, i) => axes[i]!.add(v));
  }
  const expected = axes.reduce((n, a) => n * a.size, 1);
  if (expected !== points.length) {
    return `must form a complete grid for interpolation: ${axes.map((a) => a.size).join(" x ")} axis values need ${expected} points, found ${points.length}`;
  }
  return undefined;
}

/**
 * Measured forward-pass latencies. Prefill points span (batch_size, new_tokens, cached_tokens);
 * decode points span (batch_size, kv_tokens). Each table must be a complete grid so the timing
 * model can interpolate multilinearly inside it.
 */
export const ForwardPassSchema = z
  .strictObject({
    /** Where the numbers come from (a measurement run, or "illustrative"). */
    provenance: nonBlank().describe("Where the numbers come from: a measurement run, or that they are illustrative."),
    prefill: z.array(PrefillPointSchema).describe("Prefill passes over (batch_size, new_tokens, cached_tokens); a complete grid."),
    decode: z.array(DecodePointSchema).describe("Decode passes over (batch_size, kv_tokens); a complete grid."),
  })
  .superRefine((fp, ctx) => {
    const p = gridProblems(fp.prefill.map((x) => [x.batch_size, x.new_tokens, x.cached_tokens]));
    if (p !== undefined) ctx.addIssue({ code: "custom", path: ["prefill"], message: p });
    const d = gridProblems(fp.decode.map((x) => [x.batch_size, x.kv_tokens]));
    if (d !== undefined) ctx.addIssue({ code: "custom", path: ["decode"], message: d });
  });
export type ForwardPass = z.infer<typeof ForwardPassSchema>;

/**
 * What the model takes on one rank besides its KV cache, for `num_gpu_blocks` from GPU memory
 * (capacity.ts). `kvsim profile from-hf` writes it; the activation terms are estimates of what
 * vLLM measures at start-up (its profile run), see the package README.
 */
export const ModelMemorySchema = z.strictObject({
  weights_bytes: nonNegativeInt()
    .optional()
    .describe("Model weights on this rank in bytes (parameters per rank x their bytes, plus the rotary cache). Absent: give engine.weights_gib."),
  activation_bytes_per_token: nonNegativeInt().describe(
    "Estimated activation bytes per batched token of vLLM's profile run (its forward pass over max_num_batched_tokens).",
  ),
  sampler_bytes_per_sequence: nonNegativeInt().describe(
    "Estimated bytes per sampled sequence of the profile run's sampler (logits and their sort, softmax and cumulative sum over the vocabulary).",
  ),
  provenance: nonBlank().describe("Where the numbers come from (the config, the rules applied)."),
});
export type ModelMemory = z.infer<typeof ModelMemorySchema>;

/** A literal vLLM version string such as `0.32.0` (no ranges, no `latest`). */
export const VllmVersionSchema = z.string().regex(/^\d+\.\d+\.\d+([.+-][0-9A-Za-z.+-]+)?$/, {
  error: "must be a literal version such as 0.32.0",
  abort: true,
});

/**
 * A model deployment on one TP rank (profile file v1). Grouped (`kv_cache_groups` +
 * `page_size_bytes`) or linear (`kv_bytes_per_token`), never both.
 */
export const ProfileSchema = z
  .strictObject({
    /** Editor support only: the JSON Schema this file follows. kvsim ignores it. */
    $schema: z.string().optional().describe("The JSON Schema this file follows (editor support); kvsim ignores it."),
    schema_version: z.literal(1, { error: "must be 1" }).describe("Profile format version; 1."),
    model: nonBlank().describe("Model name, e.g. zai-org/GLM-5.3-Flash."),
    /** Free text shown to users, e.g. where the numbers come from. */
    description: z.string().optional().describe("Free text, e.g. where the numbers come from."),
    vllm_version: VllmVersionSchema.describe("The literal vLLM version the profile describes; grouped P/D needs 0.31.0 or 0.32.0."),
    tensor_parallel_size: positiveInt().describe("Tensor-parallel ranks; the profile describes one of them."),
    kv_cache_dtype: nonBlank().optional().describe("KV cache dtype, e.g. fp8 or bf16; informational."),
    /** One pool page; every group's block takes one page (vLLM pads pages to one size). Grouped only. */
    page_size_bytes: byteCount().optional().describe("Grouped profiles: one pool page in bytes; a block of any group takes one page."),
    /** Linear profiles: KV bytes per token on this rank. */
    kv_bytes_per_token: byteCount().optional().describe("Linear profiles: KV bytes per token on this rank. Never together with kv_cache_groups."),
    kv_cache_groups: z
      .array(CacheGroupSchema)
      .min(1, { error: "must list at least one group", abort: true })
      .optional()
      .describe("Grouped profiles: the cache groups sharing the pool. Never together with kv_bytes_per_token."),
    forward_pass: ForwardPassSchema.optional().describe("Measured (or illustrative) forward-pass latencies for timing type profile."),
    memory: ModelMemorySchema.optional().describe(
      "Weights and activation estimates of one rank, so engine settings can give GPU memory instead of num_gpu_blocks.",
    ),
    model_shape: ModelShapeSchema.optional().describe(
      "The model's compute shape (whole model, as its config.json states it) for timing type roofline; kvsim profile from-hf writes it.",
    ),
  })
  .superRefine((p, ctx) => {
    const grouped = p.kv_cache_groups !== undefined;
    const linear = p.kv_bytes_per_token !== undefined;
    if (grouped && linear) {
      ctx.addIssue({
        code: "custom",
        path: ["kv_bytes_per_token"],
        message: "a profile has either kv_bytes_per_token (linear) or kv_cache_groups (grouped), never both",
      });
    }
    if (!grouped && !linear) {
      ctx.addIssue({ code: "custom", path: [], message: "a profile needs kv_bytes_per_token (linear) or kv_cache_groups (grouped)" });
    }
    if (grouped && p.page_size_bytes === undefined) {
      ctx.addIssue({ code: "custom", path: ["page_size_bytes"], message: "is required for a grouped profile (one pool page, the same for every group)" });
    }
    if (!grouped && p.page_size_bytes !== undefined) {
      ctx.addIssue({ code: "custom", path: ["page_size_bytes"], message: "is only allowed with kv_cache_groups" });
    }
    if (p.kv_cache_groups !== undefined) {
      const seen = new Map<string, number>();
      p.kv_cache_groups.forEach((g, i) => {
        const first = seen.get(g.name);
        if (first !== undefined) {
          ctx.addIssue({ code: "custom", path: ["kv_cache_groups", i, "name"], message: `duplicate group name "${g.name}" (also kv_cache_groups[${first}])` });
        } else {
          seen.set(g.name, i);
        }
        if (p.page_size_bytes !== undefined && g.transfer_bytes_per_block !== undefined && g.transfer_bytes_per_block > p.page_size_bytes) {
          ctx.addIssue({
            code: "custom",
            path: ["kv_cache_groups", i, "transfer_bytes_per_block"],
            message: `${g.transfer_bytes_per_block} exceeds page_size_bytes ${p.page_size_bytes}: a block's payload fits in its page`,
          });
        }
      });
    }
  });
export type Profile = z.infer<typeof ProfileSchema>;

/** A profile with cache groups. */
export type GroupedProfile = Profile & { kv_cache_groups: CacheGroup[]; page_size_bytes: number };
/** A profile with one KV rate per token. */
export type LinearProfile = Profile & { kv_bytes_per_token: number; kv_cache_groups?: undefined };

export const isGroupedProfile = (p: Profile): p is GroupedProfile => p.kv_cache_groups !== undefined;
export const isLinearProfile = (p: Profile): p is LinearProfile => p.kv_cache_groups === undefined && p.kv_bytes_per_token !== undefined;

/** A prefix-cacheable `state` group: a running recurrent state with checkpoints (Mamba, KDA). */
export const isMambaTypeGroup = (g: CacheGroup): boolean => g.kind === "state" && g.prefix_cacheable === true;

/** True when the model has a Mamba-type state group, so its prefill backs off one token. */
export const hasMambaTypeState = (p: Profile): boolean => p.kv_cache_groups?.some(isMambaTypeGroup) ?? false;
