import type { AttentionShape, ModelShape } from "@kvsim/profile-schema";
import { shortJson, type ConfigReader } from "./config.js";
import type { LayerCache } from "./layout.js";
import {
  addParts,
  denseMlp,
  emptyParts,
  gatedDeltaNet,
  gqaAttention,
  kimiDeltaAttention,
  kvHeadsPerRank,
  mamba1Mixer,
  mamba2Mixer,
  mlaAttention,
  moeMlp,
  type Block,
  type MlaDims,
  type WeightParts,
} from "./params.js";

/** What a family needs besides the config. */
interface FamilyContext {
  readonly tp: number;
  /** Bytes of one attention KV element (the KV cache dtype). */
  readonly kvBytes: number;
  /** Bytes of the model dtype (weights, activations, recurrent states by default). */
  readonly dtypeBytes: number;
  readonly notes: string[];
}

/** One model on one TP rank, as the derivation needs it. */
export interface ModelDescription {
  /** The KV cache spec of every layer, in layer order (Falcon-H1 has two per decoder layer). */
  readonly layers: LayerCache[];
  readonly mla: boolean;
  /** Parameters per rank. */
  readonly parts: WeightParts;
  readonly hidden: number;
  readonly vocab: number;
  /** Widest mixer (attention or recurrent) projection per token, per rank. */
  readonly mixerWidth: number;
  /** Widest MLP intermediate per token, per rank (experts: top-k of them). */
  readonly ffnWidth: number;
  /** Elements of the rotary cos/sin cache (max positions x rotary dim); 0 without RoPE. */
  readonly rotaryElements: number;
  /** The whole model's compute shape (TP 1, as config.json states it); derive adds the weight bytes. */
  readonly shape: ShapeCore;
}

/** A model's compute shape without what the checkpoint's storage decides (weight bytes) and the provenance. */
type ShapeCore = Omit<ModelShape, "weight_bytes" | "expert_weight_bytes" | "fp8_compute" | "provenance">;
type LinearMixerShape = NonNullable<ModelShape["linear_mixer"]>;

export type FamilyName = "dense" | "mla" | "sliding-window" | "hybrid";

export interface Family {
  readonly family: FamilyName;
  /** Read from `text_config` rather than the root (multimodal wrappers). */
  readonly textConfig?: boolean;
  readonly describe: (cfg: ConfigReader, ctx: FamilyContext) => ModelDescription;
}

// ---------------------------------------------------------------------------------------------
// Shared readers

interface Common {
  readonly hidden: number;
  readonly layers: number;
  readonly vocab: number;
  readonly tie: boolean;
  readonly maxPositions: number;
}

function common(cfg: ConfigReader, tieDefault = false): Common {
  return {
    hidden: cfg.int("hidden_size"),
    layers: cfg.int("num_hidden_layers"),
    vocab: cfg.int("vocab_size"),
    tie: cfg.optBool("tie_word_embeddings") ?? tieDefault,
    maxPositions: cfg.optInt("max_position_embeddings") ?? 0,
  };
}

interface Gqa {
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
}

/** Attention heads with vLLM's TP rules: query heads split evenly; KV heads split or replicated. */
function gqa(cfg: ConfigReader, ctx: FamilyContext, hidden: number, headDimDefault?: number): Gqa {
  const heads = cfg.int("num_attention_heads");
  const kvHeads = cfg.optInt("num_key_value_heads") ?? heads;
  let headDim = cfg.optInt("head_dim") ?? headDimDefault ?? hidden / heads;
  if (!Number.isInteger(headDim) && Number.isFinite(headDim)) {
    cfg.refuse("head_dim", `is needed: hidden_size ${hidden} / num_attention_heads ${heads} is not an integer`);
    headDim = Number.NaN;
  }
  const tp = ctx.tp;
  if (heads % tp !== 0)
    cfg.refuse("num_attention_heads", `${heads} attention heads do not split over ${tp} TP ranks (vLLM needs them divisible by the TP size)`);
  if (kvHeads >= tp ? kvHeads % tp !== 0 : tp % kvHeads !== 0) {
    cfg.refuse("num_key_value_heads", `${kvHeads} KV heads do not ${kvHeads >= tp ? "split evenly over" : "replicate evenly onto"} ${tp} TP ranks`);
  }
  return { heads, kvHeads, headDim };
}

/** K and V of one layer per token on one rank: 2 x KV heads per rank x head dim x dtype bytes. */
const attentionBytes = (a: Gqa, ctx: FamilyContext) => 2 * kvHeadsPerRank(a.kvHeads, ctx.tp) * a.headDim * ctx.kvBytes;

/** The attention part of the shape: `windows` has one entry per attention layer (undefined: full attention). */
function gqaShape(a: Gqa, windows: readonly (number | undefined)[]): AttentionShape {
  const sliding = windows.filter((w) => w !== undefined);
  return {
    layers: windows.length,
    num_heads: a.heads,
    num_kv_heads: a.kvHeads,
    head_dim: a.headDim,
    ...(sliding.length > 0 ? { sliding_window: Math.max(...sliding) } : {}),
    sliding_layers: sliding.length,
    output_gate: false,
  };
}

interface Moe {
  readonly experts: number;
  readonly topK: number;
  readonly expertIntermediate: number;
  readonly sharedIntermediate: number;
}

const moeShape = (m: Moe, layers: number): NonNullable<ModelShape["moe"]> => ({
  layers,
  num_experts: m.experts,
  num_experts_per_tok: m.topK,
  expert_intermediate_size: m.expertIntermediate,
  shared_expert_intermediate_size: m.sharedIntermediate,
});

/**
 * A linear mixer's part of the shape, whole model: its block's linear projections and its state
 * evaluated at TP 1 by the same formulas the per-rank parameters and the cache layout use.
 */
const linearShape = (kind: LinearMixerShape["kind"], layers: number, block: Block, stateBytes: number): LinearMixerShape => ({
  layers,
  kind,
  params_per_layer: block.parts.linear ?? 0,
  state_bytes_per_layer: stateBytes,
  parallel_attention: false,
});

/** Accumulates blocks into parts and the widest widths. */
class Builder {
  readonly parts = emptyParts();
  mixerWidth = 0;
  ffnWidth = 0;
  readonly layers: LayerCache[] = [];
  /** Shape pieces, whole model. */
  attention: AttentionShape | undefined;
  mlp: ModelShape["mlp"];
  moe: ModelShape["moe"];
  linear: ModelShape["linear_mixer"];

  mixer(b: Block, times = 1): void {
    addParts(this.parts, b.parts, times);
    if (times > 0) this.mixerWidth = Math.max(this.mixerWidth, b.width);
  }

  ffn(b: Block, times = 1): void {
    addParts(this.parts, b.parts, times);
    if (times > 0) this.ffnWidth = Math.max(this.ffnWidth, b.width);
  }

  /**
   * Embedding, LM head (unless tied), two norms per layer and a final norm. `shapeLayers`: the
   * decoder layers the shape counts (config num_hidden_layers unless a family says otherwise).
   */
  finish(c: Common, tp: number, rotaryDim: number, normLayers = c.layers, shapeLayers = c.layers): ModelDescription {
    const rows = Math.ceil((Math.ceil(c.vocab / 64) * 64) / tp);
    addParts(this.parts, { embedding: rows * c.hidden * (c.tie ? 1 : 2), other: 2 * c.hidden * normLayers + c.hidden });
    const shape: ShapeCore = {
      hidden_size: c.hidden,
      num_layers: shapeLayers,
      vocab_size: c.vocab,
      tie_word_embeddings: c.tie,
      ...(this.attention === undefined ? {} : { attention: this.attention }),
      ...(this.mlp === undefined || this.mlp.layers === 0 ? {} : { mlp: this.mlp }),
      ...(this.moe === undefined || this.moe.layers === 0 ? {} : { moe: this.moe }),
      ...(this.linear === undefined || this.linear.layers === 0 ? {} : { linear_mixer: this.linear }),
    };
    return {
      shape,
      layers: this.layers,
      mla: false,
      parts: this.parts,
      hidden: c.hidden,
      vocab: c.vocab,
      mixerWidth: this.mixerWidth,
      ffnWidth: this.ffnWidth,
      rotaryElements: c.maxPositions * rotaryDim,
    };
  }
}

const rotaryDim = (cfg: ConfigReader, headDim: number) => Math.round(headDim * (cfg.optPositive("partial_rotary_factor") ?? 1));

// ---------------------------------------------------------------------------------------------
// Dense attention: Llama, Mistral, Qwen2/3 (and their MoE variants, whose attention is the same)

/** Per-layer window of a dense model: `layer_types`, Qwen's use_sliding_window, or a model-wide window. */
function denseWindows(cfg: ConfigReader, layers: number, qwen: boolean): (number | undefined)[] {
  const window = cfg.optInt("sliding_window");
  const types = cfg.optStrings("layer_types");
  if (types !== undefined) {
    if (types.length !== layers) cfg.refuse("layer_types", `lists ${types.length} layers, num_hidden_layers is ${layers}`);
    return types.map((t) => (t === "sliding_attention" ? window : undefined));
  }
  if (qwen) {
    // Qwen2/3: the sliding window is off unless use_sliding_window; then the layers from
    // max_window_layers on use it (the first max_window_layers layers keep full attention).
    if (cfg.optBool("use_sliding_window") !== true || window === undefined) return Array.from({ length: layers }, () => undefined);
    const full = cfg.optInt("max_window_layers", 0) ?? layers;
    return Array.from({ length: layers }, (_, i) => (i >= full ? window : undefined));
  }
  // Llama, Mistral, Mixtral: a model-level sliding_window applies to every layer.
  return Array.from({ length: layers }, () => window);
}

function readMoe(cfg: ConfigReader, expertsKey: string, intermediateKey: string, sharedKey?: string): Moe | undefined {
  const experts = cfg.optInt(expertsKey, 0) ?? 0;
  if (experts <= 1) return undefined;
  return {
    experts,
    topK: cfg.int("num_experts_per_tok"),
    expertIntermediate: cfg.int(intermediateKey),
    sharedIntermediate: sharedKey === undefined ? 0 : (cfg.optInt(sharedKey, 0) ?? 0),
  };
}

function dense(kind: "llama" | "qwen" | "qwen-moe" | "mixtral"): Family {
  return {
    family: "dense",
    describe: (cfg, ctx) => {
      const c = common(cfg);
      const a = gqa(cfg, ctx, c.hidden);
      const windows = denseWindows(cfg, c.layers, kind === "qwen" || kind === "qwen-moe");
      const b = new Builder();
      for (const w of windows)
        b.layers.push(
          w === undefined
            ? { kind: "attention", bytesPerToken: attentionBytes(a, ctx) }
            : { kind: "attention", bytesPerToken: attentionBytes(a, ctx), window: w },
        );
      b.mixer(gqaAttention(c.hidden, a.heads, a.kvHeads, a.headDim, ctx.tp), c.layers);
      b.attention = gqaShape(a, windows);
      const moe =
        kind === "mixtral"
          ? readMoe(cfg, "num_local_experts", "intermediate_size")
          : kind === "qwen-moe"
            ? readMoe(cfg, "num_experts", "moe_intermediate_size", "shared_expert_intermediate_size")
            : undefined;
      if (moe === undefined) {
        const width = cfg.int("intermediate_size");
        b.ffn(denseMlp(c.hidden, width, ctx.tp), c.layers);
        b.mlp = { layers: c.layers, intermediate_size: width, gated: true };
      } else {
        // Qwen MoE: mlp_only_layers and decoder_sparse_step pick the layers that keep a dense MLP.
        const denseOnly = new Set(cfg.optInts("mlp_only_layers") ?? []);
        const step = cfg.optInt("decoder_sparse_step") ?? 1;
        const sparse = Array.from({ length: c.layers }, (_, i) => !denseOnly.has(i) && (i + 1) % step === 0).filter(Boolean).length;
        b.ffn(moeMlp(c.hidden, moe.experts, moe.topK, moe.expertIntermediate, moe.sharedIntermediate, ctx.tp), sparse);
        b.moe = moeShape(moe, sparse);
        if (sparse < c.layers) {
          const width = cfg.int("intermediate_size");
          b.ffn(denseMlp(c.hidden, width, ctx.tp), c.layers - sparse);
          b.mlp = { layers: c.layers - sparse, intermediate_size: width, gated: true };
        }
      }
      return b.finish(c, ctx.tp, rotaryDim(cfg, a.headDim));
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Sliding-window hybrids: Gemma 2/3, gpt-oss

function gemma(version: 2 | 3, textConfig: boolean): Family {
  return {
    family: "sliding-window",
    textConfig,
    describe: (cfg, ctx) => {
      const c = common(cfg, true);
      const a = gqa(cfg, ctx, c.hidden, version === 3 ? 256 : undefined);
      const window = cfg.int("sliding_window");
      const types = cfg.optStrings("layer_types");
      let sliding: boolean[];
      if (types !== undefined) {
        if (types.length !== c.layers) cfg.refuse("layer_types", `lists ${types.length} layers, num_hidden_layers is ${c.layers}`);
        sliding = types.map((t) => t === "sliding_attention");
      } else if (version === 2) {
        // Gemma 2 alternates, starting with a local (sliding) layer.
        sliding = Array.from({ length: c.layers }, (_, i) => i % 2 === 0);
      } else {
        // Gemma 3: every sliding_window_pattern-th layer is global, the others local.
        const pattern = cfg.optInt("sliding_window_pattern") ?? 6;
        sliding = Array.from({ length: c.layers }, (_, i) => (i + 1) % pattern !== 0);
      }
      const b = new Builder();
      for (const s of sliding)
        b.layers.push(s ? { kind: "attention", bytesPerToken: attentionBytes(a, ctx), window } : { kind: "attention", bytesPerToken: attentionBytes(a, ctx) });
      b.mixer(gqaAttention(c.hidden, a.heads, a.kvHeads, a.headDim, ctx.tp), c.layers);
      b.attention = gqaShape(
        a,
        sliding.map((sl) => (sl ? window : undefined)),
      );
      const width = cfg.int("intermediate_size");
      b.ffn(denseMlp(c.hidden, width, ctx.tp), c.layers);
      b.mlp = { layers: c.layers, intermediate_size: width, gated: true };
      return b.finish(c, ctx.tp, rotaryDim(cfg, a.headDim), 2 * c.layers);
    },
  };
}

/** The vision tower of a multimodal wrapper: layers of 4 h^2 + 2 h i, split by TP, plus the projector. */
export function visionTowerParts(vision: ConfigReader | undefined, textHidden: number, tp: number): number {
  if (vision === undefined) return 0;
  const h = vision.optInt("hidden_size");
  const i = vision.optInt("intermediate_size");
  const l = vision.optInt("num_hidden_layers");
  if (h === undefined || i === undefined || l === undefined) return 0;
  return (l * (4 * h * h + 2 * h * i)) / tp + h * textHidden;
}

const gptOss: Family = {
  family: "sliding-window",
  describe: (cfg, ctx) => {
    const c = common(cfg);
    const a = gqa(cfg, ctx, c.hidden);
    const window = cfg.int("sliding_window");
    const types = cfg.optStrings("layer_types") ?? Array.from({ length: c.layers }, (_, i) => (i % 2 === 0 ? "sliding_attention" : "full_attention"));
    if (types.length !== c.layers) cfg.refuse("layer_types", `lists ${types.length} layers, num_hidden_layers is ${c.layers}`);
    const b = new Builder();
    for (const t of types)
      b.layers.push(
        t === "sliding_attention"
          ? { kind: "attention", bytesPerToken: attentionBytes(a, ctx), window }
          : { kind: "attention", bytesPerToken: attentionBytes(a, ctx) },
      );
    b.mixer(gqaAttention(c.hidden, a.heads, a.kvHeads, a.headDim, ctx.tp), c.layers);
    b.attention = gqaShape(
      a,
      types.map((t) => (t === "sliding_attention" ? window : undefined)),
    );
    const moe = readMoe(cfg, "num_local_experts", "intermediate_size");
    if (moe === undefined) {
      const width = cfg.int("intermediate_size");
      b.ffn(denseMlp(c.hidden, width, ctx.tp), c.layers);
      b.mlp = { layers: c.layers, intermediate_size: width, gated: true };
    } else {
      b.ffn(moeMlp(c.hidden, moe.experts, moe.topK, moe.expertIntermediate, 0, ctx.tp), c.layers);
      b.moe = moeShape(moe, c.layers);
    }
    return b.finish(c, ctx.tp, rotaryDim(cfg, a.headDim));
  },
};

// ---------------------------------------------------------------------------------------------
// Multi-head latent attention: DeepSeek V2/V3, Kimi K2

function readMla(cfg: ConfigReader, ctx: FamilyContext): MlaDims {
  const heads = cfg.int("num_attention_heads");
  if (heads % ctx.tp !== 0)
    cfg.refuse("num_attention_heads", `${heads} attention heads do not split over ${ctx.tp} TP ranks (vLLM needs them divisible by the TP size)`);
  return {
    heads,
    qLoraRank: cfg.optInt("q_lora_rank"),
    kvLoraRank: cfg.int("kv_lora_rank"),
    qkNopeHeadDim: cfg.int("qk_nope_head_dim"),
    qkRopeHeadDim: cfg.int("qk_rope_head_dim"),
    vHeadDim: cfg.int("v_head_dim"),
  };
}

/** MLA layers in the shape: one shared latent "KV head"; head_dim is the query/key head (nope + rope). */
function mlaShape(d: MlaDims, layers: number): AttentionShape {
  const qk = d.qkNopeHeadDim + d.qkRopeHeadDim;
  return {
    layers,
    num_heads: d.heads,
    num_kv_heads: 1,
    head_dim: qk,
    ...(d.vHeadDim === qk ? {} : { v_head_dim: d.vHeadDim }),
    sliding_layers: 0,
    output_gate: false,
    mla: {
      ...(d.qLoraRank === undefined ? {} : { q_lora_rank: d.qLoraRank }),
      kv_lora_rank: d.kvLoraRank,
      qk_nope_head_dim: d.qkNopeHeadDim,
      qk_rope_head_dim: d.qkRopeHeadDim,
      v_head_dim: d.vHeadDim,
    },
  };
}

/** One latent vector per token and layer, the same on every rank: (kv_lora_rank + qk_rope_head_dim) x dtype bytes. */
const mlaBytes = (d: MlaDims, ctx: FamilyContext) => (d.kvLoraRank + d.qkRopeHeadDim) * ctx.kvBytes;

/** DeepSeek-style MoE layers: the first `first_k_dense_replace` layers (and those off moe_layer_freq) stay dense. */
function deepseekFfn(cfg: ConfigReader, b: Builder, hidden: number, layers: number, tp: number, expertsKey: string, sharedKey: string): void {
  const experts = cfg.optInt(expertsKey, 0) ?? 0;
  const firstDense = cfg.optInt("first_k_dense_replace", 0) ?? 0;
  const freq = cfg.optInt("moe_layer_freq") ?? 1;
  const moeLayers = experts > 1 ? Array.from({ length: layers }, (_, i) => i >= firstDense && i % freq === 0).filter(Boolean).length : 0;
  if (moeLayers > 0) {
    const expertI = cfg.int("moe_intermediate_size");
    // The shared experts as one MLP of their total width: n_shared_experts x moe_intermediate_size.
    const shared = (cfg.optInt(sharedKey, 0) ?? 0) * expertI;
    const topK = cfg.int("num_experts_per_tok");
    b.ffn(moeMlp(hidden, experts, topK, expertI, shared, tp), moeLayers);
    b.moe = moeShape({ experts, topK, expertIntermediate: expertI, sharedIntermediate: shared }, moeLayers);
  }
  if (moeLayers < layers) {
    const width = cfg.int("intermediate_size");
    b.ffn(denseMlp(hidden, width, tp), layers - moeLayers);
    b.mlp = { layers: layers - moeLayers, intermediate_size: width, gated: true };
  }
}

const deepseek: Family = {
  family: "mla",
  describe: (cfg, ctx) => {
    const c = common(cfg);
    const d = readMla(cfg, ctx);
    const b = new Builder();
    for (let i = 0; i < c.layers; i++) b.layers.push({ kind: "attention", bytesPerToken: mlaBytes(d, ctx) });
    b.mixer(mlaAttention(c.hidden, d, ctx.tp), c.layers);
    b.attention = mlaShape(d, c.layers);
    deepseekFfn(cfg, b, c.hidden, c.layers, ctx.tp, "n_routed_experts", "n_shared_experts");
    return { ...b.finish(c, ctx.tp, d.qkRopeHeadDim), mla: true };
  },
};

// ---------------------------------------------------------------------------------------------
// Mamba and linear-attention hybrids

/** The dtype names kvsim reads in a config (torch_dtype, dtype, mamba_ssm_cache_dtype), as HF configs and vLLM spell them. */
const DTYPE_NAMES: readonly string[] = ["float32", "fp32", "float16", "bfloat16", "half", "fp16", "bf16"];

/** An optional dtype field, refused (located) when it names a dtype kvsim does not know. */
export function optDtype(cfg: ConfigReader, key: string): string | undefined {
  const name = cfg.optString(key);
  if (name === undefined || DTYPE_NAMES.includes(name)) return name;
  cfg.refuse(key, `unknown dtype ${shortJson(name)}; kvsim knows ${DTYPE_NAMES.join(", ")}`);
  return undefined;
}

/** Bytes of a dtype name as HF configs and vLLM's cache dtypes spell them. */
export function dtypeBytes(name: string | undefined, fallback: number): number {
  switch (name) {
    case "float32":
    case "fp32":
      return 4;
    case "float16":
    case "bfloat16":
    case "half":
    case "fp16":
    case "bf16":
      return 2;
    case undefined:
    default:
      return fallback;
  }
}

/** Mamba-2 state of one layer on one of `tp` ranks (MambaStateShapeCalculator.mamba2_state_shape); TP 1 for the whole model's. */
function mamba2State(
  cfg: ConfigReader,
  ctx: FamilyContext,
  m: { dInner: number; groups: number; stateSize: number; heads: number; headDim: number; convKernel: number },
  ssmBytes: number,
  keys: { heads: string; groups: string },
  tp = ctx.tp,
): number {
  // n_groups not divisible by TP is replicated up to TP so every head keeps its group.
  let groups = m.groups;
  if (groups % tp !== 0) {
    if (groups > tp) cfg.refuse(keys.groups, `${groups} groups neither divide by nor fit under ${tp} TP ranks`);
    groups = tp;
  }
  if (m.heads % tp !== 0) cfg.refuse(keys.heads, `${m.heads} Mamba heads do not split over ${tp} TP ranks`);
  const convDim = m.dInner + 2 * groups * m.stateSize;
  if (convDim % tp !== 0) cfg.refuse(keys.heads, `the conv dimension ${convDim} does not split over ${tp} TP ranks`);
  return (m.convKernel - 1) * (convDim / tp) * ctx.dtypeBytes + (m.heads / tp) * m.headDim * m.stateSize * ssmBytes;
}

const qwen3Next: Family = {
  family: "hybrid",
  describe: (cfg, ctx) => {
    const c = common(cfg);
    const a = gqa(cfg, ctx, c.hidden);
    const kHeads = cfg.int("linear_num_key_heads");
    const vHeads = cfg.int("linear_num_value_heads");
    const kDim = cfg.int("linear_key_head_dim");
    const vDim = cfg.int("linear_value_head_dim");
    const kernel = cfg.int("linear_conv_kernel_dim");
    const tp = ctx.tp;
    if (vHeads % tp !== 0) cfg.refuse("linear_num_value_heads", `${vHeads} value heads do not split over ${tp} TP ranks`);
    if ((2 * kHeads * kDim + vHeads * vDim) % tp !== 0) cfg.refuse("linear_num_key_heads", `the conv dimension does not split over ${tp} TP ranks`);
    // gated_delta_net_state_shape: conv (kernel - 1, (2 k_heads k_dim + v_heads v_dim) / tp), and
    // the delta-rule state (v_heads / tp, v_dim, k_dim); both in the model dtype by default.
    const stateOn = (ranks: number) =>
      (kernel - 1) * ((2 * kHeads * kDim + vHeads * vDim) / ranks) * ctx.dtypeBytes + (vHeads / ranks) * vDim * kDim * ctx.dtypeBytes;
    const state = stateOn(tp);
    const types = cfg.optStrings("layer_types");
    const interval = cfg.optInt("full_attention_interval") ?? 4;
    const full = types ?? Array.from({ length: c.layers }, (_, i) => ((i + 1) % interval === 0 ? "full_attention" : "linear_attention"));
    if (full.length !== c.layers) cfg.refuse("layer_types", `lists ${full.length} layers, num_hidden_layers is ${c.layers}`);
    const b = new Builder();
    let attnLayers = 0;
    for (const t of full) {
      if (t === "full_attention") {
        attnLayers++;
        b.layers.push({ kind: "attention", bytesPerToken: attentionBytes(a, ctx) });
      } else b.layers.push({ kind: "state", stateBytes: state, mixer: "gdn" });
    }
    // Qwen3-Next's gated attention doubles the query projection (a gate per query element).
    b.mixer(gqaAttention(c.hidden, a.heads, a.kvHeads, a.headDim, tp, true), attnLayers);
    b.mixer(gatedDeltaNet(c.hidden, kHeads, vHeads, kDim, vDim, kernel, tp), c.layers - attnLayers);
    b.attention = { ...gqaShape(a, Array<undefined>(attnLayers).fill(undefined)), output_gate: true };
    b.linear = linearShape("gated_delta_net", c.layers - attnLayers, gatedDeltaNet(c.hidden, kHeads, vHeads, kDim, vDim, kernel, 1), stateOn(1));
    const moe = readMoe(cfg, "num_experts", "moe_intermediate_size", "shared_expert_intermediate_size");
    if (moe === undefined) {
      const width = cfg.int("intermediate_size");
      b.ffn(denseMlp(c.hidden, width, tp), c.layers);
      b.mlp = { layers: c.layers, intermediate_size: width, gated: true };
    } else {
      b.ffn(moeMlp(c.hidden, moe.experts, moe.topK, moe.expertIntermediate, moe.sharedIntermediate, tp), c.layers);
      b.moe = moeShape(moe, c.layers);
    }
    return b.finish(c, tp, rotaryDim(cfg, a.headDim));
  },
};

const nemotronH: Family = {
  family: "hybrid",
  describe: (cfg, ctx) => {
    const c = common(cfg);
    const whole = cfg.string("hybrid_override_pattern");
    if (whole.length !== c.layers && whole !== "") cfg.refuse("hybrid_override_pattern", `has ${whole.length} layers, num_hidden_layers is ${c.layers}`);
    // A pattern longer than any layer count is refused above; its first characters still say what they are.
    const pattern = whole.slice(0, 4096);
    const chars = pattern.split("").filter((ch) => ch.length === 1); // the pattern is ASCII
    const bad = chars.find((ch) => !"M*-E".includes(ch));
    if (bad !== undefined) cfg.refuse("hybrid_override_pattern", `has "${bad}"; kvsim knows M (Mamba-2), * (attention), - (MLP) and E (MoE)`);
    const headDim = cfg.optInt("head_dim") ?? cfg.optInt("attention_head_dim");
    const a = gqa(cfg, ctx, c.hidden, headDim);
    const heads = cfg.int("mamba_num_heads");
    const mHeadDim = cfg.int("mamba_head_dim");
    const m = {
      dInner: heads * mHeadDim,
      groups: cfg.int("n_groups"),
      stateSize: cfg.int("ssm_state_size"),
      heads,
      headDim: mHeadDim,
      convKernel: cfg.int("conv_kernel"),
    };
    // NemotronHForCausalLMConfig: the SSM state dtype is the config's mamba_ssm_cache_dtype, float32 when absent.
    const ssmBytes = dtypeBytes(optDtype(cfg, "mamba_ssm_cache_dtype"), 4);
    const state = mamba2State(cfg, ctx, m, ssmBytes, { heads: "mamba_num_heads", groups: "n_groups" });
    const b = new Builder();
    const count = (ch: string) => chars.filter((x) => x === ch).length;
    for (const ch of chars) {
      if (ch === "*") b.layers.push({ kind: "attention", bytesPerToken: attentionBytes(a, ctx) });
      else if (ch === "M") b.layers.push({ kind: "state", stateBytes: state, mixer: "mamba2" });
    }
    b.mixer(gqaAttention(c.hidden, a.heads, a.kvHeads, a.headDim, ctx.tp), count("*"));
    b.mixer(mamba2Mixer(c.hidden, m.dInner, m.groups, m.stateSize, heads, m.convKernel, ctx.tp), count("M"));
    b.attention = gqaShape(a, Array<undefined>(count("*")).fill(undefined));
    b.linear = linearShape(
      "mamba2",
      count("M"),
      mamba2Mixer(c.hidden, m.dInner, m.groups, m.stateSize, heads, m.convKernel, 1),
      mamba2State(cfg, ctx, m, ssmBytes, { heads: "mamba_num_heads", groups: "n_groups" }, 1),
    );
    if (count("-") > 0) {
      // Squared-ReLU MLP: up and down projections only.
      const width = cfg.int("intermediate_size");
      b.ffn({ ...denseMlp(c.hidden, width, ctx.tp), parts: { linear: (2 * c.hidden * width) / ctx.tp } }, count("-"));
      b.mlp = { layers: count("-"), intermediate_size: width, gated: false };
    }
    if (count("E") > 0) {
      const moe = readMoe(cfg, "n_routed_experts", "moe_intermediate_size", "moe_shared_expert_intermediate_size");
      if (moe !== undefined) {
        b.ffn(moeMlp(c.hidden, moe.experts, moe.topK, moe.expertIntermediate, moe.sharedIntermediate, ctx.tp), count("E"));
        b.moe = moeShape(moe, count("E"));
      }
    }
    // Each config layer is a single mixer or a single MLP block: the shape counts a decoder layer
    // per mixer block (the schema's one mixer per layer), with the MLP blocks beside them.
    const mixerBlocks = count("*") + count("M");
    if (mixerBlocks !== c.layers)
      ctx.notes.push(
        `model shape: Nemotron-H's ${c.layers} config layers are ${mixerBlocks} mixer blocks and ${c.layers - mixerBlocks} MLP blocks; num_layers counts the mixer blocks`,
      );
    // One norm per block in Nemotron-H (each layer is a single mixer or MLP).
    return b.finish(c, ctx.tp, 0, c.layers / 2, mixerBlocks);
  },
};

const jamba: Family = {
  family: "hybrid",
  describe: (cfg, ctx) => {
    const c = common(cfg);
    const a = gqa(cfg, ctx, c.hidden);
    const period = cfg.int("attn_layer_period");
    const offset = cfg.int("attn_layer_offset", 0);
    const dInner = cfg.int("mamba_expand") * c.hidden;
    const stateSize = cfg.int("mamba_d_state");
    const kernel = cfg.int("mamba_d_conv");
    // mamba_dt_rank is "auto" (ceil(hidden / 16)) or a number.
    const dtRankRaw = cfg.has("mamba_dt_rank") ? cfg.obj.mamba_dt_rank : undefined;
    const dtRank = typeof dtRankRaw === "number" ? dtRankRaw : Math.ceil(c.hidden / 16);
    if (dInner % ctx.tp !== 0) cfg.refuse("mamba_expand", `the Mamba inner size ${dInner} does not split over ${ctx.tp} TP ranks`);
    // mamba1_state_shape: conv (kernel - 1, d_inner / tp) and ssm (d_inner / tp, d_state), model dtype.
    const stateOn = (ranks: number) => (kernel - 1) * (dInner / ranks) * ctx.dtypeBytes + (dInner / ranks) * stateSize * ctx.dtypeBytes;
    const state = stateOn(ctx.tp);
    const b = new Builder();
    let attn = 0;
    for (let i = 0; i < c.layers; i++) {
      if (i % period === offset) {
        attn++;
        b.layers.push({ kind: "attention", bytesPerToken: attentionBytes(a, ctx) });
      } else b.layers.push({ kind: "state", stateBytes: state, mixer: "mamba" });
    }
    b.mixer(gqaAttention(c.hidden, a.heads, a.kvHeads, a.headDim, ctx.tp), attn);
    b.mixer(mamba1Mixer(c.hidden, dInner, stateSize, kernel, dtRank, ctx.tp), c.layers - attn);
    b.attention = gqaShape(a, Array<undefined>(attn).fill(undefined));
    b.linear = linearShape("mamba", c.layers - attn, mamba1Mixer(c.hidden, dInner, stateSize, kernel, dtRank, 1), stateOn(1));
    const moe = readMoe(cfg, "num_experts", "intermediate_size");
    const ePeriod = cfg.optInt("expert_layer_period") ?? 1;
    const eOffset = cfg.optInt("expert_layer_offset", 0) ?? 0;
    const moeLayers = moe === undefined ? 0 : Array.from({ length: c.layers }, (_, i) => i % ePeriod === eOffset).filter(Boolean).length;
    if (moe !== undefined) {
      b.ffn(moeMlp(c.hidden, moe.experts, moe.topK, moe.expertIntermediate, 0, ctx.tp), moeLayers);
      b.moe = moeShape(moe, moeLayers);
    }
    if (moeLayers < c.layers) {
      const width = cfg.int("intermediate_size");
      b.ffn(denseMlp(c.hidden, width, ctx.tp), c.layers - moeLayers);
      b.mlp = { layers: c.layers - moeLayers, intermediate_size: width, gated: true };
    }
    return b.finish(c, ctx.tp, 0);
  },
};

const graniteHybrid: Family = {
  family: "hybrid",
  describe: (cfg, ctx) => {
    const c = common(cfg);
    const a = gqa(cfg, ctx, c.hidden);
    const types = cfg.optStrings("layer_types") ?? [];
    if (types.length !== c.layers)
      cfg.refuse("layer_types", `lists ${types.length} layers, num_hidden_layers is ${c.layers} (Granite 4.0-H names each layer "mamba" or "attention")`);
    const heads = cfg.int("mamba_n_heads");
    const m = {
      dInner: cfg.int("mamba_expand") * c.hidden,
      groups: cfg.int("mamba_n_groups"),
      stateSize: cfg.int("mamba_d_state"),
      heads,
      headDim: cfg.int("mamba_d_head"),
      convKernel: cfg.int("mamba_d_conv"),
    };
    const state = mamba2State(cfg, ctx, m, ctx.dtypeBytes, { heads: "mamba_n_heads", groups: "mamba_n_groups" });
    const b = new Builder();
    const attn = types.filter((t) => t === "attention").length;
    for (const t of types)
      b.layers.push(t === "attention" ? { kind: "attention", bytesPerToken: attentionBytes(a, ctx) } : { kind: "state", stateBytes: state, mixer: "mamba2" });
    b.mixer(gqaAttention(c.hidden, a.heads, a.kvHeads, a.headDim, ctx.tp), attn);
    b.mixer(mamba2Mixer(c.hidden, m.dInner, m.groups, m.stateSize, heads, m.convKernel, ctx.tp), c.layers - attn);
    b.attention = gqaShape(a, Array<undefined>(attn).fill(undefined));
    b.linear = linearShape(
      "mamba2",
      c.layers - attn,
      mamba2Mixer(c.hidden, m.dInner, m.groups, m.stateSize, heads, m.convKernel, 1),
      mamba2State(cfg, ctx, m, ctx.dtypeBytes, { heads: "mamba_n_heads", groups: "mamba_n_groups" }, 1),
    );
    const moe = readMoe(cfg, "num_local_experts", "intermediate_size", "shared_intermediate_size");
    if (moe === undefined) {
      // Granite 4.0-H's dense MLP is its "shared" MLP.
      const width = cfg.optInt("shared_intermediate_size") ?? cfg.int("intermediate_size");
      b.ffn(denseMlp(c.hidden, width, ctx.tp), c.layers);
      b.mlp = { layers: c.layers, intermediate_size: width, gated: true };
    } else {
      b.ffn(moeMlp(c.hidden, moe.experts, moe.topK, moe.expertIntermediate, moe.sharedIntermediate, ctx.tp), c.layers);
      b.moe = moeShape(moe, c.layers);
    }
    return b.finish(c, ctx.tp, rotaryDim(cfg, a.headDim));
  },
};

const falconH1: Family = {
  family: "hybrid",
  describe: (cfg, ctx) => {
    const c = common(cfg);
    const a = gqa(cfg, ctx, c.hidden);
    const heads = cfg.int("mamba_n_heads");
    const dInner = cfg.optInt("mamba_d_ssm") ?? cfg.int("mamba_expand") * c.hidden;
    const m = {
      dInner,
      groups: cfg.int("mamba_n_groups"),
      stateSize: cfg.int("mamba_d_state"),
      heads,
      headDim: cfg.int("mamba_d_head"),
      convKernel: cfg.int("mamba_d_conv"),
    };
    const state = mamba2State(cfg, ctx, m, ctx.dtypeBytes, { heads: "mamba_n_heads", groups: "mamba_n_groups" });
    const b = new Builder();
    // Falcon-H1 runs attention and Mamba-2 side by side in every layer: two cache specs per layer.
    for (let i = 0; i < c.layers; i++) {
      b.layers.push({ kind: "attention", bytesPerToken: attentionBytes(a, ctx) });
      b.layers.push({ kind: "state", stateBytes: state, mixer: "mamba2" });
    }
    b.mixer(gqaAttention(c.hidden, a.heads, a.kvHeads, a.headDim, ctx.tp), c.layers);
    b.mixer(mamba2Mixer(c.hidden, m.dInner, m.groups, m.stateSize, heads, m.convKernel, ctx.tp), c.layers);
    b.attention = gqaShape(a, Array<undefined>(c.layers).fill(undefined));
    b.linear = {
      ...linearShape(
        "mamba2",
        c.layers,
        mamba2Mixer(c.hidden, m.dInner, m.groups, m.stateSize, heads, m.convKernel, 1),
        mamba2State(cfg, ctx, m, ctx.dtypeBytes, { heads: "mamba_n_heads", groups: "mamba_n_groups" }, 1),
      ),
      parallel_attention: true,
    };
    const width = cfg.int("intermediate_size");
    b.ffn(denseMlp(c.hidden, width, ctx.tp), c.layers);
    b.mlp = { layers: c.layers, intermediate_size: width, gated: true };
    return b.finish(c, ctx.tp, rotaryDim(cfg, a.headDim));
  },
};

const kimiLinear: Family = {
  family: "hybrid",
  describe: (cfg, ctx) => {
    const c = common(cfg);
    const d = readMla(cfg, ctx);
    const linear = cfg.child("linear_attn_config");
    if (linear === undefined) cfg.refuse("linear_attn_config", "is required to derive a profile for KimiLinearForCausalLM");
    const kda = new Set(linear?.optInts("kda_layers", 1) ?? []);
    if (linear !== undefined && kda.size === 0) linear.refuse("kda_layers", "must list the (1-based) KDA layers");
    const heads = linear?.int("num_heads") ?? Number.NaN;
    const headDim = linear?.int("head_dim") ?? Number.NaN;
    const kernel = linear?.int("short_conv_kernel_size") ?? Number.NaN;
    if (heads % ctx.tp !== 0) linear?.refuse("num_heads", `${heads} KDA heads do not split over ${ctx.tp} TP ranks`);
    // kda_state_shape: conv (kernel - 1, 3 heads head_dim / tp) in the model dtype, and the
    // recurrent state (heads / tp, head_dim, head_dim) in float32 (kda_state_dtype).
    const stateOn = (ranks: number) => (kernel - 1) * ((3 * heads * headDim) / ranks) * ctx.dtypeBytes + (heads / ranks) * headDim * headDim * 4;
    const state = stateOn(ctx.tp);
    const b = new Builder();
    let kdaLayers = 0;
    for (let i = 0; i < c.layers; i++) {
      if (kda.has(i + 1)) {
        kdaLayers++;
        b.layers.push({ kind: "state", stateBytes: state, mixer: "kda" });
      } else b.layers.push({ kind: "attention", bytesPerToken: mlaBytes(d, ctx) });
    }
    b.mixer(mlaAttention(c.hidden, d, ctx.tp), c.layers - kdaLayers);
    b.mixer(kimiDeltaAttention(c.hidden, heads, headDim, kernel, ctx.tp), kdaLayers);
    b.attention = mlaShape(d, c.layers - kdaLayers);
    b.linear = linearShape("kda", kdaLayers, kimiDeltaAttention(c.hidden, heads, headDim, kernel, 1), stateOn(1));
    deepseekFfn(
      cfg,
      b,
      c.hidden,
      c.layers,
      ctx.tp,
      cfg.has("n_routed_experts") ? "n_routed_experts" : "num_experts",
      cfg.has("n_shared_experts") ? "n_shared_experts" : "num_shared_experts",
    );
    return { ...b.finish(c, ctx.tp, d.qkRopeHeadDim), mla: true };
  },
};

/** The architectures kvsim derives profiles for, by the `architectures` name in config.json. */
export const ARCHITECTURES: Readonly<Record<string, Family>> = {
  LlamaForCausalLM: dense("llama"),
  MistralForCausalLM: dense("llama"),
  MixtralForCausalLM: dense("mixtral"),
  Qwen2ForCausalLM: dense("qwen"),
  Qwen3ForCausalLM: dense("qwen"),
  Qwen2MoeForCausalLM: dense("qwen-moe"),
  Qwen3MoeForCausalLM: dense("qwen-moe"),
  DeepseekV2ForCausalLM: deepseek,
  DeepseekV3ForCausalLM: deepseek,
  Gemma2ForCausalLM: gemma(2, false),
  Gemma3ForCausalLM: gemma(3, false),
  Gemma3ForConditionalGeneration: gemma(3, true),
  GptOssForCausalLM: gptOss,
  Qwen3NextForCausalLM: qwen3Next,
  NemotronHForCausalLM: nemotronH,
  JambaForCausalLM: jamba,
  GraniteMoeHybridForCausalLM: graniteHybrid,
  FalconH1ForCausalLM: falconH1,
  KimiLinearForCausalLM: kimiLinear,
};

export const KNOWN_ARCHITECTURES: readonly string[] = Object.keys(ARCHITECTURES);
