import type { CacheGroup, EngineSettings, Profile } from "@kvsim/profile-schema";
import { DEFAULT_LINEAR_BLOCK_SIZE } from "@kvsim/profile-schema";

/**
 * The cache groups a rank's pool serves: a grouped profile's own groups; a linear profile as one
 * full-attention group "kv" of `engine.block_size` (default 16) tokens, prefix-cacheable,
 * moving kv_bytes_per_token x block size bytes per block.
 */
export function poolGroupsForProfile(profile: Profile, engine: EngineSettings): CacheGroup[] {
  if (profile.kv_cache_groups !== undefined) return profile.kv_cache_groups.map((g) => ({ ...g }));
  if (profile.kv_bytes_per_token === undefined) throw new RangeError("a profile needs kv_cache_groups or kv_bytes_per_token");
  const blockSize = engine.block_size ?? DEFAULT_LINEAR_BLOCK_SIZE;
  return [
    {
      name: "kv",
      kind: "full_attention",
      num_layers: 1,
      block_size_tokens: blockSize,
      prefix_cacheable: true,
      transfer_bytes_per_block: profile.kv_bytes_per_token * blockSize,
    },
  ];
}
