import { InputError } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { maxConfigInt } from "./config.js";
import { profileFromHfConfig } from "./derive.js";
import { deepseekV3, llama8b, nemotronH } from "./test-configs.js";

/** Issue 38: configs a fuzzer made, each refused naming the config key, never a crash. */
const refusal = (config: unknown): string[] => {
  try {
    profileFromHfConfig(config, { tensorParallelSize: 1, file: "config.json" });
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  throw new Error("expected an InputError");
};

describe("profile from-hf under hostile configs", () => {
  it("an architecture named after an Object.prototype member is unknown, not a family", () => {
    for (const name of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
      const [issue] = refusal({ ...llama8b, architectures: [name] });
      expect(issue).toMatch(new RegExp(`^architectures: unknown architecture "${name}"; kvsim knows: LlamaForCausalLM`));
    }
  });

  it("a layer count is at most 4096: 4096 derives, 4097 and 2^53 - 1 are refused naming num_hidden_layers", () => {
    expect(maxConfigInt("num_hidden_layers")).toBe(4096);
    expect(profileFromHfConfig({ ...llama8b, num_hidden_layers: 4096 }, { tensorParallelSize: 1 }).profile.model_shape?.num_layers).toBe(4096);
    expect(refusal({ ...llama8b, num_hidden_layers: 4097 })).toEqual(["num_hidden_layers: must be at most 4096 (got 4097); no model is that large"]);
    expect(refusal({ ...llama8b, num_hidden_layers: 2 ** 53 - 1 })).toEqual([
      "num_hidden_layers: must be at most 4096 (got 9007199254740991); no model is that large",
    ]);
    expect(refusal({ ...llama8b, num_hidden_layers: 1e9 })).toEqual(["num_hidden_layers: must be at most 4096 (got 1000000000); no model is that large"]);
  });

  it("a width is at most 2^24, named by its config key rather than the derived model_shape field", () => {
    expect(refusal({ ...llama8b, vocab_size: 2 ** 24 + 1 })).toEqual(["vocab_size: must be at most 2^24 (got 16777217); no model is that large"]);
  });

  it("sizes within their bounds that multiply past 2^53 bytes name the config key most out of scale", () => {
    // hidden 2^24 with 2^14 heads of 2^10 dims and intermediate 2^24: one layer's MLP alone is
    // 3 x 2^24 x 2^24 = 3 x 2^48 parameters, x 2 bytes x 32 layers = 1.8e16 > 2^53 (9.0e15).
    // hidden_size is 2^24 / 16384 = 1024 times its typical size; intermediate_size 2^24 / 65536 = 256.
    const [issue] = refusal({ ...llama8b, hidden_size: 2 ** 24, intermediate_size: 2 ** 24, num_attention_heads: 2 ** 14, num_key_value_heads: 2 ** 14 });
    expect(issue).toMatch(
      /^hidden_size: 16,777,216 is out of scale: with it the weights come to \d\.\d\de\+\d+ bytes per rank, more than kvsim holds exactly \(2\^53\)/,
    );
  });

  it("a derived figure out of its range is blamed on the config key most out of scale, never on the derived profile", () => {
    // MLA head dim = qk_nope_head_dim + qk_rope_head_dim = 128 + 2^24, past the shape's 2^24.
    expect(refusal({ ...deepseekV3, qk_rope_head_dim: 2 ** 24 })).toEqual([
      "qk_rope_head_dim: 16,777,216 is out of scale: the derived model_shape.attention.head_dim must be at most 2^24 (got 16777344)",
    ]);
    // Top 2^24 of 256 experts.
    expect(refusal({ ...deepseekV3, num_experts_per_tok: 2 ** 24 })).toEqual([
      "num_experts_per_tok: 16,777,216 is out of scale: the derived model_shape.moe.num_experts_per_tok must be at most num_experts",
    ]);
  });

  it("an MLP width that does not split over the ranks gives an activation estimate rounded up to whole bytes", () => {
    // Per rank at TP 8: mixer 32 / 8 = 4 query heads x 128 + 2 x (8 / 8 = 1 KV head) x 128 = 768;
    // 2 bytes x (2 x 4096 hidden + 768 + 3 x 4097 / 8 = 1536.375) = 2 x 10,496.375 = 20,992.75, so 20,993.
    const { profile } = profileFromHfConfig({ ...llama8b, intermediate_size: 4097 }, { tensorParallelSize: 8 });
    expect(profile.memory?.activation_bytes_per_token).toBe(20_993);
  });

  it("an unknown torch_dtype or SSM cache dtype is refused naming its key", () => {
    expect(refusal({ ...llama8b, torch_dtype: "float7" })).toEqual([
      'torch_dtype: unknown dtype "float7"; kvsim knows float32, fp32, float16, bfloat16, half, fp16, bf16',
    ]);
    expect(refusal({ ...nemotronH, mamba_ssm_cache_dtype: "int3" })).toEqual([
      'mamba_ssm_cache_dtype: unknown dtype "int3"; kvsim knows float32, fp32, float16, bfloat16, half, fp16, bf16',
    ]);
  });

  it("a huge list is shown cut short in its message", () => {
    const [issue] = refusal({
      ...llama8b,
      architectures: ["LlamaForCausalLM"],
      mlp_only_layers: undefined,
      num_key_value_heads: Array.from({ length: 100_000 }, () => 1),
    });
    expect(issue!.length).toBeLessThan(200);
  });
});
