export { TierStore, TierEntry, tierConfigs, type TierConfig, type TierCounters, type EvictedBlock } from "./tier-store.js";
export { KvOffload, type OffloadHit, type OffloadLoad } from "./offload.js";
