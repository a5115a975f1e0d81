import { SpecSchema, validateValue, type Profile, type RouterPolicy, type Spec } from "@kvsim/profile-schema";

/** The two layouts a plan compares. */
export type PlanTopology = "aggregated" | "disaggregated";

/** One pool of identical workers: how many, and the tensor parallelism of each. */
export interface Pool {
  readonly workers: number;
  readonly tp: number;
}

/** The engine settings a plan varies (the rest come from the base spec), and the router when it varies it. */
export interface EngineChoice {
  readonly max_num_seqs: number;
  readonly max_num_batched_tokens: number;
  /** A router policy with its default settings; absent: the base spec's router. */
  readonly router?: RouterPolicy;
}

/** A deployment: aggregated workers, or a prefill pool and a decode pool, each with its own TP. */
export type Deployment =
  | { readonly topology: "aggregated"; readonly pool: Pool; readonly engine: EngineChoice }
  | { readonly topology: "disaggregated"; readonly prefill: Pool; readonly decode: Pool; readonly engine: EngineChoice };

/** What a plan searches over. */
export interface PlanSpace {
  /** The GPU budget: no deployment uses more. */
  readonly gpus: number;
  /** Tensor-parallel sizes tried (each side of a P/D split takes any of them). */
  readonly tp: readonly number[];
  readonly topologies: readonly PlanTopology[];
  readonly maxNumSeqs: readonly number[];
  readonly maxNumBatchedTokens: readonly number[];
  /** Router policies tried (each with its default settings); absent or empty: the base spec's router. */
  readonly routers?: readonly RouterPolicy[];
  /**
   * `budget`: each layout as large as the budget allows (aggregated: floor(gpus / TP) workers; P/D:
   * every split that leaves no room for another worker), for a search of the highest rate per GPU.
   * `all`: every worker count within the budget, for the fewest GPUs meeting a given rate.
   */
  readonly sizes: "budget" | "all";
}

/** The model at one TP: its profile for one rank, or why it cannot run at that TP. */
export type ModelAt = (tp: number) => { readonly profile: Profile } | { readonly refused: string };

/** GPUs a deployment uses. */
export function deploymentGpus(d: Deployment): number {
  return d.topology === "aggregated" ? d.pool.workers * d.pool.tp : d.prefill.workers * d.prefill.tp + d.decode.workers * d.decode.tp;
}

/** `aggregated 4 x TP4` or `P/D 2 x TP4 + 1 x TP8`, then the engine settings. */
export function deploymentLabel(d: Deployment): string {
  const pool = (p: Pool) => `${p.workers} x TP${p.tp}`;
  const layout = d.topology === "aggregated" ? `aggregated ${pool(d.pool)}` : `P/D ${pool(d.prefill)} + ${pool(d.decode)}`;
  return `${layout}, seqs ${d.engine.max_num_seqs}, batch ${d.engine.max_num_batched_tokens}${d.engine.router === undefined ? "" : `, ${d.engine.router}`}`;
}

/** Every deployment of the space, in a fixed order (topology, TPs, engine settings, sizes). */
export function enumerateDeployments(space: PlanSpace): Deployment[] {
  const n = space.gpus;
  const out: Deployment[] = [];
  const tps = [...new Set(space.tp)].sort((a, b) => a - b);
  const engines: EngineChoice[] = [];
  const routers: (RouterPolicy | undefined)[] = space.routers === undefined || space.routers.length === 0 ? [undefined] : [...new Set(space.routers)];
  for (const s of [...new Set(space.maxNumSeqs)].sort((a, b) => a - b)) {
    for (const b of [...new Set(space.maxNumBatchedTokens)].sort((x, y) => x - y)) {
      for (const router of routers) engines.push({ max_num_seqs: s, max_num_batched_tokens: b, ...(router === undefined ? {} : { router }) });
    }
  }
  for (const topology of ["aggregated", "disaggregated"] as const) {
    if (!space.topologies.includes(topology)) continue;
    for (const engine of engines) {
      if (topology === "aggregated") {
        for (const tp of tps) {
          const most = Math.floor(n / tp);
          for (let w = space.sizes === "budget" ? most : 1; w <= most; w++) out.push({ topology, pool: { workers: w, tp }, engine });
        }
        continue;
      }
      for (const tpP of tps) {
        for (const tpD of tps) {
          for (let x = 1; x * tpP + tpD <= n; x++) {
            const most = Math.floor((n - x * tpP) / tpD);
            for (let y = space.sizes === "budget" ? most : 1; y <= most; y++) {
              // At the budget, a split with room for one more prefill worker is not a candidate: the larger one is.
              if (space.sizes === "budget" && n - x * tpP - y * tpD >= tpP) continue;
              out.push({ topology, prefill: { workers: x, tp: tpP }, decode: { workers: y, tp: tpD }, engine });
            }
          }
        }
      }
    }
  }
  return out;
}

/**
 * The spec of a deployment: the base spec's workload, router, transfer, timing and other engine
 * settings, with the deployment's topology, profiles (inline, one per TP) and engine choice. The
 * KV pool is sized from GPU memory (`num_gpu_blocks` is dropped), as vLLM sizes it; role overrides
 * of the base spec are replaced by the deployment's.
 */
export function deploymentSpec(base: Spec, d: Deployment, profileAt: (tp: number) => Profile): Spec {
  const engine: Record<string, unknown> = { ...base.engine };
  delete engine.num_gpu_blocks;
  const raw: Record<string, unknown> = {
    ...base,
    engine: { ...engine, max_num_seqs: d.engine.max_num_seqs, max_num_batched_tokens: d.engine.max_num_batched_tokens },
    ...(d.engine.router === undefined ? {} : { router: { policy: d.engine.router } }),
  };
  delete raw.prefill;
  delete raw.decode;
  if (d.topology === "aggregated") {
    raw.profile = profileAt(d.pool.tp);
    raw.topology = { kind: "aggregated", workers: d.pool.workers };
  } else {
    raw.profile = profileAt(d.prefill.tp);
    raw.topology = { kind: "disaggregated", prefill: { workers: d.prefill.workers }, decode: { workers: d.decode.workers } };
    raw.prefill = { profile: profileAt(d.prefill.tp) };
    raw.decode = { profile: profileAt(d.decode.tp) };
  }
  // Through the schema again: the spec a point runs is validated where it runs, so it must be valid here.
  return validateValue(SpecSchema, JSON.parse(JSON.stringify(raw)), "plan");
}
