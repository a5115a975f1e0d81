export { parseMeasured, detectMeasuredFormat, MEASURED_FORMAT_LACKS, type MeasuredFormat, type MeasuredRequest, type MeasuredRun } from "./measured.js";
export {
  compareRuns,
  compareValue,
  selectRequests,
  COMPARE_METRICS,
  COMPARE_STATS,
  type Comparison,
  type CompareMetric,
  type CompareStat,
  type CompareSelection,
  type CompareValue,
  type LatencyComparison,
  type ThroughputComparison,
} from "./compare.js";
export { mean, percentile } from "./stats.js";
export {
  fitTiming,
  fitPart,
  replayWith,
  replayTiming,
  linearFloors,
  LINEAR_ADVICE,
  type LinearFloors,
  simulatedRun,
  clockStartFor,
  checkMeasuredAgainstWorkload,
  roundCoefficients,
  COEFFICIENT_NAMES,
  FIT_TARGETS,
  MIN_FIT_REQUESTS,
  type FitInput,
  type FitResult,
  type LinearCoefficients,
  type ExpertsTerm,
  type ScalarCoefficient,
} from "./fit.js";
export { regressionStart, MAX_REGRESSION_CELLS, MAX_REGRESSION_VISITS, regressionGridMs } from "./fit-regression.js";
export { nelderMead, type NelderMeadOptions, type NelderMeadResult } from "./nelder-mead.js";
export { nonNegativeLeastSquares } from "./nnls.js";
export { measuredToTrace, parsePromptTokens, type PromptTokens } from "./trace-from.js";
export { pickupWaits, fromEnginePickup, type PickupTimes, type SimulatedClockStart } from "./pickup.js";
export {
  parseStageSummary,
  looksLikeStageSummary,
  STAGE_SUMMARY_LACKS,
  type StageRun,
  type StageSummary,
  type StageDistribution,
  type StageEngine,
  type SharedPrefixWorkload,
} from "./stage-summary.js";
export {
  stageWorkload,
  stageMetrics,
  chatTemplateTokens,
  stageOutputTokens,
  stageRequestId,
  type StageWorkloadOptions,
  type StageComparison,
} from "./stage-workload.js";
export {
  fitRoofline,
  clientClock,
  ownTargets,
  FRONTEND_TERM,
  ROOFLINE_ADVICE,
  type CalibrationData,
  type CalibrationRun,
  type RooflineFitInput,
  type RooflineFitResult,
  type RunFit,
} from "./fit-roofline.js";
export {
  missedTargetWarnings,
  identifiabilityWarnings,
  symmetricEigen,
  MISS_TOLERANCE,
  FLAT_TOLERANCE,
  type FitWarning,
  type OwnTargets,
} from "./fit-diagnostics.js";
export {
  deploymentFromMeta,
  deploymentFromServeArgs,
  specFromVllm,
  gpuForDevice,
  parseTokenCount,
  splitArgs,
  type VllmDeployment,
  type SpecFromVllmOptions,
} from "./spec-from-vllm.js";
export { fitAcceptance, acceptanceRateFor, tokensPerStep, type AcceptanceFit } from "./acceptance.js";
