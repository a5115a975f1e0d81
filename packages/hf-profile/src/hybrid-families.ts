// Mamba and linear-attention hybrids: Qwen3-Next, Nemotron-H, Jamba, Granite 4, Falcon-H1, Kimi Linear.
import type { ConfigReader } from "./config.js";
import { denseMlp, gatedDeltaNet, gqaAttention, kimiDeltaAttention, mamba1Mixer, mamba2Mixer, mlaAttention, moeMlp } from "./params.js";
import {
  type FamilyContext,
  type Family,
  common,
  gqa,
  attentionBytes,
  gqaShape,
  moeShape,
  linearShape,
  Builder,
  rotaryDim,
  optDtype,
  dtypeBytes,
  readMoe,
} from "./family-parts.js";
import { readMla, mlaShape, mlaBytes, deepseekFfn } from "./mla-families.js";

// ---------------------------------------------------------------------------------------------
// Mamba and linear-attention hybrids

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

export const qwen3Next: Family = {
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

export const nemotronH: Family = {
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

export const jamba: Family = {
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

export const graniteHybrid: Family = {
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

export const falconH1: Family = {
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

export const kimiLinear: Family = {
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
