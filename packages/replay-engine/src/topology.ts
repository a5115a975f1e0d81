import { poolGroupsForProfile, type PromptTokens } from "@kvsim/kv-pool";
import { InputError, tokens as asTokens, type KvCapacity, type Profile, type Spec } from "@kvsim/profile-schema";
import { payloadBytes, transferDelayMs, withDestination } from "@kvsim/transfer-rules";
import {
  Rank,
  RankConfigError,
  addSpeculationStats,
  kvBlockSizeTokens,
  type RankConfig,
  type RankMetrics,
  type RankRole,
  type SpeculationStats,
} from "@kvsim/vllm-scheduler";
import { dummyStepMs, pickDpRank } from "./data-parallel.js";
import type { TransferPricer } from "./coordinator.js";
import { Stage } from "./event-queue.js";
import { PassLog } from "./pass-log.js";
import { LockstepGroup } from "./lockstep.js";
import { createPlacement, type Placement } from "./placement.js";
import type { DataParallelPool, DataParallelReport, KvCapacityByRole } from "./report.js";
import { RoutingTally, type RoutingReport } from "./routing-report.js";
import { specProblemPath, specRankConfigs } from "./rank-configs.js";
import type { WorkerProbe } from "./timeseries.js";
import { placeOnNodes, TransferNetwork } from "./transfer-network.js";
import { OffloadTiers } from "./offload-tiers.js";

/** A rank as the replay drives it: one data-parallel rank of a spec worker (the worker itself when D = 1). */
export interface RankSlot {
  readonly role: RankRole;
  readonly stage: Stage;
  /** Its spec worker's index in the pool. */
  readonly id: number;
  /** Its data-parallel rank in the worker (0 when data_parallel_size is 1). */
  readonly dp: number;
  /** Same-time order among workers' events: id x D + dp (the worker id when D = 1). */
  readonly order: number;
  /** Names it in messages: `aggregated worker 0`, with `DP rank 1` when D > 1. */
  readonly label: string;
  /** The lockstep group it steps with (expert parallelism with D > 1); undefined: it steps alone. */
  readonly group: LockstepGroup | undefined;
  readonly rank: Rank;
  /** Its index among every rank of the replay, in creation order (the time series' worker index). */
  readonly sampleIndex: number;
  /** Its pool's cache group names. */
  readonly cacheGroups: readonly string[];
  busy: boolean;
  /** When busy: the end of its pass (or decode run) in flight. */
  passEndMs: number;
  /** Something changed since its last step() returned undefined. */
  dirty: boolean;
  /** When a wake-up is queued for it (an offload load landing), Infinity when none is. */
  wakeAtMs: number;
  /** Consecutive passes that changed nothing (a livelock guard). */
  idlePasses: number;
  metrics: RankMetrics | undefined;
  /** Times of its passes that emitted tokens (the ITL data). */
  readonly passLog: PassLog;
}

/** A worker of a pool as the spec counts them: one front end over its data-parallel ranks. */
export interface SpecWorker {
  readonly ranks: readonly RankSlot[];
  /** Their schedulers, as the data-parallel balancer reads them. */
  readonly schedulers: readonly Rank[];
  /** Requests placed on each rank. */
  readonly placed: number[];
  readonly group: LockstepGroup | undefined;
  readonly expertParallel: boolean;
}

/** The ranks, pools, routers and network a spec describes. `T`: what a network transfer carries. */
export interface Topology<T> {
  readonly disaggregated: boolean;
  /** Ranks that step on their own. */
  readonly soloRanks: RankSlot[];
  /** Lockstep groups (expert parallelism with D > 1). */
  readonly groups: LockstepGroup[];
  /** Every rank, in creation order (the sampled workers). */
  readonly allRanks: RankSlot[];
  /** Roles whose workers have more than one data-parallel rank. */
  readonly dpRoles: Set<RankRole>;
  /** The pool a request enters: aggregated workers, or the prefill pool. */
  readonly entryPool: SpecWorker[];
  readonly decodePool: SpecWorker[];
  readonly entryPlacement: Placement;
  readonly decodePlacement: Placement | undefined;
  readonly entryTally: RoutingTally;
  readonly decodeTally: RoutingTally | undefined;
  readonly price: TransferPricer;
  /** The shared network of handoffs, when the spec sets one; else each has a private pipe. */
  readonly network: TransferNetwork<T> | undefined;
  /** Each role's KV capacity, when the rank configurations report one. */
  readonly capacity: KvCapacityByRole | undefined;
  /** The KV offload tiers (spec.kv_offload), when some role has them. */
  readonly offload: OffloadTiers | undefined;
}

function resolveProfile(ref: Spec["profile"], profiles: ReadonlyMap<string, Profile> | undefined, role: string): Profile {
  if (typeof ref !== "string") return ref;
  const p = profiles?.get(ref);
  if (p === undefined) throw new Error(`the ${role} profile ${ref} was not provided to runReplay (see specProfilePaths)`);
  return p;
}

/** Builds a spec's ranks, pools, routers and network; throws an InputError for configurations the ranks refuse. */
export function buildTopology<T>(spec: Spec, specFile: string, profiles: ReadonlyMap<string, Profile> | undefined): Topology<T> {
  const soloRanks: RankSlot[] = [];
  const groups: LockstepGroup[] = [];
  const allRanks: RankSlot[] = [];
  const dpRoles = new Set<RankRole>();
  const entryPool: SpecWorker[] = [];
  const decodePool: SpecWorker[] = [];

  const offloadTiers = new OffloadTiers(spec);
  const addRank = (config: RankConfig, stage: Stage, id: number, dp: number, group: LockstepGroup | undefined): RankSlot => {
    let rank: Rank;
    try {
      const offload = offloadTiers.forRank(config, id);
      rank = new Rank(offload === undefined ? config : { ...config, offload });
    } catch (e) {
      if (e instanceof RankConfigError) {
        throw new InputError(
          specFile,
          e.problems.map((p) => ({ path: p.path, message: p.message.startsWith(p.role) ? p.message : `${p.role} rank: ${p.message}` })),
          { cause: e },
        );
      }
      throw e;
    }
    const d = config.engine.data_parallel_size;
    const label = d > 1 ? `${config.role} worker ${id} DP rank ${dp}` : `${config.role} worker ${id}`;
    const cacheGroups = poolGroupsForProfile(config.profile, config.engine).map((g) => g.name);
    const w: RankSlot = {
      role: config.role,
      stage,
      id,
      dp,
      order: id * d + dp,
      label,
      group,
      rank,
      sampleIndex: allRanks.length,
      cacheGroups,
      busy: false,
      passEndMs: 0,
      dirty: false,
      wakeAtMs: Infinity,
      idlePasses: 0,
      metrics: undefined,
      passLog: new PassLog(),
    };
    allRanks.push(w);
    if (group === undefined) soloRanks.push(w);
    else group.ranks.push(w);
    return w;
  };

  // A worker of the pool: its data_parallel_size ranks, in lockstep with enable_expert_parallel.
  const addWorker = (config: RankConfig, stage: Stage, id: number): SpecWorker => {
    const d = config.engine.data_parallel_size;
    const group = d > 1 && config.engine.enable_expert_parallel ? new LockstepGroup(dummyStepMs(config)) : undefined;
    const ranks: RankSlot[] = [];
    for (let dp = 0; dp < d; dp++) ranks.push(addRank(config, stage, id, dp, group));
    if (group !== undefined) groups.push(group);
    if (d > 1) dpRoles.add(config.role);
    return { ranks, schedulers: ranks.map((w) => w.rank), placed: new Array<number>(d).fill(0), group, expertParallel: config.engine.enable_expert_parallel };
  };

  const setupMs = spec.kv_transfer.setup_latency_ms ?? 0;
  let network: TransferNetwork<T> | undefined;
  let price: TransferPricer;
  let entryBlockSize: number;
  let decodeBlockSize = 0;
  const base = resolveProfile(spec.profile, profiles, "base");
  const roleProfiles =
    spec.topology.kind === "aggregated"
      ? { aggregated: base }
      : {
          prefill: resolveProfile(spec.prefill?.profile ?? spec.profile, profiles, "prefill"),
          decode: resolveProfile(spec.decode?.profile ?? spec.profile, profiles, "decode"),
        };
  const { configs, problems } = specRankConfigs(spec, roleProfiles);
  if (problems.length > 0)
    throw new InputError(
      specFile,
      problems.map((p) => ({ path: specProblemPath(spec, p.at), message: p.message })),
    );
  const capacity: { -readonly [R in keyof KvCapacityByRole]: KvCapacity } = {};
  const configOf = (role: RankRole): RankConfig => {
    const c = configs.find((r) => r.role === role);
    if (c === undefined) throw new Error(`no ${role} rank configuration`);
    if (c.capacity !== undefined) capacity[role] = c.capacity;
    return c.config;
  };
  const disaggregated = spec.topology.kind !== "aggregated";
  if (spec.topology.kind === "aggregated") {
    const config = configOf("aggregated");
    for (let i = 0; i < spec.topology.workers; i++) entryPool.push(addWorker(config, Stage.aggregated, i));
    entryBlockSize = kvBlockSizeTokens(base, config.engine);
    price = () => {
      throw new Error("an aggregated replay has no handoffs");
    };
  } else {
    const prefill = configOf("prefill");
    const decode = configOf("decode");
    const prefillProfile = prefill.profile;
    const decodeProfile = decode.profile;
    for (let i = 0; i < spec.topology.prefill.workers; i++) entryPool.push(addWorker(prefill, Stage.prefill, i));
    for (let i = 0; i < spec.topology.decode.workers; i++) decodePool.push(addWorker(decode, Stage.decode, i));
    entryBlockSize = kvBlockSizeTokens(prefillProfile, prefill.engine);
    decodeBlockSize = kvBlockSizeTokens(decodeProfile, decode.engine);
    network = createNetwork<T>(spec, specFile, setupMs, entryPool.length, decodePool.length, prefillProfile, decodeProfile);
    const linearBlock = { blockSizeTokens: prefill.engine.block_size };
    price = (terms, hitTokens) => {
      const priced = withDestination(terms, prefillProfile, asTokens(hitTokens), linearBlock);
      return { terms: priced, payloadBytes: payloadBytes(priced), delayMs: transferDelayMs(priced) };
    };
  }
  return {
    disaggregated,
    soloRanks,
    groups,
    allRanks,
    dpRoles,
    entryPool,
    decodePool,
    entryPlacement: createPlacement(spec.router, placementTargets(entryPool), entryBlockSize, disaggregated ? "prefill" : "aggregated"),
    decodePlacement: disaggregated ? createPlacement(spec.router, placementTargets(decodePool), decodeBlockSize, "decode") : undefined,
    entryTally: new RoutingTally(entryPool.length),
    decodeTally: disaggregated ? new RoutingTally(decodePool.length) : undefined,
    price,
    network,
    capacity: Object.keys(capacity).length > 0 ? capacity : undefined,
    offload: offloadTiers.any ? offloadTiers : undefined,
  };
}

/** A worker of D ranks offers the router its best rank's hit and the load of all its ranks. */
function placementTargets(pool: readonly SpecWorker[]) {
  return pool.map((fe) => ({
    prefixHitTokens: (p: PromptTokens) => {
      let hit = 0;
      for (const w of fe.ranks) hit = Math.max(hit, w.rank.peekPrefixHitTokens(p));
      return hit;
    },
    load: () => {
      let load = 0;
      for (const w of fe.ranks) {
        const l = w.rank.load();
        load += l.running + l.waiting;
      }
      return load;
    },
    kvUsage: () => {
      let usage = 0;
      for (const w of fe.ranks) usage += w.rank.metrics().usage;
      return usage / fe.ranks.length;
    },
  }));
}

/** The shared network of `kv_transfer.network`, with workers placed on nodes when it has `nodes`. */
function createNetwork<T>(
  spec: Spec,
  specFile: string,
  setupMs: number,
  p: number,
  d: number,
  prefillProfile: Profile,
  decodeProfile: Profile,
): TransferNetwork<T> | undefined {
  const net = spec.kv_transfer.network;
  if (net === undefined) return undefined;
  if (net.nodes === undefined) return new TransferNetwork(net, setupMs, p, d);
  const tp = (profile: Profile, n: number) => new Array<number>(n).fill(profile.tensor_parallel_size);
  const placed = placeOnNodes(net.nodes.gpus_per_node, net.nodes.fill, tp(prefillProfile, p), tp(decodeProfile, d));
  if (!placed.ok) throw new InputError(specFile, [{ path: "kv_transfer.network.nodes.gpus_per_node", message: placed.reason }]);
  return new TransferNetwork(net, setupMs, p, d, placed.placement);
}

/** The rank a request placed on a spec worker goes to: vLLM's data-parallel load balancer over its ranks. */
export function rankOf(worker: SpecWorker): RankSlot {
  const dp = worker.ranks.length === 1 ? 0 : pickDpRank(worker.schedulers);
  worker.placed[dp]!++;
  return worker.ranks[dp]!;
}

/** The time series' probes: one per rank, labelled `P0.1` (role, worker, DP rank) where a worker has several ranks. */
export function samplerProbes(allRanks: readonly RankSlot[]): WorkerProbe[] {
  const dpSizes = new Map<RankSlot, boolean>();
  for (const w of allRanks)
    dpSizes.set(
      w,
      allRanks.some((o) => o !== w && o.role === w.role && o.id === w.id),
    );
  return allRanks.map((w) => ({
    role: w.role,
    id: w.id,
    ...(dpSizes.get(w) === true ? { label: `${w.role === "aggregated" ? "W" : w.role === "prefill" ? "P" : "D"}${w.id}.${w.dp}` } : {}),
    groups: w.cacheGroups,
    load: () => w.rank.load(),
    groupPages: () => w.rank.kvGroupPages(),
  }));
}

/** The report's data_parallel section: each data-parallel pool's layout, placements and lockstep steps. */
export function dataParallelReport<T>(t: Topology<T>): DataParallelReport | undefined {
  if (t.dpRoles.size === 0) return undefined;
  const pool = (workers: readonly SpecWorker[]): DataParallelPool => ({
    data_parallel_size: workers[0]!.ranks.length,
    expert_parallel: workers[0]!.expertParallel,
    workers: workers.map((fe) => {
      const c = fe.group?.clock;
      return c === undefined ? { placed: [...fe.placed] } : { placed: [...fe.placed], steps: c.totalSteps, idle_steps: c.dummySteps, waves: c.waves };
    }),
  });
  const out: Partial<Record<RankRole, DataParallelPool>> = {};
  if (t.disaggregated) {
    if (t.dpRoles.has("prefill")) out.prefill = pool(t.entryPool);
    if (t.dpRoles.has("decode")) out.decode = pool(t.decodePool);
  } else out.aggregated = pool(t.entryPool);
  return out;
}

/** The report's routing section: the policy and how each pool's requests spread. */
export function routingReport<T>(policy: Spec["router"]["policy"], t: Topology<T>): RoutingReport {
  if (!t.disaggregated) return { policy, aggregated: t.entryTally.report("worker") };
  return { policy, prefill: t.entryTally.report("prefill worker"), decode: t.decodeTally!.report("decode worker") };
}

/** The drafts of every rank that speculated, summed (undefined when none did). */
export function speculationStats<T>(t: Topology<T>): SpeculationStats | undefined {
  let sum: SpeculationStats | undefined;
  for (const w of t.soloRanks) sum = addSpeculationStats(sum, w.rank.speculationStats());
  for (const g of t.groups) for (const w of g.ranks) sum = addSpeculationStats(sum, w.rank.speculationStats());
  return sum;
}
