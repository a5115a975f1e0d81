// What every model family builds on: the family interface, the readers of shared config fields
// (attention heads, MoE, dtypes) and the builder of weight parts and widths.
import type { AttentionShape, ModelShape } from "@kvsim/profile-schema";
import { shortJson, type ConfigReader } from "./config.js";
import type { LayerCache } from "./layout.js";
import { addParts, emptyParts, kvHeadsPerRank, type Block, type WeightParts } from "./params.js";

/** What a family needs besides the config. */
export interface FamilyContext {
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

export function common(cfg: ConfigReader, tieDefault = false): Common {
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
export function gqa(cfg: ConfigReader, ctx: FamilyContext, hidden: number, headDimDefault?: number): Gqa {
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
export const attentionBytes = (a: Gqa, ctx: FamilyContext) => 2 * kvHeadsPerRank(a.kvHeads, ctx.tp) * a.headDim * ctx.kvBytes;

/** The attention part of the shape: `windows` has one entry per attention layer (undefined: full attention). */
export function gqaShape(a: Gqa, windows: readonly (number | undefined)[]): AttentionShape {
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

export interface Moe {
  readonly experts: number;
  readonly topK: number;
  readonly expertIntermediate: number;
  readonly sharedIntermediate: number;
}

export const moeShape = (m: Moe, layers: number): NonNullable<ModelShape["moe"]> => ({
  layers,
  num_experts: m.experts,
  num_experts_per_tok: m.topK,
  expert_intermediate_size: m.expertIntermediate,
  shared_expert_intermediate_size: m.sharedIntermediate,
});

export function readMoe(cfg: ConfigReader, expertsKey: string, intermediateKey: string, sharedKey?: string): Moe | undefined {
  const experts = cfg.optInt(expertsKey, 0) ?? 0;
  if (experts <= 1) return undefined;
  return {
    experts,
    topK: cfg.int("num_experts_per_tok"),
    expertIntermediate: cfg.int(intermediateKey),
    sharedIntermediate: sharedKey === undefined ? 0 : (cfg.optInt(sharedKey, 0) ?? 0),
  };
}

/**
 * A linear mixer's part of the shape, whole model: its block's linear projections and its state
 * evaluated at TP 1 by the same formulas the per-rank parameters and the cache layout use.
 */
export const linearShape = (kind: LinearMixerShape["kind"], layers: number, block: Block, stateBytes: number): LinearMixerShape => ({
  layers,
  kind,
  params_per_layer: block.parts.linear ?? 0,
  state_bytes_per_layer: stateBytes,
  parallel_attention: false,
});

/** Accumulates blocks into parts and the widest widths. */
export class Builder {
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

export const rotaryDim = (cfg: ConfigReader, headDim: number) => Math.round(headDim * (cfg.optPositive("partial_rotary_factor") ?? 1));

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
