// The architectures kvsim derives profiles for: the families, each in the file of its kind
// (dense-families.ts, mla-families.ts, hybrid-families.ts), built on family-parts.ts.
import type { Family } from "./family-parts.js";
import { dense, gemma, gptOss } from "./dense-families.js";
import { deepseek } from "./mla-families.js";
import { qwen3Next, nemotronH, jamba, graniteHybrid, falconH1, kimiLinear } from "./hybrid-families.js";

/** The architectures kvsim derives profiles for, by the `architectures` name in config.json. */
export const ARCHITECTURES: Readonly<Record<string, Family>> = {
  LlamaForCausalLM: dense("llama"),
  MistralForCausalLM: dense("llama"),
  MixtralForCausalLM: dense("mixtral"),
  Qwen2ForCausalLM: dense("qwen"),
  Qwen3ForCausalLM: dense("qwen"),
  Qwen2MoeForCausalLM: dense("qwen-moe"),
  Qwen3MoeForCausalLM: dense("qwen-moe"),
  DeepseekV2ForCausalLM: deepseek,
  DeepseekV3ForCausalLM: deepseek,
  Gemma2ForCausalLM: gemma(2, false),
  Gemma3ForCausalLM: gemma(3, false),
  Gemma3ForConditionalGeneration: gemma(3, true),
  GptOssForCausalLM: gptOss,
  Qwen3NextForCausalLM: qwen3Next,
  NemotronHForCausalLM: nemotronH,
  JambaForCausalLM: jamba,
  GraniteMoeHybridForCausalLM: graniteHybrid,
  FalconH1ForCausalLM: falconH1,
  KimiLinearForCausalLM: kimiLinear,
};

export const KNOWN_ARCHITECTURES: readonly string[] = Object.keys(ARCHITECTURES);
