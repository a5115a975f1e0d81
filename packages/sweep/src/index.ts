export {
  parseSetFlag,
  parseSpecPath,
  MAX_SPEC_PATH_KEYS,
  MAX_SPEC_PATH_CHARS,
  applyOverrides,
  specWithOverrides,
  SpecInputError,
  type SpecOverride,
  type PathKey,
  type SourcedIssue,
} from "./overrides.js";
export {
  parseGrid,
  expandGrid,
  checkGridPaths,
  rangeValues,
  MAX_GRID_POINTS,
  type Grid,
  type GridAxis,
  type GridPath,
  type GridPoint,
  type GridEntry,
} from "./grid.js";
export { okRow, badRow, rowsTable, type SweepRow, type PointStatus, type PointReport, type Cell } from "./rows.js";
export { pointTask, runPoint, type PointTask, type PointHost, type TraceRef } from "./point.js";
export {
  parseSla,
  meetsSla,
  metricValue,
  formatSla,
  slaPercentiles,
  slaStop,
  latencyStat,
  type LatencyStat,
  REPORT_METRICS,
  SlaSyntaxError,
  type SlaTerm,
} from "./sla.js";
export {
  findMaxRate,
  findMinAggregatedWorkers,
  findMinPdWorkers,
  roundRate,
  DEFAULT_RATE_TOLERANCE,
  MAX_RATE_DOUBLINGS,
  type Probe,
  type Evaluate,
  type MaxRateResult,
  type MinWorkersResult,
  type WorkerCounts,
} from "./search.js";
export { inlineExecutor, type PointExecutor } from "./executor.js";
export {
  runSweep,
  mapLimit,
  gpuCount,
  rateVariable,
  SearchSetupError,
  type SweepPlan,
  type SweepResult,
  type SweepProgressHooks,
  type SearchKind,
  type SearchOutcome,
  type ProfileTp,
} from "./run.js";
export { diffReports, canonicalMetric, type ReportDiff, type MetricChange, type SettingChange } from "./diff.js";
