import { checkPdGate, engineSettings, InputError, isGroupedProfile, kvCapacity, type CacheGroup } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { profileFromHfConfig, type HfProfileOptions } from "./derive.js";

import {
  deepseekV3,
  falconH1,
  gemma2_9b,
  gemma3_12b,
  gptOss20b,
  graniteHybrid,
  jamba,
  kimiLinear,
  llama70b,
  llama8b,
  mistralWindowed,
  nemotronH,
  qwen3_32b,
  qwen3Next,
} from "./test-configs.js";

const derive = (config: unknown, options: Partial<HfProfileOptions> = {}) =>
  profileFromHfConfig(config, { tensorParallelSize: 1, file: "config.json", ...options });

const groupsOf = (config: unknown, options: Partial<HfProfileOptions> = {}) => {
  const { profile } = derive(config, options);
  if (!isGroupedProfile(profile)) throw new Error("expected a grouped profile");
  return profile;
};

const refusal = (config: unknown, options: Partial<HfProfileOptions> = {}): string[] => {
  try {
    derive(config, options);
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  throw new Error("expected an InputError");
};

describe("dense attention", () => {
  it("Llama-3.1-8B bf16 TP 1: 131,072 bytes per token, and its weights and activations", () => {
    const r = derive(llama8b);
    // 2 (K and V) x 32 layers x 8 KV heads x 128 head dim (4096 / 32) x 2 bytes = 131,072
    expect(r.profile.kv_bytes_per_token).toBe(131_072);
    expect(r.profile.kv_cache_groups).toBeUndefined();
    expect(r.engineBlockSize).toBe(16);
    // Parameters: 32 x (attention 4096 x (4096 + 2 x 1024) + 4096 x 4096 = 41,943,040
    //   + MLP 3 x 4096 x 14336 = 176,160,768 + norms 2 x 4096) + final norm 4096
    //   + embedding and untied LM head 2 x 128,256 x 4096 = 8,030,261,248 (the published count).
    expect(r.parametersPerRank).toBe(8_030_261_248);
    // Weights: 8,030,261,248 x 2 bytes + rotary cache 131,072 positions x 128 x 2 bytes = 16,094,076,928
    // (vLLM logs "Model loading took 14.9888 GiB" for this model: 16,094,076,928 / 2^30 = 14.9888).
    expect(r.profile.memory?.weights_bytes).toBe(16_094_076_928);
    // Activations per batched token: 2 bytes x (2 x 4096 + (32 + 2 x 8) x 128 + 3 x 14336) = 114,688;
    // sampler per sequence: 128,256 x 26 = 3,334,656.
    expect(r.profile.memory?.activation_bytes_per_token).toBe(114_688);
    expect(r.profile.memory?.sampler_bytes_per_sequence).toBe(3_334_656);
    expect(checkPdGate(r.profile, "prefill")).toEqual([]);
  });

  it("Llama-3.1-70B TP 4 fp8: KV heads split over ranks", () => {
    const r = derive(llama70b, { tensorParallelSize: 4, kvCacheDtype: "fp8" });
    // 8 KV heads / 4 ranks = 2 per rank; 2 x 80 layers x 2 x 128 x 1 byte = 40,960
    expect(r.profile.kv_bytes_per_token).toBe(40_960);
    expect(r.profile.kv_cache_dtype).toBe("fp8");
    // Per rank: embedding + head 2 x (128,256 / 4) x 8192 = 525,336,576; per layer attention
    // 8192 x (2048 + 2 x 256) + 2048 x 8192 = 37,748,736 and MLP 3 x 8192 x 28672 / 4 = 176,160,768,
    // x 80 = 17,112,760,320; norms 2 x 8192 x 80 + 8192 = 1,318,912 (replicated). Sum 17,639,415,808.
    expect(r.parametersPerRank).toBe(17_639_415_808);
  });

  it("Qwen3-32B TP 2: head_dim from the config, not hidden / heads", () => {
    const r = derive(qwen3_32b, { tensorParallelSize: 2 });
    // 8 KV heads / 2 = 4; 2 x 64 layers x 4 x 128 x 2 bytes = 131,072 (5120 / 64 = 80 would be wrong)
    expect(r.profile.kv_bytes_per_token).toBe(131_072);
  });

  it("replicates KV heads when there are fewer than TP ranks", () => {
    // 8 KV heads on 16 ranks: one replica per rank; 2 x 80 x 1 x 128 x 2 = 40,960
    expect(derive({ ...llama70b, num_attention_heads: 64 }, { tensorParallelSize: 16 }).profile.kv_bytes_per_token).toBe(40_960);
  });

  it("refuses heads that do not split over the TP size", () => {
    expect(refusal(llama8b, { tensorParallelSize: 3 })).toEqual([
      "num_attention_heads: 32 attention heads do not split over 3 TP ranks (vLLM needs them divisible by the TP size)",
      "num_key_value_heads: 8 KV heads do not split evenly over 3 TP ranks",
    ]);
  });

  it("uses a Qwen sliding window only with use_sliding_window, from max_window_layers on", () => {
    const p = groupsOf({ ...qwen3_32b, num_hidden_layers: 8, use_sliding_window: true, sliding_window: 4096, max_window_layers: 4 });
    // 4 full + 4 sliding layers: group size 4, page 4 x 16 x (2 x 8 x 128 x 2) = 4 x 65,536
    expect(p.kv_cache_groups.map((g) => [g.name, g.kind, g.num_layers, g.window_tokens])).toEqual([
      ["full_attention", "full_attention", 4, undefined],
      ["sliding_window", "sliding_window", 4, 4096],
    ]);
    expect(p.page_size_bytes).toBe(262_144);
  });
});

describe("multi-head latent attention", () => {
  it("DeepSeek-V3: one latent per token, not split by TP, in 64-token blocks", () => {
    for (const tp of [1, 8]) {
      const p = groupsOf(deepseekV3, { tensorParallelSize: tp, kvCacheDtype: "fp8" });
      // (kv_lora_rank 512 + qk_rope_head_dim 64) x 1 byte = 576 B per token and layer, on every rank;
      // 61 layers x 576 = 35,136 B per token; a 64-token block: 64 x 35,136 = 2,248,704 B.
      expect(p.kv_cache_groups).toEqual([
        { name: "full_attention", kind: "full_attention", num_layers: 61, block_size_tokens: 64, prefix_cacheable: true, transfer_bytes_per_block: 2_248_704 },
      ]);
      expect(p.page_size_bytes).toBe(2_248_704);
      expect(checkPdGate(p, "decode")).toEqual([]);
    }
    // The model dtype (bf16) doubles it: 64 x 61 x 576 x 2 = 4,497,408.
    expect(groupsOf(deepseekV3).page_size_bytes).toBe(4_497_408);
  });

  it("counts FP8 weights as one byte and splits experts over TP", () => {
    const r = derive(deepseekV3, { tensorParallelSize: 8 });
    const w = r.profile.memory?.weights_bytes ?? 0;
    // About 671e9 parameters / 8 ranks at ~1 byte: between 80 and 90 GB per rank.
    expect(w).toBeGreaterThan(80e9);
    expect(w).toBeLessThan(90e9);
  });
});

describe("sliding-window hybrids", () => {
  it("Gemma-3-12B: window 1024, 5 local : 1 global, groups of 8 layers", () => {
    const p = groupsOf(gemma3_12b);
    // Layer i is global when (i + 1) % 6 == 0: 8 global, 40 local. Group size = the smaller count, 8:
    // one full-attention group and 40 / 8 = 5 sliding groups. Per layer and block:
    // 16 tokens x 2 x 8 KV heads x 256 x 2 bytes = 131,072; page = 8 x 131,072 = 1,048,576.
    const sw = (i: number): CacheGroup => ({
      name: `sliding_window_${i}`,
      kind: "sliding_window",
      num_layers: 8,
      block_size_tokens: 16,
      window_tokens: 1024,
      prefix_cacheable: true,
      transfer_bytes_per_block: 1_048_576,
    });
    expect(p.kv_cache_groups).toEqual([
      { name: "full_attention", kind: "full_attention", num_layers: 8, block_size_tokens: 16, prefix_cacheable: true, transfer_bytes_per_block: 1_048_576 },
      sw(0),
      sw(1),
      sw(2),
      sw(3),
      sw(4),
    ]);
    expect(p.page_size_bytes).toBe(1_048_576);
    expect(p.model).toBe("Gemma3ForConditionalGeneration");
    expect(checkPdGate(p, "prefill")).toEqual([]);
  });

  it("Gemma 2 alternates local and global layers", () => {
    const p = groupsOf(gemma2_9b);
    // 21 local + 21 global: group size 21; page 21 x 16 x (2 x 8 x 256 x 2 = 8,192) = 2,752,512
    expect(p.kv_cache_groups.map((g) => [g.kind, g.num_layers])).toEqual([
      ["full_attention", 21],
      ["sliding_window", 21],
    ]);
    expect(p.page_size_bytes).toBe(2_752_512);
  });

  it("gpt-oss: layer_types with a 128-token window", () => {
    const p = groupsOf(gptOss20b);
    // 12 + 12 layers; per layer and block 16 x 2 x 8 x 64 x 2 = 32,768; page 12 x 32,768 = 393,216
    expect(p.kv_cache_groups.map((g) => [g.kind, g.num_layers, g.window_tokens])).toEqual([
      ["full_attention", 12, undefined],
      ["sliding_window", 12, 128],
    ]);
    expect(p.page_size_bytes).toBe(393_216);
  });

  it("Mistral with a window on every layer: one sliding-window group (aggregated only: no full-attention group for P/D)", () => {
    const p = groupsOf(mistralWindowed);
    // 32 layers x 16 x 2 x 8 x 128 x 2 = 32 x 65,536 = 2,097,152
    expect(p.kv_cache_groups).toEqual([
      {
        name: "sliding_window",
        kind: "sliding_window",
        num_layers: 32,
        block_size_tokens: 16,
        window_tokens: 4096,
        prefix_cacheable: true,
        transfer_bytes_per_block: 2_097_152,
      },
    ]);
    expect(checkPdGate(p, "prefill").map((g) => g.path)).toEqual(["kv_cache_groups"]);
  });
});

describe("Mamba and linear-attention hybrids", () => {
  it("a Nemotron-H-8B-like model: state, attention block raised to hold it, page unification", () => {
    const p = groupsOf(nemotronH);
    // Mamba-2 state per layer: conv (4 - 1) x (8192 + 2 x 8 x 128 = 10,240) x 2 bytes = 61,440, plus
    // SSM 128 heads x 64 x 128 x 4 bytes (float32) = 4,194,304: 4,255,744 bytes.
    // Attention per token and layer: 2 x 8 x 128 x 2 = 4,096. Block = 16 x cdiv(4,255,744, 16 x 4,096)
    // = 16 x 65 = 1,040 tokens; page per layer 1,040 x 4,096 = 4,259,840 (the state padded to it).
    // 4 attention and 24 Mamba layers: group size 4, one attention group and 6 Mamba groups;
    // pool page 4 x 4,259,840 = 17,039,360; a Mamba group moves 4 x 4,255,744 = 17,022,976 per block.
    const mamba = (i: number): CacheGroup => ({
      name: `mamba2_${i}`,
      kind: "state",
      num_layers: 4,
      block_size_tokens: 1040,
      prefix_cacheable: true,
      transfer_bytes_per_block: 17_022_976,
    });
    expect(p.kv_cache_groups).toEqual([
      { name: "full_attention", kind: "full_attention", num_layers: 4, block_size_tokens: 1040, prefix_cacheable: true, transfer_bytes_per_block: 17_039_360 },
      ...[0, 1, 2, 3, 4, 5].map(mamba),
    ]);
    expect(p.page_size_bytes).toBe(17_039_360);
    expect(checkPdGate(p, "prefill")).toEqual([]);
  });

  it("raises a user block size only as far as the state needs, and keeps a larger one", () => {
    // --block-size 32: alignment 32; 32 x cdiv(4,255,744, 32 x 4,096) = 32 x 33 = 1,056
    expect(groupsOf(nemotronH, { blockSize: 32 }).kv_cache_groups[0]!.block_size_tokens).toBe(1056);
    expect(groupsOf(nemotronH, { blockSize: 2048 }).kv_cache_groups[0]!.block_size_tokens).toBe(2048);
  });

  it("Qwen3-Next: Gated DeltaNet states every 3 of 4 layers", () => {
    const p = groupsOf(qwen3Next);
    // GDN state: conv 3 x (2 x 16 x 128 + 32 x 128 = 8,192) x 2 = 49,152, delta state 32 x 128 x 128 x 2
    // = 1,048,576: 1,097,728. Attention 2 x 2 x 256 x 2 = 2,048 per token: block 16 x cdiv(1,097,728,
    // 32,768) = 16 x 34 = 544; page per layer 544 x 2,048 = 1,114,112. 12 full + 36 GDN: groups of 12,
    // one full-attention and 3 GDN groups; pool page 12 x 1,114,112 = 13,369,344.
    expect(p.kv_cache_groups.map((g) => [g.name, g.num_layers, g.block_size_tokens, g.transfer_bytes_per_block])).toEqual([
      ["full_attention", 12, 544, 13_369_344],
      ["gdn_0", 12, 544, 12 * 1_097_728],
      ["gdn_1", 12, 544, 12 * 1_097_728],
      ["gdn_2", 12, 544, 12 * 1_097_728],
    ]);
    expect(p.page_size_bytes).toBe(13_369_344);
  });

  it("Falcon-H1: attention and Mamba-2 side by side in every layer", () => {
    const p = groupsOf(falconH1);
    // State: conv 3 x (1536 + 2 x 1 x 128 = 1,792) x 2 = 10,752 + SSM 24 x 64 x 128 x 2 = 393,216: 403,968.
    // Attention 2 x 2 x 64 x 2 = 512 per token: block 16 x cdiv(403,968, 8,192) = 16 x 50 = 800;
    // page 800 x 512 = 409,600; 4 + 4 layers in groups of 4: pool page 4 x 409,600 = 1,638,400.
    expect(p.kv_cache_groups.map((g) => [g.name, g.num_layers, g.block_size_tokens, g.transfer_bytes_per_block])).toEqual([
      ["full_attention", 4, 800, 1_638_400],
      ["mamba2", 4, 800, 4 * 403_968],
    ]);
    expect(p.page_size_bytes).toBe(1_638_400);
  });

  it("Kimi Linear: MLA plus KDA states, with vLLM 0.32.0's prefill checkpoint", () => {
    const config = kimiLinear;
    const p = groupsOf(config);
    // 20 KDA layers, 7 MLA. KDA state: conv 3 x (3 x 32 x 128 = 12,288) x 2 = 73,728 + recurrent
    // 32 x 128 x 128 x 4 (float32) = 2,097,152: 2,170,880. MLA 576 x 2 = 1,152 per token; MLA aligns
    // to 64: block 64 x cdiv(2,170,880, 64 x 1,152) = 64 x 30 = 1,920; page 1,920 x 1,152 = 2,211,840.
    // Groups of 7: one MLA group, cdiv(20, 7) = 3 KDA groups of 7, 7 and 6 layers.
    expect(p.kv_cache_groups.map((g) => [g.name, g.num_layers, g.block_size_tokens, g.transfer_bytes_per_block, g.prefill_checkpoint_blocks])).toEqual([
      ["full_attention", 7, 1920, 7 * 2_211_840, undefined],
      ["kda_0", 7, 1920, 7 * 2_170_880, 1],
      ["kda_1", 7, 1920, 7 * 2_170_880, 1],
      ["kda_2", 6, 1920, 6 * 2_170_880, 1],
    ]);
    expect(p.page_size_bytes).toBe(7 * 2_211_840);
    expect(checkPdGate(p, "prefill")).toEqual([]);
    // vLLM 0.31.0 has no FlashKDA checkpoint blocks.
    expect(groupsOf(config, { vllmVersion: "0.31.0" }).kv_cache_groups[1]!.prefill_checkpoint_blocks).toBeUndefined();
  });

  it("Jamba and Granite 4.0-H: Mamba layers between attention layers", () => {
    const jambaP = groupsOf(jamba);
    // Mamba-1 state: conv 3 x 8192 x 2 = 49,152 + SSM 8192 x 16 x 2 = 262,144: 311,296. Attention
    // 4,096 per token: block 16 x cdiv(311,296, 65,536) = 80. 4 attention + 28 Mamba: groups of 4.
    expect(jambaP.kv_cache_groups.map((g) => [g.kind, g.num_layers, g.block_size_tokens])).toEqual([
      ["full_attention", 4, 80],
      ...Array<unknown>(7).fill(["state", 4, 80]),
    ]);
    const granite = groupsOf(graniteHybrid);
    // State: conv 3 x (3072 + 256) x 2 = 19,968 + SSM 48 x 64 x 128 x 2 = 786,432: 806,400. Attention
    // 2 x 4 x 128 x 2 = 2,048 per token: block 16 x cdiv(806,400, 32,768) = 16 x 25 = 400. 2 + 6 layers.
    expect(granite.kv_cache_groups.map((g) => [g.name, g.num_layers, g.block_size_tokens])).toEqual([
      ["full_attention", 2, 400],
      ["mamba2_0", 2, 400],
      ["mamba2_1", 2, 400],
      ["mamba2_2", 2, 400],
    ]);
  });
});

describe("refusals", () => {
  it("refuses an unknown architecture by name, listing the known ones", () => {
    const issues = refusal({ architectures: ["FancyNetForCausalLM"], hidden_size: 8 });
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatch(/^architectures: unknown architecture "FancyNetForCausalLM"; kvsim knows: LlamaForCausalLM, MistralForCausalLM, /);
    expect(issues[0]).toContain("NemotronHForCausalLM");
  });

  it("names every missing field", () => {
    expect(refusal({ architectures: ["LlamaForCausalLM"], hidden_size: 4096, num_attention_heads: 32 })).toEqual([
      "num_hidden_layers: is required to derive a profile for LlamaForCausalLM",
      "vocab_size: is required to derive a profile for LlamaForCausalLM",
      "intermediate_size: is required to derive a profile for LlamaForCausalLM",
    ]);
    expect(refusal({ ...gemma3_12b, text_config: undefined })).toEqual(["text_config: is required to derive a profile for Gemma3ForConditionalGeneration"]);
    expect(refusal([1, 2])).toEqual([": expected a JSON object (a Hugging Face config.json)"]);
  });
});

describe("KV capacity of a derived profile", () => {
  it("lands within 10% of the 2,588 blocks vLLM 0.19.0 reported for Llama-3.1-8B on an RTX 4090", () => {
    // The public run's facts: RTX 4090 (25,250,627,584 bytes), gpu_memory_utilization 0.9,
    // max_num_batched_tokens 2048, max_num_seqs 256, block size 16; vLLM reported 2,588 GPU blocks.
    const { profile } = derive(llama8b, { vllmVersion: "0.19.0" });
    const r = kvCapacity(profile, engineSettings({ gpu: "RTX-4090", gpu_memory_utilization: 0.9, max_num_batched_tokens: 2048, max_num_seqs: 256 }));
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    expect(Math.abs(r.capacity.num_gpu_blocks - 2588) / 2588).toBeLessThan(0.1);
  });
});
