/**
 * `@kvsim/profile-schema/testing`: profiles for tests, shared by the packages above so a fixture is
 * written (and checked against the documents) once. Every profile goes through the real schema,
 * so a fixture cannot drift from what a user could write.
 */
import type { CacheGroup, Profile } from "./profile.js";
import { validateProfile } from "./parse.js";

/**
 * GLM-5.3-Flash, TP 4, fp8 KV cache, from the oracle table of docs/rules/grouped-pd.md §2, all blocks
 * 2,176 tokens, page 13,045,120 bytes:
 * * full_attention: 11 x 1,114,112 + 11 x 71,808 = 13,045,120 bytes per block;
 * * tail_ring (state, not prefix-cacheable): 11 x 2,048 = 22,528;
 * * kda_0, kda_1 (Mamba-type state): 9 x 1,085,440 = 9,768,960; kda_2, kda_3: 8 x 1,085,440 = 8,683,520.
 * Fixed bytes (ring + four KDA groups) = 22,528 + 2 x 9,768,960 + 2 x 8,683,520 = 36,927,488.
 * On 0.32.0 the KDA groups carry `prefill_checkpoint_blocks: 1`.
 */
export function glmFlashProfile(version: "0.31.0" | "0.32.0" = "0.32.0"): Profile {
  const kda = (name: string, layers: number): CacheGroup => ({
    name,
    kind: "state",
    num_layers: layers,
    block_size_tokens: 2176,
    prefix_cacheable: true,
    transfer_bytes_per_block: layers * 1_085_440,
    ...(version === "0.32.0" ? { prefill_checkpoint_blocks: 1 } : {}),
  });
  return validateProfile({
    schema_version: 1,
    model: "zai-org/GLM-5.3-Flash",
    vllm_version: version,
    tensor_parallel_size: 4,
    kv_cache_dtype: "fp8",
    page_size_bytes: 13_045_120,
    kv_cache_groups: [
      {
        name: "full_attention",
        kind: "full_attention",
        num_layers: 11,
        block_size_tokens: 2176,
        prefix_cacheable: true,
        transfer_bytes_per_block: 11 * 1_114_112 + 11 * 71_808,
      },
      { name: "tail_ring", kind: "state", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: false, transfer_bytes_per_block: 11 * 2048 },
      kda("kda_0", 9),
      kda("kda_1", 9),
      kda("kda_2", 8),
      kda("kda_3", 8),
    ],
  });
}

/** A linear profile moving `bytesPerToken` bytes per token (vLLM 0.32.0, TP 1). */
export function linearTestProfile(bytesPerToken: number): Profile {
  return validateProfile({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: bytesPerToken });
}
