export { runReplay, specProfilePaths, type ReplayInput, type ReplayResult, type ReplayProgress, type StuckRequest } from "./replay.js";
export {
  specRankConfigs,
  type SpecProblem,
  type SpecProblemPlace,
  type RoleProfiles,
  type RoleRankConfig,
  type SpecRankConfigs,
  type SpecRankConfigsOptions,
} from "./rank-configs.js";
export {
  withWallTime,
  canonicalReportJson,
  CANONICAL_KEYS,
  NON_CANONICAL_KEYS,
  DEFAULT_PERCENTILES,
  percentileKey,
  type MetricName,
  type CutoffSummary,
  type ReasonGroup,
  type VllmSummaryKeys,
  type PercentileKeys,
  type ReplayReport,
  type RequestRecord,
  type RequestStatus,
  type TtftClock,
  type HandoffRecord,
  type KvCapacityByRole,
  type DataParallelReport,
  type DataParallelPool,
  type DataParallelWorker,
  type LatencyQuantiles,
  type SpeculativeDecodingReport,
  type OffloadRecord,
} from "./report.js";
export type { KvOffloadReport, KvOffloadTierReport } from "./offload-tiers.js";
export {
  IMBALANCE_SHARE_FACTOR,
  IDLE_SHARE_FACTOR,
  IMBALANCE_MIN_REQUESTS_PER_WORKER,
  type RoutingReport,
  type RoutingPool,
  type RoutingWorker,
} from "./routing-report.js";
export { SATURATION_RATE_RATIO, SATURATION_TTFT_GROWTH, SATURATION_MIN_REQUESTS, type SaturationCheck } from "./saturation.js";
export { FairShareNetwork, type Flow, type LinkStats } from "./fair-share.js";
export {
  TransferNetwork,
  placeOnNodes,
  type NetworkTransfer,
  type NodePlacement,
  type NetworkReport,
  type NetworkWorkerReport,
  type NetworkHandoffStats,
  type TransferPath,
} from "./transfer-network.js";
export {
  timeSeriesTable,
  timeSeriesRecords,
  DEFAULT_START_MS,
  MAX_ADAPTIVE_SAMPLES,
  type TimeSeries,
  type WorkerSeries,
  type DeploymentSeries,
  type OffloadSeries,
  MAX_SERIES_VALUES,
  TooManySamples,
} from "./timeseries.js";
export type { SlaStop, SlaStopTerm } from "./sla-stop.js";
