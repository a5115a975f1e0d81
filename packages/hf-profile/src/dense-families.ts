// The families of grouped-query attention: dense (Llama, Mistral, Qwen2/3 and their MoE variants)
// and the sliding-window hybrids (Gemma 2/3, gpt-oss).
import type { ConfigReader } from "./config.js";
import { denseMlp, gqaAttention, moeMlp } from "./params.js";
import { type Family, common, gqa, attentionBytes, gqaShape, moeShape, Builder, rotaryDim, readMoe } from "./family-parts.js";

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

export function dense(kind: "llama" | "qwen" | "qwen-moe" | "mixtral"): Family {
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

export function gemma(version: 2 | 3, textConfig: boolean): Family {
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

export const gptOss: Family = {
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
