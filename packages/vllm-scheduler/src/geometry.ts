import { DEFAULT_LINEAR_BLOCK_SIZE, isGroupedProfile, type EngineSettings, type Profile } from "@kvsim/profile-schema";

/**
 * The block size the rank counts KV tokens in: the full-attention block size of a grouped profile
 * (the first group's when it has no full-attention group), or the engine's block size for a linear
 * profile (default 16).
 */
export function kvBlockSizeTokens(profile: Profile, engine: EngineSettings): number {
  if (isGroupedProfile(profile)) {
    const full = profile.kv_cache_groups.find((g) => g.kind === "full_attention") ?? profile.kv_cache_groups[0]!;
    return full.block_size_tokens;
  }
  return engine.block_size ?? DEFAULT_LINEAR_BLOCK_SIZE;
}
