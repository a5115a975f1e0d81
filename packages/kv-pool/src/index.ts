export type {
  BlockHash,
  KvPoolOptions,
  PromptTokens,
  KvSequence,
  PrefixHit,
  AllocateRequest,
  DestinationReservation,
  KvEvent,
  PoolMetrics,
  KvCacheManagerApi,
} from "./contract.js";
