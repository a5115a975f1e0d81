import { paretoFront, planWarnings, type PlanGoal, type PlanResult } from "@kvsim/plan";
import { renderPlanHtml } from "@kvsim/report-html";
import { formatSla, type SlaTerm } from "@kvsim/sweep";
import { chartAssets } from "../html-assets.js";

/** The plan's HTML page: its Pareto front, the ranked candidates and those not ranked. */
export function planHtml(
  result: PlanResult,
  run: { title: string; sla: readonly SlaTerm[]; goal: PlanGoal; notes: readonly string[]; wallMs: number },
): string {
  const c = result.counts;
  const timing = run.notes.find((n) => n.startsWith("timing: "))?.slice("timing: ".length);
  return renderPlanHtml({
    assets: chartAssets(),
    title: run.title,
    subtitle: [
      `SLA ${formatSla(run.sla)}; ${run.goal.kind === "rate" ? `the fewest GPUs serving ${run.goal.rps} req/s` : "the most req/s per GPU"}`,
      `${c.deployments} deployments, ${c.candidates} candidates, ${c.replays} replays, ${c.pruned} pruned, in ${(run.wallMs / 1000).toFixed(1)} s`,
    ],
    ...(timing === undefined ? {} : { timing }),
    warnings: planWarnings(result.rows),
    rows: result.rows,
    front: paretoFront(result.rows).map((r) => r.label),
    notes: run.notes.filter((n) => !n.startsWith("timing: ")),
  });
}
