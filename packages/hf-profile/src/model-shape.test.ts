import { shapePerRank, type ModelShape } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { profileFromHfConfig, type HfProfileOptions } from "./derive.js";
import * as configs from "./test-configs.js";
import {
  deepseekV3,
  falconH1,
  gemma3_12b,
  gptOss20b,
  jamba,
  kimiLinear,
  llama8b,
  mistralWindowed,
  mixtral8x7b,
  nemotronH,
  qwen15MoeA27b,
  qwen3Next,
} from "./test-configs.js";

const derive = (config: unknown, options: Partial<HfProfileOptions> = {}) =>
  profileFromHfConfig(config, { tensorParallelSize: 1, file: "config.json", ...options });
const shapeOf = (config: unknown, options: Partial<HfProfileOptions> = {}): ModelShape => {
  const s = derive(config, options).profile.model_shape;
  if (s === undefined) throw new Error("expected a model_shape");
  return s;
};
const withoutProvenance = (s: ModelShape) => ({ ...s, provenance: undefined });

const attention = (layers: number, heads: number, kvHeads: number, headDim: number) => ({
  layers,
  num_heads: heads,
  num_kv_heads: kvHeads,
  head_dim: headDim,
  sliding_layers: 0,
  output_gate: false,
});
const base = { tie_word_embeddings: false, weight_bytes: 2, fp8_compute: false, provenance: undefined };

describe("model_shape: the whole model as config.json states it", () => {
  it("Llama-3.1-8B: 32 layers of GQA attention and a gated MLP, named with its fields", () => {
    expect(shapeOf(llama8b)).toEqual({
      hidden_size: 4096,
      num_layers: 32,
      vocab_size: 128256,
      tie_word_embeddings: false,
      weight_bytes: 2,
      fp8_compute: false,
      // 4096 / 32 heads = head dim 128
      attention: { layers: 32, num_heads: 32, num_kv_heads: 8, head_dim: 128, sliding_layers: 0, output_gate: false },
      mlp: { layers: 32, intermediate_size: 14336, gated: true },
      provenance:
        "kvsim profile from-hf: the whole model's shape from a LlamaForCausalLM config.json (torch_dtype, hidden_size, num_hidden_layers, vocab_size, num_attention_heads, num_key_value_heads, intermediate_size)",
    });
  });

  it("Mixtral-8x7B: 8 experts of width intermediate_size, top 2, in every layer", () => {
    expect(withoutProvenance(shapeOf(mixtral8x7b))).toEqual({
      ...base,
      hidden_size: 4096,
      num_layers: 32,
      vocab_size: 32000,
      attention: attention(32, 32, 8, 128),
      moe: { layers: 32, num_experts: 8, num_experts_per_tok: 2, expert_intermediate_size: 14336, shared_expert_intermediate_size: 0 },
    });
  });

  it("Qwen1.5-MoE-A2.7B: the shared expert's width from shared_expert_intermediate_size", () => {
    expect(shapeOf(qwen15MoeA27b).moe).toEqual({
      layers: 24,
      num_experts: 60,
      num_experts_per_tok: 4,
      expert_intermediate_size: 1408,
      shared_expert_intermediate_size: 5632,
    });
    expect(shapeOf(qwen15MoeA27b).mlp).toBeUndefined();
  });

  it("DeepSeek-V3 (FP8): MLA ranks, 3 dense layers then 58 MoE layers, one shared expert, 1-byte FP8 weights", () => {
    const s = shapeOf(deepseekV3);
    expect(withoutProvenance(s)).toEqual({
      ...base,
      hidden_size: 7168,
      num_layers: 61,
      vocab_size: 129280,
      weight_bytes: 1,
      fp8_compute: true,
      // head_dim is the query/key head: qk_nope 128 + qk_rope 64 = 192; values 128
      attention: {
        layers: 61,
        num_heads: 128,
        num_kv_heads: 1,
        head_dim: 192,
        v_head_dim: 128,
        sliding_layers: 0,
        output_gate: false,
        mla: { q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128 },
      },
      // first_k_dense_replace 3: layers 0-2 dense; 61 - 3 = 58 MoE; shared 1 x moe_intermediate_size 2048
      mlp: { layers: 3, intermediate_size: 18432, gated: true },
      moe: { layers: 58, num_experts: 256, num_experts_per_tok: 8, expert_intermediate_size: 2048, shared_expert_intermediate_size: 2048 },
    });
    expect(s.provenance).toContain("DeepseekV3ForCausalLM config.json (");
    expect(s.provenance).toContain("first_k_dense_replace");
    expect(s.provenance).toContain("quantization_config.quant_method");
    expect(s.provenance).not.toContain("max_position_embeddings");
  });

  it("is the whole model's at any TP size", () => {
    expect(shapeOf(deepseekV3, { tensorParallelSize: 8 })).toEqual(shapeOf(deepseekV3));
    expect(shapeOf(jamba, { tensorParallelSize: 4 })).toEqual(shapeOf(jamba));
  });

  it("sliding windows: Gemma-3's 40 local of 48 layers, gpt-oss's alternation, Mistral's every layer", () => {
    // Gemma 3: layer i is global when (i + 1) % 6 == 0: 8 global, 40 local; tied embeddings by default
    const g = shapeOf(gemma3_12b);
    expect(g.attention).toEqual({ ...attention(48, 16, 8, 256), sliding_window: 1024, sliding_layers: 40 });
    expect(g.tie_word_embeddings).toBe(true);
    expect(g.provenance).toContain("text_config.sliding_window_pattern");
    expect(shapeOf(gptOss20b).attention).toEqual({ ...attention(24, 64, 8, 64), sliding_window: 128, sliding_layers: 12 });
    expect(shapeOf(mistralWindowed).attention).toEqual({ ...attention(32, 32, 8, 128), sliding_window: 4096, sliding_layers: 32 });
  });

  it("Jamba: Mamba-1 mixers with their projections and state, MoE every other layer", () => {
    expect(withoutProvenance(shapeOf(jamba))).toEqual({
      ...base,
      hidden_size: 4096,
      num_layers: 32,
      vocab_size: 65536,
      // i % 8 == 4: layers 4, 12, 20, 28
      attention: attention(4, 32, 8, 128),
      // d_inner = 2 x 4096 = 8192; in_proj 4096 x 2 x 8192 = 67,108,864; x_proj 8192 x (256 + 2 x 16)
      // = 2,359,296; dt_proj 256 x 8192 = 2,097,152; out_proj 8192 x 4096 = 33,554,432: 105,119,744.
      // State: conv 3 x 8192 x 2 B = 49,152 + SSM 8192 x 16 x 2 B = 262,144: 311,296.
      linear_mixer: { layers: 28, kind: "mamba", params_per_layer: 105_119_744, state_bytes_per_layer: 311_296, parallel_attention: false },
      // i % 2 == 1: 16 MoE layers, 16 dense
      mlp: { layers: 16, intermediate_size: 14336, gated: true },
      moe: { layers: 16, num_experts: 16, num_experts_per_tok: 2, expert_intermediate_size: 14336, shared_expert_intermediate_size: 0 },
    });
  });

  it("Falcon-H1: attention and Mamba-2 side by side in each of its 4 layers", () => {
    expect(withoutProvenance(shapeOf(falconH1))).toEqual({
      ...base,
      hidden_size: 1024,
      num_layers: 4,
      vocab_size: 65536,
      attention: attention(4, 8, 2, 64),
      // in_proj 1024 x (2 x 1536 + 2 x 1 x 128 + 24) = 1024 x 3,352 = 3,432,448; out_proj 1536 x 1024
      // = 1,572,864: 5,005,312. State: conv 3 x (1536 + 256) x 2 = 10,752 + SSM 24 x 64 x 128 x 2 = 393,216.
      linear_mixer: { layers: 4, kind: "mamba2", params_per_layer: 5_005_312, state_bytes_per_layer: 403_968, parallel_attention: true },
      mlp: { layers: 4, intermediate_size: 4096, gated: true },
    });
  });

  it("Nemotron-H: mixer blocks as layers, a squared-ReLU MLP, the SSM state in float32", () => {
    const r = derive(nemotronH);
    const s = r.profile.model_shape;
    // 24 M + 4 * = 28 mixer blocks; 24 - blocks are its MLPs (up and down only)
    expect(s?.num_layers).toBe(28);
    expect(s?.attention).toEqual(attention(4, 32, 8, 128));
    expect(s?.mlp).toEqual({ layers: 24, intermediate_size: 21504, gated: false });
    // in_proj 4096 x (2 x 8192 + 2 x 8 x 128 + 128) = 76,021,760 + out_proj 8192 x 4096 = 33,554,432;
    // state: conv 3 x 10,240 x 2 = 61,440 + SSM 128 x 64 x 128 x 4 = 4,194,304
    expect(s?.linear_mixer).toEqual({ layers: 24, kind: "mamba2", params_per_layer: 109_576_192, state_bytes_per_layer: 4_255_744, parallel_attention: false });
    expect(r.notes).toContain("model shape: Nemotron-H's 52 config layers are 28 mixer blocks and 24 MLP blocks; num_layers counts the mixer blocks");
  });

  it("Qwen3-Next and Kimi Linear: Gated DeltaNet and KDA mixers", () => {
    const q = shapeOf(qwen3Next);
    expect(q.attention).toEqual({ ...attention(12, 16, 2, 256), output_gate: true });
    // key 16 x 128 = 2048, value 32 x 128 = 4096: in_proj 2048 x (2 x 2048 + 2 x 4096 + 2 x 32) = 25,296,896,
    // out_proj 4096 x 2048 = 8,388,608. State: conv 3 x 8,192 x 2 = 49,152 + 32 x 128 x 128 x 2 = 1,048,576.
    expect(q.linear_mixer).toEqual({
      layers: 36,
      kind: "gated_delta_net",
      params_per_layer: 33_685_504,
      state_bytes_per_layer: 1_097_728,
      parallel_attention: false,
    });
    expect(q.moe).toEqual({ layers: 48, num_experts: 512, num_experts_per_tok: 10, expert_intermediate_size: 512, shared_expert_intermediate_size: 512 });
    const k = shapeOf(kimiLinear);
    expect(k.attention?.layers).toBe(7);
    expect(k.attention?.mla).toEqual({ kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128 });
    // q, k, v, g 4 x 2304 x 4096 = 37,748,736; f and g low-rank 2 x (2304 x 128 + 128 x 4096) = 1,638,400;
    // beta 2304 x 32 = 73,728. State: conv 3 x 12,288 x 2 = 73,728 + 32 x 128 x 128 x 4 = 2,097,152.
    expect(k.linear_mixer).toEqual({ layers: 20, kind: "kda", params_per_layer: 39_460_864, state_bytes_per_layer: 2_170_880, parallel_attention: false });
  });
});

describe("model_shape: weight bytes", () => {
  it("MXFP4 experts take 4.25 bits, the rest the model dtype", () => {
    const s = shapeOf(gptOss20b);
    expect([s.weight_bytes, s.expert_weight_bytes, s.fp8_compute]).toEqual([2, 0.53125, false]);
  });
  it("a float32 config is served in 16 bits", () => {
    expect(shapeOf({ ...llama8b, torch_dtype: "float32" }).weight_bytes).toBe(2);
  });
  it("an unmodelled quantization keeps the model dtype and says the roofline prices it unquantized", () => {
    const r = derive({ ...llama8b, quantization_config: { quant_method: "awq", bits: 4 } });
    expect(r.profile.model_shape?.weight_bytes).toBe(2);
    expect(r.profile.model_shape?.expert_weight_bytes).toBeUndefined();
    expect(r.notes).toContain(
      'model shape: quantization "awq" is not modelled; weight_bytes is the model dtype\'s 2, so a roofline prices the weights as unquantized',
    );
  });
});

describe("model_shape agrees with the per-rank parameter count", () => {
  // shapePerRank's weights (dense linears, routers, routed experts, LM head, and the embedding the
  // same size unless tied) against the derivation's own count, which also has norms, biases, the
  // Mamba convolutions and A/D vectors: those are under 0.1% of each test model. Kimi Linear's KDA
  // replicates its low-rank gate factors (2 x hidden x head_dim a layer) on every rank, which the
  // shape's split-over-TP mixer cannot say: that term is added back before comparing.
  const TOLERANCE = 0.001;
  for (const [name, config] of Object.entries(configs)) {
    for (const tp of [1, 2, 4]) {
      it(`${name} at TP ${tp}`, () => {
        const r = derive(config, { tensorParallelSize: tp });
        const s = r.profile.model_shape!;
        const p = shapePerRank(s, { tp, ep: 1 });
        let total = p.denseParams + p.expertParamsPerLayer * (s.moe?.layers ?? 0) + p.lmHeadParams * (s.tie_word_embeddings ? 1 : 2);
        if (s.linear_mixer?.kind === "kda") total += s.linear_mixer.layers * 2 * s.hidden_size * 128 * (1 - 1 / tp);
        expect(Math.abs(total - r.parametersPerRank) / r.parametersPerRank).toBeLessThan(TOLERANCE);
        // and from below: what the shape leaves out is small, never extra weights
        expect(total).toBeLessThanOrEqual(r.parametersPerRank);
      });
    }
  }
});
