export { TierStore, tierConfigs, type TierConfig, type TierCounters, type TierEntry, type EvictedSink } from "./tier-store.js";
export { KvOffload, LookupMemo, type OffloadHit, type OffloadLoad, type OffloadKeySource } from "./offload.js";
