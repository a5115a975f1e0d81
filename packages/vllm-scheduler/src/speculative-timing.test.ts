import { describe, expect, it } from "vitest";
import { engineSettings, validateProfile, type Profile, type SpeculativeConfig, type Timing } from "@kvsim/profile-schema";
import { checkRankConfig } from "./rank.js";
import { rooflineBreakdown, rooflineRank, RooflineTiming, type RooflineGpu, type RooflineParams } from "./roofline.js";
import { SpeculativeTiming } from "./speculative-timing.js";
import { newBatch, type MutableBatch } from "./step-rows.js";
import { rankConfig } from "./test-helpers.js";
import { createTimingModel } from "./timing-model.js";

const linear = (extra: Partial<Profile> = {}): Profile => ({
  schema_version: 1,
  model: "test/linear",
  vllm_version: "0.32.0",
  tensor_parallel_size: 1,
  kv_bytes_per_token: 1024,
  ...extra,
});
const spec = (c: Partial<SpeculativeConfig>): SpeculativeConfig => ({ method: "ngram", num_speculative_tokens: 3, acceptance_rate: 0.5, ...c });

/** A decode-only batch: `rows` rows, each verifying 1 + `drafts` tokens after `context` held tokens. */
function verifyBatch(rows: number, drafts: number, context: number): MutableBatch {
  const b = newBatch();
  const n = 1 + drafts;
  b.decode.count = rows;
  b.decode.sumSequenceTokens = rows * (context + 1);
  b.decode.tokens = rows * n;
  b.decodeRows = rows;
  b.decodeTokens = rows * n;
  b.decodeKvTokens = rows * (context + n);
  b.decodeAttentionPairs = rows * (n * context + (n * (n + 1)) / 2);
  return b;
}

const wrap = (timing: Timing, c: SpeculativeConfig, profile: Profile = linear()) =>
  new SpeculativeTiming(createTimingModel(timing, profile, engineSettings()), c, profile);

describe("the drafter's price", () => {
  const FIXED: Timing = { type: "fixed", prefill_ms: 10, decode_ms: 2 };

  it("ngram: CPU time per decoding row", () => {
    // 4 rows x 20 µs = 0.08 ms on top of the fixed 2 ms step.
    const t = wrap(FIXED, spec({ ngram_cpu_us_per_row: 20 })).step(verifyBatch(4, 3, 100));
    expect(t.decodeMs).toBeCloseTo(2.08, 12);
    expect(t.prefillMs).toBe(0);
  });

  it("draft_model: k passes, each draft_cost_fraction of the target's decode step", () => {
    // 2 ms + 3 x 0.1 x 2 ms = 2.6 ms.
    const t = wrap(FIXED, spec({ method: "draft_model", draft_cost_fraction: 0.1 })).step(verifyBatch(4, 3, 100));
    expect(t.decodeMs).toBeCloseTo(2.6, 12);
  });

  it("linear: verification counts 1 + k tokens per row; an MTP head is a share of a one-token step", () => {
    const lin: Timing = {
      type: "linear",
      step_ms: 1,
      per_sequence_ms: 0.5,
      per_kv_token_us: 0,
      prompt_step_ms: 0,
      per_prompt_token_us: 0,
      per_cached_token_us: 0,
    };
    // Target: 2 rows x (1 + 3) = 8 tokens: 1 + 0.5 x 8 = 5 ms. Drafter: 3 passes x 0.25 x (1 +
    // 0.5 x 2) = 1.5 ms.
    const t = wrap(lin, spec({ method: "mtp", draft_cost_fraction: 0.25 })).step(verifyBatch(2, 3, 100));
    expect(t.decodeMs).toBeCloseTo(6.5, 12);
  });

  it("mtp off the roofline defaults to draft_layers / the model's layers", () => {
    // model_shape with 4 layers, 2 draft layers: fraction 0.5; fixed 2 ms: 2 + 3 x 0.5 x 2 = 5 ms.
    const shaped = validateProfile(
      {
        ...linear(),
        model_shape: {
          hidden_size: 64,
          num_layers: 4,
          vocab_size: 64,
          weight_bytes: 2,
          attention: { layers: 4, num_heads: 1, num_kv_heads: 1, head_dim: 64 },
          mlp: { layers: 4, intermediate_size: 64 },
        },
      },
      "test",
    );
    const t = wrap(FIXED, spec({ method: "mtp", draft_layers: 2 }), shaped).step(verifyBatch(1, 3, 10));
    expect(t.decodeMs).toBeCloseTo(5, 12);
  });

  it("a step with no decode row pays no drafter", () => {
    const b = newBatch();
    b.prefill.count = 1;
    b.prefill.sumIsl = 100;
    b.promptRows = 1;
    b.promptTokens = 100;
    const t = wrap(FIXED, spec({ method: "draft_model", draft_cost_fraction: 0.1 })).step(b);
    expect(t).toEqual({ prefillMs: 10, decodeMs: 0, clamped: 0 });
  });

  it("a rank refuses an MTP head it cannot price", () => {
    const problems = checkRankConfig(rankConfig({ engine: { block_size: 16, speculative_config: spec({ method: "mtp" }) } }));
    expect(problems.map((p) => p.path)).toEqual(["engine.speculative_config"]);
    expect(problems[0]!.message).toMatch(/draft_cost_fraction is required for method mtp/);
    const withAsync = checkRankConfig(rankConfig({ engine: { block_size: 16, async_scheduling: true, speculative_config: spec({}) } }));
    expect(withAsync.map((p) => p.message)).toEqual(["is not modelled together with async_scheduling: turn one of them off"]);
  });
});

describe("verification as each model prices it", () => {
  it("profile: the decode table is read at the batch's tokens", () => {
    // Decode grid: batch {1, 8} x kv {0, 10000}, latency = batch size (ms).
    const decode = [1, 8].flatMap((b) => [0, 10_000].map((kv) => ({ batch_size: b, kv_tokens: kv, latency_ms: b })));
    const profile = linear({ forward_pass: { provenance: "test", prefill: [], decode } });
    const model = createTimingModel({ type: "profile", outside_grid: "refuse" }, profile, engineSettings());
    // 2 rows verifying 1 + 3 tokens each: the table at batch 8, 8 ms; without drafts, batch 2, 2 ms.
    expect(model.step(verifyBatch(2, 3, 100)).decodeMs).toBe(8);
    expect(model.step(verifyBatch(2, 0, 100)).decodeMs).toBe(2);
  });

  it("roofline: the verified tokens are GEMM tokens, LM-head rows and causal attention pairs", () => {
    const GPU: RooflineGpu = { name: "test", bf16Tflops: 0.1, fp8Tflops: undefined, hbmGBps: 1, link: { GBps: 0.1, latencyUs: 5 } };
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
    const shape = {
      hidden_size: 1024,
      num_layers: 1,
      vocab_size: 6400,
      weight_bytes: 2,
      attention: { layers: 1, num_heads: 8, num_kv_heads: 8, head_dim: 128 },
      mlp: { layers: 1, intermediate_size: 4096 },
    };
    const profile = validateProfile({ ...linear({ kv_bytes_per_token: 4096 }), model_shape: shape }, "test");
    const rank = rooflineRank(profile, engineSettings({ cudagraph_capture_sizes: [1, 2, 4, 8] }));
    const roof = new RooflineTiming(rank, GPU, BARE);
    // One row, 1 + 3 tokens after 1,000 held: 4 tokens, 4 LM-head rows, KV 1,004 tokens read, pairs
    // 4 x 1000 + 4 x 5 / 2 = 4,010.
    const expected = rooflineBreakdown(rank, GPU, BARE, {
      tokens: 4,
      sampled: 4,
      promptRows: 0,
      promptTokens: 0,
      promptContextTokens: 0,
      promptPairs: 0,
      decodeRows: 1,
      decodeKvTokens: 1004,
      decodePairs: 4010,
    });
    expect(roof.step(verifyBatch(1, 3, 1000)).decodeMs).toBe(expected.total);
    // One layer and no overheads: a one-layer draft head costs the whole one-token step.
    expect(roof.draftHeadPassMs(1, 1001, 1)).toBe(roof.decodeOnlyMs(1, 1001));
    const mtp = new SpeculativeTiming(roof, spec({ method: "mtp" }), profile);
    expect(mtp.step(verifyBatch(1, 3, 1000)).decodeMs).toBeCloseTo(expected.total + 3 * roof.decodeOnlyMs(1, 1001), 9);
  });
});
