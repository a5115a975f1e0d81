import type { Spec } from "@kvsim/profile-schema";
import type { PointExecutor, PointTask, SlaTerm, SweepRow } from "@kvsim/sweep";
import { planCandidates } from "./candidates.js";
import { rankPlan, type PlanRow } from "./rank.js";
import { searchPlan, type PlanGoal } from "./search.js";
import { enumerateDeployments, type ModelAt, type PlanSpace } from "./space.js";
import { PlanSetupError, type WorkloadStats } from "./workload.js";

export interface PlanInput {
  /** The base spec: workload, router, transfer, timing and engine settings the plan keeps (its engine names the GPU). */
  readonly base: Spec;
  readonly model: ModelAt;
  readonly space: PlanSpace;
  readonly stats: WorkloadStats;
  readonly sla: readonly SlaTerm[];
  readonly goal: PlanGoal;
  readonly executor: PointExecutor;
  /** The runnable task of a spec (the trace by reference, the SLA's percentiles), or its refused row. */
  readonly task: (point: number, spec: Spec) => Promise<PointTask | SweepRow>;
  readonly pricePerGpuHour?: number;
  /** See PlanSearchOptions. */
  readonly margin?: number;
  readonly roundSize?: number;
  /** The most deployments the space may hold (default 5,000): a larger one is refused before anything runs. */
  readonly maxDeployments?: number;
  /** Told once the candidates are known, then after every replay. */
  readonly onCandidates?: (candidates: number, refused: number) => void;
  readonly onReplay?: (row: SweepRow) => void;
}

export interface PlanResult {
  /** Best first (see rankPlan). */
  readonly rows: PlanRow[];
  /** The specs of the rows that were replayed, by label (a ranked row's spec runs at `rate_rps` with specAtRate). */
  readonly specs: ReadonlyMap<string, Spec>;
  readonly counts: {
    /** Deployments in the space. */
    readonly deployments: number;
    /** Not replayed: do not fit, refused, or infeasible at any load. */
    readonly refused: number;
    readonly candidates: number;
    /** Candidates a single replay ruled out, or skipped without one. */
    readonly pruned: number;
    readonly replays: number;
  };
}

/**
 * Plans a deployment: enumerates the space, checks and estimates every deployment, searches the
 * candidates (pruning what cannot win) and ranks them. Reads no file: the caller gives the model
 * at each TP, the workload's stats and the executor that runs the replays.
 */
export async function runPlan(input: PlanInput): Promise<PlanResult> {
  const size = enumerateDeployments(input.space).length;
  const most = input.maxDeployments ?? 5000;
  if (size > most) {
    throw new PlanSetupError(
      `the space holds ${size.toLocaleString("en-US")} deployments, more than ${most.toLocaleString("en-US")}: list fewer TPs, topologies or engine settings, or a smaller GPU budget`,
    );
  }
  const { candidates, refused } = planCandidates(input.base, input.model, input.space, input.stats, input.sla);
  input.onCandidates?.(candidates.length, refused.length);
  const { outcomes, replays } = await searchPlan({
    candidates,
    stats: input.stats,
    sla: input.sla,
    goal: input.goal,
    executor: input.executor,
    task: input.task,
    ...(input.margin === undefined ? {} : { margin: input.margin }),
    ...(input.roundSize === undefined ? {} : { roundSize: input.roundSize }),
    ...(input.onReplay === undefined ? {} : { onReplay: input.onReplay }),
  });
  const rows = rankPlan(outcomes, refused, input.sla, input.goal, input.pricePerGpuHour);
  return {
    rows,
    specs: new Map(candidates.map((c) => [c.label, c.spec])),
    counts: {
      deployments: candidates.length + refused.length,
      refused: refused.length,
      candidates: candidates.length,
      pruned: outcomes.filter((o) => o.status === "pruned" || o.status === "skipped").length,
      replays,
    },
  };
}
