import { describe, expect, it } from "vitest";
import { fc, test } from "@fast-check/vitest";
import { engineSettings, ModelShapeSchema, validateProfile, type ModelShape, type Profile } from "@kvsim/profile-schema";
import { rooflineBreakdown, rooflineRank, RooflineTiming, type RooflineGpu, type RooflineLoad, type RooflineParams } from "./roofline.js";
import { newBatch } from "./step-rows.js";

// A small round GPU so the figures below divide by hand: 0.1 TFLOPS = 10^8 FLOPs per ms, 1 GB/s =
// 10^6 bytes per ms, a 0.1 GB/s link (10^5 bytes per ms) with 5 µs latency.
const GPU: RooflineGpu = { name: "test", bf16Tflops: 0.1, fp8Tflops: 0.2, hbmGBps: 1, link: { GBps: 0.1, latencyUs: 5 } };
// Every efficiency 1 and no overheads: the bare roofline.
const BARE: RooflineParams = {
  compute_efficiency: 1,
  attention_efficiency: 1,
  memory_efficiency: 1,
  moe_efficiency: 1,
  link_efficiency: 1,
  pcie_collective_gbps: 1000,
  step_overhead_ms: 0,
  layer_overhead_us: 0,
  per_sequence_us: 0,
};

function profileOf(shape: unknown, kvBytesPerToken: number, tp = 1): Profile {
  return validateProfile(
    { schema_version: 1, model: "test", vllm_version: "0.19.0", tensor_parallel_size: tp, kv_bytes_per_token: kvBytesPerToken, model_shape: shape },
    "test",
  );
}

// One dense layer: hidden 1024, 8 heads of 128 (no GQA), MLP 4096, vocabulary 6400 (100 x 64).
const denseShape = {
  hidden_size: 1024,
  num_layers: 1,
  vocab_size: 6400,
  weight_bytes: 2,
  attention: { layers: 1, num_heads: 8, num_kv_heads: 8, head_dim: 128 },
  mlp: { layers: 1, intermediate_size: 4096 },
};
// K and V: 2 x 8 heads x 128 x 2 bytes = 4,096 bytes per token.
const dense = rooflineRank(profileOf(denseShape, 4096), engineSettings({}));

const load = (l: Partial<RooflineLoad>): RooflineLoad => ({
  tokens: 0,
  sampled: 0,
  promptRows: 0,
  promptTokens: 0,
  promptContextTokens: 0,
  promptPairs: 0,
  decodeRows: 0,
  decodeKvTokens: 0,
  ...l,
});

describe("roofline: a dense layer", () => {
  // Weights: attention 1024 x (1024 + 1024 + 1024) + 1024 x 1024 = 4,194,304; MLP 3 x 1024 x 4096 =
  // 12,582,912; 16,777,216 in all, 33,554,432 bytes. LM head 6400 x 1024 = 6,553,600, 13,107,200 bytes.
  it("one decode row is memory-bound: weights, KV and the LM head read once", () => {
    const b = rooflineBreakdown(dense, GPU, BARE, load({ tokens: 1, sampled: 1, decodeRows: 1, decodeKvTokens: 1000 }));
    // 33,554,432 B / 10^6 B/ms (the compute, 2 x 16,777,216 / 10^8 = 0.3355 ms, is lower)
    expect(b.dense).toBeCloseTo(33.554432, 9);
    // 1,000 KV tokens x 4,096 B = 4,096,000 B; compute 2 x 8 x 256 x 1,000 / 10^8 = 0.04096 ms
    expect(b.attentionDecode).toBeCloseTo(4.096, 9);
    expect(b.lmHead).toBeCloseTo(13.1072, 9);
    expect(b.communication).toBe(0);
    expect(b.total).toBeCloseTo(33.554432 + 4.096 + 13.1072, 9);
  });
  it("a 1,000-token prompt is compute-bound, its attention causal", () => {
    const pairs = (1000 * 1001) / 2;
    const b = rooflineBreakdown(dense, GPU, BARE, load({ tokens: 1000, sampled: 1, promptRows: 1, promptTokens: 1000, promptPairs: pairs }));
    // 2 x 16,777,216 x 1,000 / 10^8 = 335.54432 ms (above the 33.55 ms of weights)
    expect(b.dense).toBeCloseTo(335.54432, 9);
    // 2 x 2,048 MACs per pair x 500,500 pairs / 10^8 = 20.50048 ms (the 1,000 tokens' KV: 4.096 ms)
    expect(b.attentionPrefill).toBeCloseTo(20.50048, 9);
    expect(b.total).toBeCloseTo(335.54432 + 20.50048 + 13.1072, 9);
  });
  it("efficiencies divide their terms and overheads add", () => {
    const p: RooflineParams = { ...BARE, compute_efficiency: 0.5, memory_efficiency: 0.8, step_overhead_ms: 2, per_sequence_us: 10, layer_overhead_us: 100 };
    const decode = rooflineBreakdown(dense, GPU, p, load({ tokens: 1, sampled: 1, decodeRows: 1, decodeKvTokens: 1000 }));
    // memory terms / 0.8: 33.554432 / 0.8 = 41.94304; 4.096 / 0.8 = 5.12; 13.1072 / 0.8 = 16.384
    expect(decode.dense).toBeCloseTo(41.94304, 9);
    expect(decode.attentionDecode).toBeCloseTo(5.12, 9);
    // 2 ms + 10 µs x 1 row; no layer overhead without prompt rows
    expect(decode.overhead).toBeCloseTo(2.01, 12);
    const prompt = rooflineBreakdown(dense, GPU, p, load({ tokens: 1000, sampled: 0, promptRows: 1, promptTokens: 1000, promptPairs: 500_500 }));
    expect(prompt.dense).toBeCloseTo(671.08864, 9);
    // 2 ms + 10 µs + 100 µs x 1 layer
    expect(prompt.overhead).toBeCloseTo(2.11, 12);
    expect(prompt.lmHead).toBe(0);
  });
  it("pads a step's tokens up to the next CUDA graph size", () => {
    // 9 decode rows run as 16: compute 2 x 16,777,216 x 16 / 10^8 = 5.36870912 ms, below the weights
    // read, so use a slower GPU where compute binds: 0.001 TFLOPS = 10^6 FLOPs per ms.
    const slow: RooflineGpu = { ...GPU, bf16Tflops: 0.001 };
    const b = rooflineBreakdown(dense, slow, BARE, load({ tokens: 9, sampled: 9, decodeRows: 9, decodeKvTokens: 9 }));
    expect(b.dense).toBeCloseTo((2 * 16_777_216 * 16) / 1e6, 9);
  });
});

describe("roofline: an MoE layer", () => {
  // hidden 1024, 8 experts of width 1024, top 2: an expert is 3 x 1024 x 1024 = 3,145,728 weights.
  const moe = rooflineRank(
    profileOf(
      {
        hidden_size: 1024,
        num_layers: 1,
        vocab_size: 64,
        weight_bytes: 2,
        attention: { layers: 1, num_heads: 8, num_kv_heads: 8, head_dim: 128 },
        moe: { layers: 1, num_experts: 8, num_experts_per_tok: 2, expert_intermediate_size: 1024 },
      },
      4096,
    ),
    engineSettings({}),
  );
  it("reads the experts the step's tokens touch", () => {
    // 1 token touches 2 of 8: share 1 - (6/8)^1 = 0.25 of 25,165,824 weights x 2 B = 12,582,912 B
    const one = rooflineBreakdown(moe, GPU, BARE, load({ tokens: 1, sampled: 1, decodeRows: 1, decodeKvTokens: 1 }));
    expect(one.experts).toBeCloseTo(12.582912, 9);
    // 4 tokens: 1 - 0.75^4 = 0.68359375 of 50,331,648 B = 34,406,400 B
    const four = rooflineBreakdown(moe, GPU, BARE, load({ tokens: 4, sampled: 4, decodeRows: 4, decodeKvTokens: 4 }));
    expect(four.experts).toBeCloseTo(34.4064, 9);
    // moe_efficiency 0.5 doubles it
    const slow = rooflineBreakdown(moe, GPU, { ...BARE, moe_efficiency: 0.5 }, load({ tokens: 1, sampled: 1, decodeRows: 1, decodeKvTokens: 1 }));
    expect(slow.experts).toBeCloseTo(25.165824, 9);
  });
  it("computes top-k experts per token once every expert is read", () => {
    // 2,048 tokens: FLOPs 2 x 2,048 x 2 pairs x 3,145,728 = 25,769,803,776 -> 257.69803776 ms at
    // 10^8 per ms, above the 50.33 ms of reading all 8 experts.
    const b = rooflineBreakdown(moe, GPU, BARE, load({ tokens: 2048, sampled: 0, promptRows: 1, promptTokens: 2048, promptPairs: (2048 * 2049) / 2 }));
    expect(b.experts).toBeCloseTo(257.69803776, 6);
  });
});

describe("roofline: an MLA layer", () => {
  // hidden 1024, 8 heads, kv_lora 256, rope 32, nope 64, v 64; the cache holds 256 + 32 elements
  // a token: 576 bytes in bf16.
  const mla = rooflineRank(
    profileOf(
      {
        hidden_size: 1024,
        num_layers: 1,
        vocab_size: 64,
        weight_bytes: 2,
        attention: {
          layers: 1,
          num_heads: 8,
          num_kv_heads: 1,
          head_dim: 96,
          mla: { kv_lora_rank: 256, qk_nope_head_dim: 64, qk_rope_head_dim: 32, v_head_dim: 64 },
        },
      },
      576,
    ),
    engineSettings({}),
  );
  it("decode attends in the latent space, prefill in the heads' dims", () => {
    const slow: RooflineGpu = { ...GPU, bf16Tflops: 0.001 }; // 10^6 FLOPs per ms
    // decode: 8 x (256 + 32 + 256) = 4,352 MACs a pair; 1,000 pairs: 8,704,000 FLOPs = 8.704 ms
    // (the KV read, 576,000 B, takes 0.576 ms)
    const d = rooflineBreakdown(mla, slow, BARE, load({ tokens: 1, sampled: 1, decodeRows: 1, decodeKvTokens: 1000 }));
    expect(d.attentionDecode).toBeCloseTo(8.704, 9);
    // prefill: 8 x (96 + 64) = 1,280 MACs a pair; 500,500 pairs: 1,281,280,000 FLOPs = 1,281.28 ms
    const p = rooflineBreakdown(mla, slow, BARE, load({ tokens: 1000, sampled: 0, promptRows: 1, promptTokens: 1000, promptPairs: 500_500 }));
    expect(p.attentionPrefill).toBeCloseTo(1281.28, 6);
  });
});

describe("roofline: one all-reduce", () => {
  it("TP 2: two all-reduces a layer, latency plus 2 (tp - 1) / tp of the hidden states over the link", () => {
    const tp2 = rooflineRank(profileOf(denseShape, 2048, 2), engineSettings({}));
    // 16 tokens x 1,024 x 2 B = 32,768 B; ring factor 2 x 1 / 2 = 1; over 10^5 B/ms = 0.32768 ms,
    // + 5 µs latency; two a layer, one layer
    const b = rooflineBreakdown(tp2, GPU, BARE, load({ tokens: 16, sampled: 16, decodeRows: 16, decodeKvTokens: 16 }));
    expect(b.communication).toBeCloseTo(2 * (0.005 + (16 * 2048) / 1e5), 12);
  });
});

describe("roofline: collectives over PCIe", () => {
  // The same link as GPU's, over PCIe; NCCL's PCIe collectives capped at 0.05 GB/s = 5 x 10^4 B/ms.
  const PCIE: RooflineGpu = { ...GPU, link: { kind: "pcie", GBps: 0.1, latencyUs: 5 } };
  const capped = { ...BARE, pcie_collective_gbps: 0.05 };
  const tp2 = rooflineRank(profileOf(denseShape, 2048, 2), engineSettings({}));
  const decode16 = load({ tokens: 16, sampled: 16, decodeRows: 16, decodeKvTokens: 16 });

  it("a TP all-reduce over PCIe moves at most pcie_collective_gbps", () => {
    // 32,768 B (16 tokens x 1,024 x 2 B, ring factor 1) over 5 x 10^4 B/ms = 0.65536 ms, + 5 µs; two a layer
    expect(rooflineBreakdown(tp2, PCIE, capped, decode16).communication).toBeCloseTo(2 * (0.005 + 0.65536), 12);
  });

  it("the cap binds only below link x link_efficiency, and never on NVLink", () => {
    // 0.1 GB/s x 0.4 = 0.04 GB/s is below the cap of 0.05: 32,768 B over 4 x 10^4 B/ms = 0.8192 ms
    expect(rooflineBreakdown(tp2, PCIE, { ...capped, link_efficiency: 0.4 }, decode16).communication).toBeCloseTo(2 * (0.005 + 0.8192), 12);
    // NVLink (or a link of no kind): the full 10^5 B/ms, 0.32768 ms
    const nvlink: RooflineGpu = { ...GPU, link: { kind: "nvlink", GBps: 0.1, latencyUs: 5 } };
    expect(rooflineBreakdown(tp2, nvlink, capped, decode16).communication).toBeCloseTo(2 * (0.005 + 0.32768), 12);
    expect(rooflineBreakdown(tp2, GPU, capped, decode16).communication).toBeCloseTo(2 * (0.005 + 0.32768), 12);
  });

  it("expert parallelism over PCIe: every MoE layer gathers every rank's tokens and scatters them back", () => {
    const moeShape = { ...denseShape, mlp: undefined, moe: { layers: 1, num_experts: 64, num_experts_per_tok: 4, expert_intermediate_size: 512 } };
    const ep2 = rooflineRank(profileOf(moeShape, 2048), engineSettings({ data_parallel_size: 2, enable_expert_parallel: true }));
    // EP 2 (DP 2 x TP 1): the exchange carries 16 tokens x 2 ranks x 1,024 x 2 B = 65,536 B, of which
    // (EP - 1) / EP = 1/2 crosses the link: 32,768 B over 5 x 10^4 B/ms = 0.65536 ms, + 5 µs; a
    // gather and a scatter per MoE layer; no TP all-reduce
    expect(rooflineBreakdown(ep2, PCIE, capped, decode16).communication).toBeCloseTo(2 * (0.005 + 0.65536), 12);
  });
});

describe("RooflineTiming", () => {
  const timing = new RooflineTiming(dense, GPU, { ...BARE, step_overhead_ms: 1, per_sequence_us: 7 });
  it("prices a decode-only step exactly as its fast path", () => {
    const batch = newBatch();
    batch.decode.count = 3;
    batch.decode.sumSequenceTokens = 300;
    batch.decodeRows = 3;
    batch.decodeKvTokens = 303;
    const s = timing.step(batch);
    expect(s.prefillMs).toBe(0);
    expect(s.decodeMs).toBe(timing.decodeOnlyMs(3, 303));
  });

  // Never cheaper with one more token or one more row.
  test.prop(
    [
      fc.record({
        prompts: fc.array(fc.record({ n: fc.integer({ min: 1, max: 4096 }), context: fc.integer({ min: 0, max: 30000 }) }), { maxLength: 6 }),
        decodes: fc.array(fc.integer({ min: 1, max: 30000 }), { maxLength: 300 }),
        grow: fc.nat(),
        moeLayers: fc.integer({ min: 0, max: 1 }),
        tp: fc.constantFrom(1, 2, 4),
        ep: fc.boolean(),
        pcie: fc.boolean(),
      }),
    ],
    { seed: 20261206, numRuns: 300 },
  )("step time never falls when a step gains a token or a row", ({ prompts, decodes, grow, moeLayers, tp, ep, pcie }) => {
    const shape: ModelShape = ModelShapeSchema.parse({
      ...denseShape,
      num_layers: 1,
      mlp: moeLayers === 1 ? undefined : denseShape.mlp,
      moe: moeLayers === 1 ? { layers: 1, num_experts: 64, num_experts_per_tok: 4, expert_intermediate_size: 512 } : undefined,
    });
    const engine = engineSettings(ep ? { data_parallel_size: 2, enable_expert_parallel: true } : {});
    const gpu: RooflineGpu = pcie ? { ...GPU, link: { kind: "pcie", GBps: 0.1, latencyUs: 5 } } : GPU;
    const t = new RooflineTiming(rooflineRank(profileOf(shape, 4096, tp), engine), gpu, {
      ...BARE,
      pcie_collective_gbps: 0.05,
      compute_efficiency: 0.6,
      memory_efficiency: 0.8,
      step_overhead_ms: 1,
      layer_overhead_us: 20,
      per_sequence_us: 10,
    });
    const price = (ps: { n: number; context: number }[], ds: number[]) => {
      const b = newBatch();
      for (const p of ps) {
        b.promptRows++;
        b.promptTokens += p.n;
        b.promptContextTokens += p.context;
        b.promptAttentionPairs += p.n * p.context + (p.n * (p.n + 1)) / 2;
        b.prefill.count++;
      }
      for (const d of ds) {
        b.decodeRows++;
        b.decodeKvTokens += d;
        b.decode.count++;
      }
      const s = t.step(b);
      return s.prefillMs + s.decodeMs;
    };
    const base = price(prompts, decodes);
    // one more token to a prompt row
    if (prompts.length > 0) {
      const i = grow % prompts.length;
      const more = prompts.map((p, j) => (j === i ? { ...p, n: p.n + 1 } : p));
      expect(price(more, decodes)).toBeGreaterThanOrEqual(base);
    }
    // one more decode row, and one more prompt row
    expect(price(prompts, [...decodes, 1 + (grow % 1000)])).toBeGreaterThanOrEqual(base);
    expect(price([...prompts, { n: 1 + (grow % 100), context: grow % 500 }], decodes)).toBeGreaterThanOrEqual(base);
  });
});
