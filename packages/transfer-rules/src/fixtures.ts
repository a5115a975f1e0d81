// Test-only profiles (not exported from the package). Each is validated by the real schema so a
// fixture cannot drift from what a user could write.
import { validateProfile, type CacheGroup, type Profile } from "@kvsim/profile-schema";

/** GLM-5.3-Flash, TP 4, fp8 (docs/rules/grouped-pd.md §2); the table's arithmetic is in the fixture. */
export { glmFlashProfile as glmProfile, linearTestProfile as linearProfile } from "@kvsim/profile-schema/testing";

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
