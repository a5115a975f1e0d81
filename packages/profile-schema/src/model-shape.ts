import { z } from "zod";
import { nonNegativeInt, positiveInt, rangedNumber } from "./primitives.js";

/**
 * The model's compute shape (issue #35): what a roofline needs to price a step's FLOPs and bytes.
 * Every figure is the whole model's, as its Hugging Face config.json states it; the per-rank split
 * (tensor parallelism, expert parallelism) follows vLLM's sharding and is computed by
 * {@link shapePerRank}. `kvsim profile from-hf` writes it; hand-written profiles may add it.
 */

const count = () => positiveInt().max(2 ** 24, { error: "must be at most 2^24", abort: true });
const layerCount = () => nonNegativeInt().max(4096, { error: "must be at most 4096 layers", abort: true });

/** Multi-head latent attention (DeepSeek V2/V3, Kimi K2, GLM-5): low-rank q and kv projections. */
const MlaShapeSchema = z.strictObject({
  q_lora_rank: count().optional().describe("Rank of the query down-projection; absent: queries are projected directly (config q_lora_rank null)."),
  kv_lora_rank: count().describe("Rank of the compressed KV latent (config kv_lora_rank); the cache holds it plus the rope part per token."),
  qk_nope_head_dim: count().describe("Per-head query/key dims without rotary embedding."),
  qk_rope_head_dim: count().describe("Per-head rotary dims (shared key part cached once per token)."),
  v_head_dim: count().describe("Per-head value dims."),
});
export type MlaShape = z.infer<typeof MlaShapeSchema>;

/** Softmax attention layers (full and sliding-window). */
const AttentionShapeSchema = z
  .strictObject({
    layers: layerCount().describe("Softmax-attention layers (full and sliding-window together)."),
    num_heads: count().describe("Query heads (config num_attention_heads)."),
    num_kv_heads: count().describe("Key/value heads (config num_key_value_heads; num_heads without GQA; 1 for MLA)."),
    head_dim: count().describe("Query/key dims per head (config head_dim, else hidden_size / num_heads)."),
    v_head_dim: count().optional().describe("Value dims per head when they differ from head_dim."),
    sliding_window: count().optional().describe("Window of the sliding-window layers, tokens."),
    sliding_layers: layerCount().default(0).describe("How many of `layers` attend only the last sliding_window tokens."),
    output_gate: z
      .boolean()
      .default(false)
      .describe("A gate on the attention output projected beside the queries (Qwen3-Next): the query projection is twice as wide; the scores are not."),
    mla: MlaShapeSchema.optional().describe("Present for multi-head latent attention: the low-rank dims (num_kv_heads and head_dim are then ignored)."),
  })
  .superRefine((a, ctx) => {
    if (a.sliding_layers > a.layers) ctx.addIssue({ code: "custom", path: ["sliding_layers"], message: `${a.sliding_layers} exceeds layers ${a.layers}` });
    if (a.sliding_layers > 0 && a.sliding_window === undefined)
      ctx.addIssue({ code: "custom", path: ["sliding_window"], message: "is required when sliding_layers > 0" });
  });
export type AttentionShape = z.infer<typeof AttentionShapeSchema>;

/** Layers with a dense gated MLP (gate, up and down projections). */
const DenseMlpShapeSchema = z.strictObject({
  layers: layerCount().describe("Layers with a dense MLP."),
  intermediate_size: count().describe("MLP width (config intermediate_size)."),
  gated: z.boolean().default(true).describe("Gate, up and down projections (SwiGLU/GeGLU); false: up and down only (Nemotron-H's squared-ReLU MLP)."),
});

/** Layers with a mixture-of-experts MLP. */
const MoeShapeSchema = z
  .strictObject({
    layers: layerCount().describe("Layers with routed experts."),
    num_experts: count().describe("Routed experts per MoE layer (num_experts, num_local_experts or n_routed_experts)."),
    num_experts_per_tok: count().describe("Experts each token is routed to (top-k)."),
    expert_intermediate_size: count().describe("Width of one routed expert (moe_intermediate_size; Mixtral: intermediate_size)."),
    shared_expert_intermediate_size: nonNegativeInt().default(0).describe("Total width of the shared experts every token passes through (0: none)."),
  })
  .refine((m) => m.num_experts_per_tok <= m.num_experts, { error: "num_experts_per_tok must be at most num_experts", path: ["num_experts_per_tok"] });

/** Linear-attention or state-space mixer layers (Mamba, Mamba-2, Gated DeltaNet, KDA). */
const LinearMixerShapeSchema = z.strictObject({
  layers: layerCount().describe("Layers whose mixer is linear attention or a state-space model."),
  kind: z.enum(["mamba", "mamba2", "gated_delta_net", "kda", "other"]).describe("The mixer family (informational)."),
  params_per_layer: positiveInt().describe("Linear-projection parameters of one such mixer, whole model (split over TP ranks)."),
  state_bytes_per_layer: positiveInt().describe(
    "Recurrent and convolution state of one sequence in one such layer, bytes, whole model (split over TP ranks); read and written once per step for each row.",
  ),
  parallel_attention: z
    .boolean()
    .default(false)
    .describe(
      "Each of these layers also runs softmax attention beside the mixer on the same input (Falcon-H1): the layers count once in num_layers, and attention.layers includes them.",
    ),
});

/** The model's compute shape. */
export const ModelShapeSchema = z
  .strictObject({
    hidden_size: count().describe("Residual width (config hidden_size)."),
    num_layers: layerCount().describe("Decoder layers (config num_hidden_layers)."),
    vocab_size: count().describe("Vocabulary (config vocab_size); the LM head is vocab x hidden."),
    tie_word_embeddings: z.boolean().default(false).describe("The LM head shares the embedding's weights (informational: the head is read either way)."),
    weight_bytes: rangedNumber(0, 8, "bytes", { exclusiveMin: true }).describe(
      "Bytes per weight of the linear layers: 2 for bf16/fp16, 1 for fp8 checkpoints.",
    ),
    expert_weight_bytes: rangedNumber(0, 8, "bytes", { exclusiveMin: true })
      .optional()
      .describe("Bytes per routed-expert weight when it differs (MXFP4: 0.53125)."),
    fp8_compute: z
      .boolean()
      .default(false)
      .describe("The linear layers run FP8 tensor-core GEMMs (an fp8 checkpoint on a GPU with FP8 tensor cores); otherwise BF16."),
    attention: AttentionShapeSchema.optional().describe("Softmax-attention layers."),
    mlp: DenseMlpShapeSchema.optional().describe("Dense-MLP layers."),
    moe: MoeShapeSchema.optional().describe("Mixture-of-experts layers."),
    linear_mixer: LinearMixerShapeSchema.optional().describe("Linear-attention or state-space mixer layers."),
    provenance: z.string().optional().describe("Where the shape comes from (the config file, or by hand)."),
  })
  .superRefine((s, ctx) => {
    const lm = s.linear_mixer;
    if (lm?.parallel_attention === true) {
      // Falcon-H1: attention and the mixer side by side, so a layer holds both.
      const attn = s.attention?.layers ?? 0;
      if (lm.layers > attn)
        ctx.addIssue({
          code: "custom",
          path: ["linear_mixer", "layers"],
          message: `is ${lm.layers}, but a parallel mixer runs beside attention and attention.layers is ${attn}`,
        });
      if (attn !== s.num_layers)
        ctx.addIssue({
          code: "custom",
          path: ["num_layers"],
          message: `is ${s.num_layers}, but attention.layers is ${attn}: with a parallel mixer every decoder layer has attention`,
        });
    } else {
      const mixers = (s.attention?.layers ?? 0) + (lm?.layers ?? 0);
      if (mixers !== s.num_layers) {
        ctx.addIssue({
          code: "custom",
          path: ["num_layers"],
          message: `is ${s.num_layers}, but attention.layers + linear_mixer.layers is ${mixers}: every decoder layer has one mixer`,
        });
      }
    }
    const ffns = (s.mlp?.layers ?? 0) + (s.moe?.layers ?? 0);
    if (ffns > s.num_layers) {
      ctx.addIssue({ code: "custom", path: ["num_layers"], message: `is ${s.num_layers}, but mlp.layers + moe.layers is ${ffns}` });
    }
  });
export type ModelShape = z.infer<typeof ModelShapeSchema>;

/** How one rank's share of the model is split. */
export interface RankSplit {
  /** Tensor-parallel ranks. */
  readonly tp: number;
  /**
   * Expert-parallel ranks the routed experts are spread over (vLLM: tp x dp with
   * enable_expert_parallel), or 1 without expert parallelism (each expert is then split over TP).
   */
  readonly ep: number;
}

/** One rank's share of a model's weights and per-token work, in elements (not bytes). */
export interface RankShape {
  /** Dense linear weights of one rank read once per step: attention projections, dense MLPs, shared experts, mixer projections. */
  readonly denseParams: number;
  /** Routed-expert weights of one rank per MoE layer, over all its local experts. */
  readonly expertParamsPerLayer: number;
  /** Routed experts held by one rank per layer (all of them, split over TP, without EP). */
  readonly localExperts: number;
  /** Multiply-accumulates of routed experts per token-expert pair on one rank, per layer (3 x hidden x width / split). */
  readonly expertMacsPerPair: number;
  /** LM head rows x hidden on one rank (vocabulary padded to 64, split over TP). */
  readonly lmHeadParams: number;
  /** Attention multiply-accumulates per (query, key) pair per attention layer on one rank, prefill form. */
  readonly attentionMacsPerPairPrefill: number;
  /** The same for a decode row (MLA attends in its latent space there). */
  readonly attentionMacsPerPairDecode: number;
  /** Recurrent state bytes of one sequence on one rank, all linear-mixer layers. */
  readonly stateBytesPerSequence: number;
}

/** KV heads on one rank: split when there are at least as many as ranks, else one replica each (vLLM). */
export const kvHeadsPerRank = (kvHeads: number, tp: number): number => (kvHeads >= tp ? kvHeads / tp : 1);

/**
 * One rank's share of the model, by vLLM's sharding: column/row-parallel linears split by TP, KV
 * heads split or replicated, MLA's low-rank projections replicated, the vocabulary padded to 64 and
 * split, routed experts split by TP or, with expert parallelism, spread whole over EP ranks.
 */
export function shapePerRank(shape: ModelShape, split: RankSplit): RankShape {
  const { tp, ep } = split;
  const h = shape.hidden_size;
  let dense = 0;
  let pre = 0;
  let dec = 0;
  const a = shape.attention;
  if (a !== undefined && a.layers > 0) {
    const headsRank = a.num_heads / tp;
    if (a.mla !== undefined) {
      const m = a.mla;
      const qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
      const q = m.q_lora_rank === undefined ? h * headsRank * qk : h * m.q_lora_rank + m.q_lora_rank * headsRank * qk;
      const kvA = h * (m.kv_lora_rank + m.qk_rope_head_dim);
      const kvB = m.kv_lora_rank * headsRank * (m.qk_nope_head_dim + m.v_head_dim);
      const o = headsRank * m.v_head_dim * h;
      dense += a.layers * (q + kvA + kvB + o);
      pre = headsRank * (qk + m.v_head_dim);
      // Decode absorbs the up-projections: scores over (latent + rope), values over the latent.
      dec = headsRank * (m.kv_lora_rank + m.qk_rope_head_dim + m.kv_lora_rank);
    } else {
      const vDim = a.v_head_dim ?? a.head_dim;
      const q = headsRank * a.head_dim;
      const kvRank = kvHeadsPerRank(a.num_kv_heads, tp);
      dense += a.layers * (h * ((a.output_gate ? 2 : 1) * q + kvRank * a.head_dim + kvRank * vDim) + headsRank * vDim * h);
      pre = headsRank * (a.head_dim + vDim);
      dec = pre;
    }
  }
  if (shape.mlp !== undefined) dense += shape.mlp.layers * (((shape.mlp.gated ? 3 : 2) * h * shape.mlp.intermediate_size) / tp);
  let expertParamsPerLayer = 0;
  let localExperts = 0;
  let expertMacsPerPair = 0;
  const moe = shape.moe;
  if (moe !== undefined && moe.layers > 0) {
    dense += moe.layers * ((3 * h * moe.shared_expert_intermediate_size) / tp + h * moe.num_experts);
    const whole = 3 * h * moe.expert_intermediate_size;
    if (ep > 1) {
      localExperts = moe.num_experts / ep;
      expertMacsPerPair = whole;
    } else {
      localExperts = moe.num_experts;
      expertMacsPerPair = whole / tp;
    }
    expertParamsPerLayer = localExperts * expertMacsPerPair;
  }
  let stateBytesPerSequence = 0;
  const lm = shape.linear_mixer;
  if (lm !== undefined && lm.layers > 0) {
    dense += (lm.layers * lm.params_per_layer) / tp;
    stateBytesPerSequence = (lm.layers * lm.state_bytes_per_layer) / tp;
  }
  const lmHeadParams = (Math.ceil(shape.vocab_size / 64) * 64 * h) / tp;
  return {
    denseParams: dense,
    expertParamsPerLayer,
    localExperts,
    expertMacsPerPair,
    lmHeadParams,
    attentionMacsPerPairPrefill: pre,
    attentionMacsPerPairDecode: dec,
    stateBytesPerSequence,
  };
}
