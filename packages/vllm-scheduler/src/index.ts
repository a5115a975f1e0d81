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
  StepResult,
} from "./contract.js";
export {
  createTimingModel,
  type TimingModel,
  type TimingEstimate,
  type PrefillBatch,
  type DecodeBatch,
} from "./timing-model.js";
