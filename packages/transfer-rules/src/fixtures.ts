// Test-only profiles (not exported from the package). Each is validated by the real schema so a
// fixture cannot drift from what a user could write.
import { validateProfile, type CacheGroup, type Profile } from "@kvsim/profile-schema";

/**
 * GLM-5.3-Flash, TP 4, fp8 cache, built from the oracle table of grouped-pd.md section 2:
 * full_attention 11 x 1,114,112 + 11 x 71,808 = 13,045,120 bytes per block;
 * tail_ring (state, not prefix-cacheable) 11 x 2,048 = 22,528;
 * kda_0, kda_1 (Mamba-type state) 9 x 1,085,440 = 9,768,960; kda_2, kda_3 8 x 1,085,440 = 8,683,520.
 * On 0.32.0 the KDA groups carry `prefill_checkpoint_blocks: 1`.
 */
export function glmProfile(version: "0.31.0" | "0.32.0"): Profile {
  const checkpoint = version === "0.32.0" ? { prefill_checkpoint_blocks: 1 } : {};
  const kda = (name: string, layers: number) => ({
    name,
    kind: "state",
    num_layers: layers,
    block_size_tokens: 2176,
    prefix_cacheable: true,
    transfer_bytes_per_block: layers * 1_085_440,
    ...checkpoint,
  });
  return validateProfile({
    schema_version: 1,
    model: "zai-org/GLM-5.3-Flash",
    vllm_version: version,
    tensor_parallel_size: 4,
    kv_cache_dtype: "fp8",
    page_size_bytes: 13_045_120,
    kv_cache_groups: [
      { name: "full_attention", kind: "full_attention", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 11 * 1_114_112 + 11 * 71_808 },
      { name: "tail_ring", kind: "state", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: false, transfer_bytes_per_block: 11 * 2048 },
      kda("kda_0", 9),
      kda("kda_1", 9),
      kda("kda_2", 8),
      kda("kda_3", 8),
    ],
  });
}

/** A grouped profile from its groups (page size: the largest group payload). */
export function groupedProfile(groups: readonly CacheGroup[]): Profile {
  return validateProfile({
    schema_version: 1,
    model: "test/grouped",
    vllm_version: "0.32.0",
    tensor_parallel_size: 1,
    page_size_bytes: Math.max(...groups.map((g) => g.transfer_bytes_per_block ?? 1)),
    kv_cache_groups: groups,
  });
}

/** A linear profile moving `bytesPerToken` bytes per token. */
export function linearProfile(bytesPerToken: number): Profile {
  return validateProfile({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: bytesPerToken });
}

export const fullGroup = (block: number, bytesPerBlock: number, name = "fa"): CacheGroup => ({
  name,
  kind: "full_attention",
  num_layers: 1,
  block_size_tokens: block,
  prefix_cacheable: true,
  transfer_bytes_per_block: bytesPerBlock,
});

export const windowGroup = (window: number, block: number, bytesPerBlock: number, name = "sw"): CacheGroup => ({
  name,
  kind: "sliding_window",
  num_layers: 1,
  block_size_tokens: block,
  window_tokens: window,
  prefix_cacheable: true,
  transfer_bytes_per_block: bytesPerBlock,
});

export const stateGroup = (block: number, bytesPerBlock: number, mambaType: boolean, name = mambaType ? "mamba" : "ring"): CacheGroup => ({
  name,
  kind: "state",
  num_layers: 1,
  block_size_tokens: block,
  prefix_cacheable: mambaType,
  transfer_bytes_per_block: bytesPerBlock,
});
