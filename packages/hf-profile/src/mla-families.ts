// Multi-head latent attention: DeepSeek V2/V3, Kimi K2.
import type { AttentionShape } from "@kvsim/profile-schema";
import type { ConfigReader } from "./config.js";
import { denseMlp, mlaAttention, moeMlp, type MlaDims } from "./params.js";
import { type FamilyContext, type Family, common, moeShape, Builder } from "./family-parts.js";

// ---------------------------------------------------------------------------------------------
// Multi-head latent attention: DeepSeek V2/V3, Kimi K2

export function readMla(cfg: ConfigReader, ctx: FamilyContext): MlaDims {
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
export function mlaShape(d: MlaDims, layers: number): AttentionShape {
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
export const mlaBytes = (d: MlaDims, ctx: FamilyContext) => (d.kvLoraRank + d.qkRopeHeadDim) * ctx.kvBytes;

/** DeepSeek-style MoE layers: the first `first_k_dense_replace` layers (and those off moe_layer_freq) stay dense. */
export function deepseekFfn(cfg: ConfigReader, b: Builder, hidden: number, layers: number, tp: number, expertsKey: string, sharedKey: string): void {
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

export const deepseek: Family = {
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
