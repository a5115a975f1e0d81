export { runReplay, specProfilePaths, type ReplayInput, type ReplayResult, type ReplayProgress, type StuckRequest } from "./replay.js";
export {
  withWallTime,
  canonicalReportJson,
  NON_CANONICAL_KEYS,
  type ReplayReport,
  type RequestRecord,
  type RequestStatus,
  type HandoffRecord,
} from "./report.js";
