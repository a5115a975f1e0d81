export { parseMeasured, detectMeasuredFormat, MEASURED_FORMAT_LACKS, type MeasuredFormat, type MeasuredRequest, type MeasuredRun } from "./measured.js";
export {
  compareRuns,
  selectRequests,
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
  type LinearFloors,
  simulatedRun,
  clockStartFor,
  checkMeasuredAgainstWorkload,
  COEFFICIENT_NAMES,
  type FitInput,
  type FitResult,
  type LinearCoefficients,
  type ExpertsTerm,
  type ScalarCoefficient,
} from "./fit.js";
export { regressionStart } from "./fit-regression.js";
export { nelderMead, type NelderMeadOptions, type NelderMeadResult } from "./nelder-mead.js";
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
export { stageWorkload, stageMetrics, chatTemplateTokens, type StageWorkloadOptions, type StageComparison } from "./stage-workload.js";
export { fitRoofline, type CalibrationData, type CalibrationRun, type RooflineFitInput, type RooflineFitResult, type RunFit } from "./fit-roofline.js";
export { MISS_TOLERANCE, FLAT_TOLERANCE, type FitWarning } from "./fit-diagnostics.js";
export { deploymentFromMeta, deploymentFromServeArgs, specFromVllm, gpuForDevice, type VllmDeployment, type SpecFromVllmOptions } from "./spec-from-vllm.js";
export { fitAcceptance, type AcceptanceFit } from "./acceptance.js";
