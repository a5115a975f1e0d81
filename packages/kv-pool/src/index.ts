export { KvCacheManager } from "./kv-cache-manager.js";
export { createPromptTokens, createPathPrompt, promptHashes, promptPrefix } from "./prompt-tokens.js";
export { computeBlockHashes } from "./hashing.js";
export { poolGroupsForProfile } from "./pool-groups.js";
export type {
  BlockHash,
  KvPoolOptions,
  PromptTokens,
  PromptHashes,
  KvSequence,
  OutputTokenIds,
  PrefixHit,
  AllocateRequest,
  DestinationReservation,
  KvEvent,
  PoolMetrics,
  GroupPages,
  PrefillChunking,
  KvCacheManagerApi,
  BlockListener,
  BlockKeyView,
} from "./contract.js";
export { BlockHashTable } from "./block-hash-table.js";
