import type { Profile, Spec } from "@kvsim/profile-schema";
import { specRankConfigs, type RoleProfiles } from "@kvsim/replay-engine";
import type { SlaTerm } from "@kvsim/sweep";
import { estimateCapacity, type CapacityEstimate } from "./estimate.js";
import { deploymentGpus, deploymentLabel, deploymentSpec, enumerateDeployments, type Deployment, type ModelAt, type PlanSpace } from "./space.js";
import type { WorkloadStats } from "./workload.js";

/** A deployment the plan may replay: its spec, and its capacity estimate. */
export interface Candidate {
  /** Its index in the enumeration (a fixed order of the space). */
  readonly id: number;
  readonly deployment: Deployment;
  readonly label: string;
  readonly gpus: number;
  /** The spec a replay runs, profiles inline; the rate is set per replay. */
  readonly spec: Spec;
  readonly estimate: CapacityEstimate;
  /** KV cache tokens of one rank, per role (vLLM's "GPU KV cache size"). */
  readonly kvTokens: Readonly<Record<string, number>>;
}

/** A deployment the plan does not replay, and why. */
export interface Refusal {
  readonly id: number;
  readonly deployment: Deployment;
  readonly label: string;
  readonly gpus: number;
  /** `does-not-fit`: the model or a useful KV pool does not fit the GPU at this TP; `refused`: the spec's rules refuse it; `infeasible`: the SLA cannot hold at any load. */
  readonly kind: "does-not-fit" | "refused" | "infeasible";
  readonly reason: string;
}

export interface CandidateSet {
  readonly candidates: Candidate[];
  readonly refused: Refusal[];
}

const roleProfiles = (spec: Spec): RoleProfiles => {
  const inline = (p: Spec["profile"] | undefined): Profile | undefined => (typeof p === "object" ? p : undefined);
  return spec.topology.kind === "aggregated"
    ? { aggregated: inline(spec.profile) }
    : { prefill: inline(spec.prefill?.profile ?? spec.profile), decode: inline(spec.decode?.profile ?? spec.profile) };
};

/**
 * Every deployment of the space with its spec checked by the same rules a replay applies
 * (`specRankConfigs`), its KV pool sized from GPU memory and its capacity estimated. A deployment
 * is refused when the model cannot run at a TP (heads that do not split, weights that do not
 * fit), when its KV pool cannot hold the workload's longest request, when the spec's rules refuse
 * it, or when the SLA cannot hold at any load (see estimateCapacity).
 */
export function planCandidates(base: Spec, model: ModelAt, space: PlanSpace, stats: WorkloadStats, sla: readonly SlaTerm[]): CandidateSet {
  const byTp = new Map<number, ReturnType<ModelAt>>();
  const at = (tp: number) => {
    let m = byTp.get(tp);
    if (m === undefined) {
      m = model(tp);
      byTp.set(tp, m);
    }
    return m;
  };
  const candidates: Candidate[] = [];
  const refused: Refusal[] = [];
  enumerateDeployments(space).forEach((deployment, id) => {
    const label = deploymentLabel(deployment);
    const gpus = deploymentGpus(deployment);
    const refuse = (kind: Refusal["kind"], reason: string) => refused.push({ id, deployment, label, gpus, kind, reason });
    const tps = deployment.topology === "aggregated" ? [deployment.pool.tp] : [deployment.prefill.tp, deployment.decode.tp];
    for (const tp of tps) {
      const m = at(tp);
      if ("refused" in m) return refuse("does-not-fit", `TP${tp}: ${m.refused}`);
    }
    const profileAt = (tp: number) => (at(tp) as { profile: Profile }).profile;
    let spec: Spec;
    try {
      spec = deploymentSpec(base, deployment, profileAt);
    } catch (e) {
      return refuse("refused", e instanceof Error ? e.message : String(e));
    }
    const { configs, problems } = specRankConfigs(spec, roleProfiles(spec));
    if (problems.length > 0) {
      // kvCapacity's refusal when the weights and activations leave no pages (profile-schema's capacity.ts).
      const memory = problems.find((p) => p.message.includes("leaves no room for the KV cache"));
      const text = problems.map((p) => `${p.at.in === "spec" ? p.at.path.join(".") : `${p.at.role} profile ${p.at.path}`}: ${p.message}`).join("; ");
      return refuse(memory === undefined ? "refused" : "does-not-fit", text);
    }
    const kvTokens: Record<string, number> = {};
    for (const c of configs) {
      const tokens = c.capacity?.kv_cache_tokens;
      if (tokens === undefined) continue;
      kvTokens[c.role] = tokens;
      if (tokens < stats.maxRequestTokens) {
        return refuse(
          "does-not-fit",
          `a ${c.role} rank's KV cache holds ${tokens.toLocaleString("en-US")} tokens, fewer than the workload's longest request (${stats.maxRequestTokens.toLocaleString("en-US")})`,
        );
      }
    }
    const estimate = estimateCapacity(deployment, configs, stats, sla);
    if (estimate.infeasible !== undefined) return refuse("infeasible", estimate.infeasible);
    candidates.push({ id, deployment, label, gpus, spec, estimate, kvTokens });
  });
  return { candidates, refused };
}
