export { runPlan, type PlanInput, type PlanResult } from "./plan.js";
export {
  enumerateDeployments,
  deploymentGpus,
  deploymentLabel,
  type Deployment,
  type Pool,
  type EngineChoice,
  type PlanSpace,
  type PlanTopology,
  type ModelAt,
} from "./space.js";
export { planCandidates, type Candidate, type Refusal, type CandidateSet } from "./candidates.js";
export { estimateCapacity, type CapacityEstimate } from "./estimate.js";
export { searchPlan, RateLadder, ladderSearch, type PlanGoal, type CandidateOutcome, type PlanSearchOptions, type PlanSearchResult } from "./search.js";
export { rankPlan, whyLines, runnerUp, goodputSla, paretoFront, planWarnings, type PlanRow } from "./rank.js";
export { traceStats, syntheticStats, specAtRate, PlanSetupError, type WorkloadStats } from "./workload.js";
