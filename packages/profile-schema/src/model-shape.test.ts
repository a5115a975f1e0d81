import { describe, expect, it } from "vitest";
import { ModelShapeSchema, shapePerRank } from "./model-shape.js";
import { zodIssues } from "./document.js";

// Llama-3.1-8B's config.json: hidden 4096, 32 layers, 32 heads, 8 KV heads, head dim 128,
// intermediate 14336, vocabulary 128256.
const llama8b = ModelShapeSchema.parse({
  hidden_size: 4096,
  num_layers: 32,
  vocab_size: 128256,
  weight_bytes: 2,
  attention: { layers: 32, num_heads: 32, num_kv_heads: 8, head_dim: 128 },
  mlp: { layers: 32, intermediate_size: 14336 },
});

describe("shapePerRank: a dense layer", () => {
  it("TP 1: q, k, v, o and a gated MLP per layer", () => {
    const r = shapePerRank(llama8b, { tp: 1, ep: 1 });
    // attention: q 32 x 128 = 4096, k and v 8 x 128 = 1024 each, o 4096 x 4096:
    // 4096 x (4096 + 1024 + 1024) + 4096 x 4096 = 25,165,824 + 16,777,216 = 41,943,040
    // MLP: 3 x 4096 x 14336 = 176,160,768; a layer 218,103,808; 32 layers 6,979,321,856
    expect(r.denseParams).toBe(6_979_321_856);
    // 128256 = 2004 x 64 rows, x 4096
    expect(r.lmHeadParams).toBe(525_336_576);
    // 32 heads x (128 for the scores + 128 for the values)
    expect(r.attentionMacsPerPairPrefill).toBe(8192);
    expect(r.attentionMacsPerPairDecode).toBe(8192);
    expect(r.expertParamsPerLayer).toBe(0);
    expect(r.stateBytesPerSequence).toBe(0);
  });
  it("TP 2 halves every split linear (8 KV heads split into 4 a rank)", () => {
    const r = shapePerRank(llama8b, { tp: 2, ep: 1 });
    // attention: 4096 x (2048 + 512 + 512) + 2048 x 4096 = 12,582,912 + 8,388,608 = 20,971,520
    // MLP 88,080,384; a layer 109,051,904; x 32 = 3,489,660,928
    expect(r.denseParams).toBe(3_489_660_928);
    expect(r.lmHeadParams).toBe(262_668_288);
    expect(r.attentionMacsPerPairPrefill).toBe(4096);
  });
  it("KV heads fewer than ranks are replicated, one a rank", () => {
    const shape = ModelShapeSchema.parse({
      hidden_size: 1024,
      num_layers: 1,
      vocab_size: 64,
      weight_bytes: 2,
      attention: { layers: 1, num_heads: 16, num_kv_heads: 2, head_dim: 64 },
    });
    // TP 8: q 2 heads x 64 = 128, k and v one replicated head x 64 each:
    // 1024 x (128 + 64 + 64) + 128 x 1024 = 262,144 + 131,072 = 393,216
    expect(shapePerRank(shape, { tp: 8, ep: 1 }).denseParams).toBe(393_216);
  });
});

describe("shapePerRank: an MoE layer", () => {
  // Mixtral-8x7B: hidden 4096, 32 layers, 8 experts of width 14336, top 2.
  const mixtral = ModelShapeSchema.parse({
    hidden_size: 4096,
    num_layers: 32,
    vocab_size: 32000,
    weight_bytes: 2,
    attention: { layers: 32, num_heads: 32, num_kv_heads: 8, head_dim: 128 },
    moe: { layers: 32, num_experts: 8, num_experts_per_tok: 2, expert_intermediate_size: 14336 },
  });
  it("TP 2 without expert parallelism: every expert split in two", () => {
    const r = shapePerRank(mixtral, { tp: 2, ep: 1 });
    expect(r.localExperts).toBe(8);
    // 3 x 4096 x 14336 / 2
    expect(r.expertMacsPerPair).toBe(88_080_384);
    expect(r.expertParamsPerLayer).toBe(8 * 88_080_384);
    // attention 20,971,520 (as Llama at TP 2) + the replicated router 4096 x 8 = 32,768, x 32 layers
    expect(r.denseParams).toBe(32 * (20_971_520 + 32_768));
  });
  it("expert parallelism over 2 ranks: half the experts each, whole", () => {
    // Qwen3-30B-A3B: hidden 2048, 128 experts of width 768, top 8, 48 layers; TP 1, DP 2 + EP
    const qwen = ModelShapeSchema.parse({
      hidden_size: 2048,
      num_layers: 48,
      vocab_size: 151936,
      weight_bytes: 2,
      attention: { layers: 48, num_heads: 32, num_kv_heads: 4, head_dim: 128 },
      moe: { layers: 48, num_experts: 128, num_experts_per_tok: 8, expert_intermediate_size: 768 },
    });
    const r = shapePerRank(qwen, { tp: 1, ep: 2 });
    expect(r.localExperts).toBe(64);
    expect(r.expertMacsPerPair).toBe(3 * 2048 * 768);
    expect(r.expertParamsPerLayer).toBe(64 * 4_718_592);
  });
});

describe("shapePerRank: an MLA layer", () => {
  // DeepSeek-V3: hidden 7168, 128 heads, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128; TP 8.
  const ds = ModelShapeSchema.parse({
    hidden_size: 7168,
    num_layers: 1,
    vocab_size: 129280,
    weight_bytes: 1,
    attention: {
      layers: 1,
      num_heads: 128,
      num_kv_heads: 1,
      head_dim: 192,
      mla: { q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128 },
    },
  });
  it("low-rank projections replicated, up-projections split", () => {
    const r = shapePerRank(ds, { tp: 8, ep: 1 });
    // 16 heads a rank, qk 192: q 7168 x 1536 + 1536 x 16 x 192 = 11,010,048 + 4,718,592 = 15,728,640
    // kv_a 7168 x (512 + 64) = 4,128,768; kv_b 512 x 16 x (128 + 128) = 2,097,152; o 16 x 128 x 7168 = 14,680,064
    expect(r.denseParams).toBe(15_728_640 + 4_128_768 + 2_097_152 + 14_680_064);
    // prefill: 16 x (192 + 128); decode in the latent: 16 x (512 + 64 + 512)
    expect(r.attentionMacsPerPairPrefill).toBe(5120);
    expect(r.attentionMacsPerPairDecode).toBe(17_408);
  });
});

describe("ModelShapeSchema", () => {
  it("refuses layers that do not add up, naming the field", () => {
    const r = ModelShapeSchema.safeParse({
      hidden_size: 8,
      num_layers: 3,
      vocab_size: 8,
      weight_bytes: 2,
      attention: { layers: 2, num_heads: 1, num_kv_heads: 1, head_dim: 8 },
    });
    expect(r.success).toBe(false);
    if (!r.success) {
      expect(zodIssues(r.error)).toEqual([
        { path: "num_layers", message: "is 3, but attention.layers + linear_mixer.layers is 2: every decoder layer has one mixer" },
      ]);
    }
  });
  it("needs a window for sliding layers and unknown keys are errors", () => {
    const r = ModelShapeSchema.safeParse({
      hidden_size: 8,
      num_layers: 2,
      vocab_size: 8,
      weight_bytes: 2,
      attention: { layers: 2, num_heads: 1, num_kv_heads: 1, head_dim: 8, sliding_layers: 1 },
      extra: 1,
    });
    expect(r.success).toBe(false);
    if (!r.success) {
      const paths = zodIssues(r.error).map((i) => i.path);
      expect(paths).toContain("attention.sliding_window");
      expect(paths).toContain("extra");
    }
  });
});

describe("ModelShapeSchema: hybrid layers", () => {
  // A Falcon-H1-like layer: attention (8 heads of 64, 2 KV heads) and a Mamba-2 mixer side by side.
  const falcon = {
    hidden_size: 1024,
    num_layers: 4,
    vocab_size: 64,
    weight_bytes: 2,
    attention: { layers: 4, num_heads: 8, num_kv_heads: 2, head_dim: 64 },
    linear_mixer: { layers: 4, kind: "mamba2", params_per_layer: 1000, state_bytes_per_layer: 400, parallel_attention: true },
  };
  it("a parallel mixer counts once per layer, and both mixers' weights are read", () => {
    const shape = ModelShapeSchema.parse(falcon);
    // attention: 1024 x (512 + 128 + 128) + 512 x 1024 = 786,432 + 524,288 = 1,310,720 a layer;
    // plus the mixer's 1,000: 4 x 1,311,720 = 5,246,880
    expect(shapePerRank(shape, { tp: 1, ep: 1 }).denseParams).toBe(5_246_880);
    expect(shapePerRank(shape, { tp: 1, ep: 1 }).stateBytesPerSequence).toBe(1600);
  });
  it("refuses a parallel mixer in layers without attention, and the sum rule without the flag", () => {
    const r = ModelShapeSchema.safeParse({ ...falcon, attention: { ...falcon.attention, layers: 3 } });
    expect(r.success).toBe(false);
    if (!r.success) {
      expect(zodIssues(r.error)).toEqual([
        { path: "linear_mixer.layers", message: "is 4, but a parallel mixer runs beside attention and attention.layers is 3" },
        { path: "num_layers", message: "is 4, but attention.layers is 3: with a parallel mixer every decoder layer has attention" },
      ]);
    }
    const sum = ModelShapeSchema.safeParse({ ...falcon, linear_mixer: { ...falcon.linear_mixer, parallel_attention: false } });
    expect(sum.success).toBe(false);
  });
  it("an attention output gate doubles the query projection only", () => {
    const shape = ModelShapeSchema.parse({
      hidden_size: 8,
      num_layers: 1,
      vocab_size: 64,
      weight_bytes: 2,
      attention: { layers: 1, num_heads: 2, num_kv_heads: 1, head_dim: 4, output_gate: true },
    });
    // q and gate 2 x 8 = 16, k and v 4 each, o 8 x 8: 8 x (16 + 4 + 4) + 64 = 256
    const r = shapePerRank(shape, { tp: 1, ep: 1 });
    expect(r.denseParams).toBe(256);
    // 2 heads x (4 + 4): the gate adds no score or value work
    expect(r.attentionMacsPerPairPrefill).toBe(16);
  });
  it("an ungated MLP has two projections (Nemotron-H's squared ReLU)", () => {
    const shape = ModelShapeSchema.parse({
      hidden_size: 8,
      num_layers: 1,
      vocab_size: 64,
      weight_bytes: 2,
      attention: { layers: 1, num_heads: 1, num_kv_heads: 1, head_dim: 8 },
      mlp: { layers: 1, intermediate_size: 32, gated: false },
    });
    // attention 8 x (8 + 8 + 8) + 8 x 8 = 256; MLP 2 x 8 x 32 = 512
    expect(shapePerRank(shape, { tp: 1, ep: 1 }).denseParams).toBe(768);
  });
});
