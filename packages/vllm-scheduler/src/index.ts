export { Rank } from "./rank.js";
export { RankConfigError, type RankConfigProblem } from "./rank-config.js";
export {
  createTimingModel,
  type TimingModel,
  type TimingEstimate,
  type PrefillBatch,
  type DecodeBatch,
} from "./timing-model.js";
export { sampledTokenId } from "./token-ids.js";
export type {
  RankRole,
  RankConfig,
  RequestInput,
  Command,
  CommandType,
  LifecycleFact,
  TokenEmitted,
  Admission,
  RankMetrics,
  Effects,
  CommandOutcome,
  ScheduledWork,
  StepResult,
} from "./contract.js";
