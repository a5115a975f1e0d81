export {
  profileFromHfConfig,
  KV_CACHE_DTYPES,
  DEFAULT_VLLM_VERSION,
  SAMPLER_BYTES_PER_VOCAB_ENTRY,
  type KvCacheDtype,
  type HfProfileOptions,
  type HfProfile,
} from "./derive.js";
export { KNOWN_ARCHITECTURES } from "./families.js";
export type { FamilyName } from "./family-parts.js";
export { layoutCache, DEFAULT_BLOCK_SIZE, MLA_BLOCK_SIZE, type LayerCache, type StateMixer, type LayoutOptions, type CacheLayout } from "./layout.js";
