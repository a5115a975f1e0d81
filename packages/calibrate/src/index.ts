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
