/**
 * Family test configs shared by the derivation and model-shape tests. Each carries only the fields
 * the derivation reads, with the public values of each model (or, where named "-like", a model of
 * that family cut down to a test's size).
 */

export const llama8b = {
  architectures: ["LlamaForCausalLM"],
  hidden_size: 4096,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  intermediate_size: 14336,
  vocab_size: 128256,
  max_position_embeddings: 131072,
  torch_dtype: "bfloat16",
};

export const llama70b = { ...llama8b, hidden_size: 8192, num_hidden_layers: 80, num_attention_heads: 64, intermediate_size: 28672 };

export const qwen3_32b = {
  architectures: ["Qwen3ForCausalLM"],
  hidden_size: 5120,
  num_hidden_layers: 64,
  num_attention_heads: 64,
  num_key_value_heads: 8,
  head_dim: 128,
  intermediate_size: 25600,
  vocab_size: 151936,
  max_position_embeddings: 40960,
  sliding_window: null,
  use_sliding_window: false,
  torch_dtype: "bfloat16",
};

export const deepseekV3 = {
  architectures: ["DeepseekV3ForCausalLM"],
  hidden_size: 7168,
  num_hidden_layers: 61,
  num_attention_heads: 128,
  q_lora_rank: 1536,
  kv_lora_rank: 512,
  qk_nope_head_dim: 128,
  qk_rope_head_dim: 64,
  v_head_dim: 128,
  intermediate_size: 18432,
  moe_intermediate_size: 2048,
  n_routed_experts: 256,
  n_shared_experts: 1,
  num_experts_per_tok: 8,
  first_k_dense_replace: 3,
  vocab_size: 129280,
  max_position_embeddings: 163840,
  torch_dtype: "bfloat16",
  quantization_config: { quant_method: "fp8", weight_block_size: [128, 128] },
};

export const gemma3_12b = {
  architectures: ["Gemma3ForConditionalGeneration"],
  text_config: {
    hidden_size: 3840,
    num_hidden_layers: 48,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 256,
    intermediate_size: 15360,
    sliding_window: 1024,
    sliding_window_pattern: 6,
    vocab_size: 262208,
  },
  torch_dtype: "bfloat16",
};

/** A Nemotron-H-8B-like hybrid: 24 Mamba-2, 4 attention and 24 MLP layers. */
export const nemotronH = {
  architectures: ["NemotronHForCausalLM"],
  hidden_size: 4096,
  num_hidden_layers: 52,
  hybrid_override_pattern: "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
  num_attention_heads: 32,
  num_key_value_heads: 8,
  head_dim: 128,
  mamba_num_heads: 128,
  mamba_head_dim: 64,
  ssm_state_size: 128,
  n_groups: 8,
  conv_kernel: 4,
  intermediate_size: 21504,
  vocab_size: 131072,
  torch_dtype: "bfloat16",
};

export const gemma2_9b = {
  architectures: ["Gemma2ForCausalLM"],
  hidden_size: 3584,
  num_hidden_layers: 42,
  num_attention_heads: 16,
  num_key_value_heads: 8,
  head_dim: 256,
  intermediate_size: 14336,
  sliding_window: 4096,
  vocab_size: 256000,
};

export const gptOss20b = {
  architectures: ["GptOssForCausalLM"],
  hidden_size: 2880,
  num_hidden_layers: 24,
  num_attention_heads: 64,
  num_key_value_heads: 8,
  head_dim: 64,
  sliding_window: 128,
  layer_types: Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? "sliding_attention" : "full_attention")),
  intermediate_size: 2880,
  num_local_experts: 32,
  num_experts_per_tok: 4,
  vocab_size: 201088,
  quantization_config: { quant_method: "mxfp4" },
};

/** A Mistral-7B-like model with a sliding window on every layer. */
export const mistralWindowed = { ...llama8b, architectures: ["MistralForCausalLM"], sliding_window: 4096, vocab_size: 32000, intermediate_size: 14336 };

export const mixtral8x7b = {
  architectures: ["MixtralForCausalLM"],
  hidden_size: 4096,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  intermediate_size: 14336,
  num_local_experts: 8,
  num_experts_per_tok: 2,
  vocab_size: 32000,
  max_position_embeddings: 32768,
  sliding_window: null,
  torch_dtype: "bfloat16",
};

export const qwen15MoeA27b = {
  architectures: ["Qwen2MoeForCausalLM"],
  hidden_size: 2048,
  num_hidden_layers: 24,
  num_attention_heads: 16,
  num_key_value_heads: 16,
  intermediate_size: 5632,
  moe_intermediate_size: 1408,
  shared_expert_intermediate_size: 5632,
  num_experts: 60,
  num_experts_per_tok: 4,
  decoder_sparse_step: 1,
  mlp_only_layers: [],
  vocab_size: 151936,
  max_position_embeddings: 8192,
  torch_dtype: "bfloat16",
};

/** A Qwen3-Next-80B-A3B-like model. */
export const qwen3Next = {
  architectures: ["Qwen3NextForCausalLM"],
  hidden_size: 2048,
  num_hidden_layers: 48,
  num_attention_heads: 16,
  num_key_value_heads: 2,
  head_dim: 256,
  linear_num_key_heads: 16,
  linear_num_value_heads: 32,
  linear_key_head_dim: 128,
  linear_value_head_dim: 128,
  linear_conv_kernel_dim: 4,
  full_attention_interval: 4,
  num_experts: 512,
  num_experts_per_tok: 10,
  moe_intermediate_size: 512,
  shared_expert_intermediate_size: 512,
  vocab_size: 151936,
};

/** A Falcon-H1-like model cut to 4 layers. */
export const falconH1 = {
  architectures: ["FalconH1ForCausalLM"],
  hidden_size: 1024,
  num_hidden_layers: 4,
  num_attention_heads: 8,
  num_key_value_heads: 2,
  head_dim: 64,
  mamba_d_ssm: 1536,
  mamba_n_heads: 24,
  mamba_d_head: 64,
  mamba_n_groups: 1,
  mamba_d_state: 128,
  mamba_d_conv: 4,
  intermediate_size: 4096,
  vocab_size: 65536,
};

/** Kimi-Linear-48B-A3B-like, without its MoE: 20 KDA layers, 7 MLA layers (every 4th and the last). */
export const kimiLinear = {
  architectures: ["KimiLinearForCausalLM"],
  hidden_size: 2304,
  num_hidden_layers: 27,
  num_attention_heads: 32,
  kv_lora_rank: 512,
  qk_nope_head_dim: 128,
  qk_rope_head_dim: 64,
  v_head_dim: 128,
  linear_attn_config: {
    kda_layers: Array.from({ length: 27 }, (_, i) => i + 1).filter((l) => l % 4 !== 0 && l !== 27),
    full_attn_layers: [4, 8, 12, 16, 20, 24, 27],
    num_heads: 32,
    head_dim: 128,
    short_conv_kernel_size: 4,
  },
  intermediate_size: 9216,
  vocab_size: 163840,
};

export const jamba = {
  architectures: ["JambaForCausalLM"],
  hidden_size: 4096,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  attn_layer_period: 8,
  attn_layer_offset: 4,
  mamba_expand: 2,
  mamba_d_state: 16,
  mamba_d_conv: 4,
  mamba_dt_rank: 256,
  num_experts: 16,
  num_experts_per_tok: 2,
  expert_layer_period: 2,
  expert_layer_offset: 1,
  intermediate_size: 14336,
  vocab_size: 65536,
};

/** A Granite-4.0-H-like model cut to 8 layers. */
export const graniteHybrid = {
  architectures: ["GraniteMoeHybridForCausalLM"],
  hidden_size: 1536,
  num_hidden_layers: 8,
  layer_types: ["mamba", "mamba", "mamba", "attention", "mamba", "mamba", "mamba", "attention"],
  num_attention_heads: 12,
  num_key_value_heads: 4,
  mamba_n_heads: 48,
  mamba_d_head: 64,
  mamba_n_groups: 1,
  mamba_d_state: 128,
  mamba_d_conv: 4,
  mamba_expand: 2,
  intermediate_size: 4096,
  vocab_size: 100352,
};
