export { Rank, checkRankConfig } from "./rank.js";
export { kvBlockSizeTokens } from "./geometry.js";
export { RankConfigError, type RankConfigProblem } from "./rank-config.js";
export {
  createTimingModel,
  paddedBatchSize,
  type TimingModel,
  type StepBatch,
  type StepTiming,
  type TimingEstimate,
  type PrefillBatch,
  type DecodeBatch,
  type LinearTimingCoefficients,
} from "./timing-model.js";
export {
  ROOFLINE_DEFAULTS,
  ROOFLINE_DEFAULTS_PROVENANCE,
  ROOFLINE_PARAM_NAMES,
  rooflineBreakdown,
  rooflineRank,
  rooflineParams,
  rooflineGpu,
  rooflineGpuProblem,
  type RooflineGpu,
  type RooflineParams,
  type RooflineRank,
  type RooflineLoad,
  type RooflineBreakdown,
} from "./roofline.js";
export { sampledTokenId } from "./token-ids.js";
export { IdTable } from "./id-table.js";
export type { DecodeRun, DecodeRunLimits, DecodeRunPages } from "./decode-run.js";
export { TimingRefusedError } from "./grid.js";
export type {
  RankRole,
  RankConfig,
  RequestInput,
  Command,
  CommandType,
  LifecycleFact,
  OffloadLoadStarted,
  TokenEmitted,
  Admission,
  RankMetrics,
  Effects,
  CommandOutcome,
  ScheduledWork,
  StepResult,
} from "./contract.js";
export { Speculation, addSpeculationStats, type SpeculationStats } from "./speculative.js";
export { SpeculativeTiming } from "./speculative-timing.js";
