/**
 * The spec's KV offload tiers (kv_offload, per role) as the replay builds them: one set of tiers per
 * rank, or one per node of a pool when a tier is `shared: node`, each a kv-offload TierStore; the
 * loads the ranks report, and the report's `kv_offload` section.
 */
import { KvOffload, TierStore, tierConfigs } from "@kvsim/kv-offload";
import { poolGroupsForProfile } from "@kvsim/kv-pool";
import type { EngineSettings, KvOffload as KvOffloadSpec, Profile, Spec } from "@kvsim/profile-schema";
import type { OffloadLoadStarted, RankConfig, RankRole } from "@kvsim/vllm-scheduler";
import { percentile } from "./stats.js";
import type { TierProbe } from "./timeseries.js";

/** One tier of one role over the replay, summed over its instances (per rank, or per node). */
export interface KvOffloadTierReport {
  readonly name: string;
  /** P/D: the role whose workers it serves. */
  readonly role?: "prefill" | "decode";
  readonly store: "write_through" | "on_evict";
  readonly shared: "worker" | "node";
  /** Its instances: one per rank, or one per node. */
  readonly instances: number;
  /** One instance's capacity, as the spec gives it (a worker's, or a node's). */
  readonly capacity_bytes: number;
  /** Loads that read from it, the prompt tokens it served, and what they moved. */
  readonly loads: number;
  readonly tokens_served: number;
  readonly blocks_loaded: number;
  readonly bytes_loaded: number;
  readonly blocks_stored: number;
  readonly bytes_stored: number;
  readonly blocks_evicted: number;
  /** Stores refused for room (every held block pinned by a load or still being stored). */
  readonly blocks_dropped: number;
  /** The fullest any instance got, bytes. */
  readonly peak_bytes: number;
}

/**
 * The replay's offload: per tier its traffic, and the loads' delays (start to last byte). Bytes are
 * a worker's (every TP rank's shard), as the spec's capacity counts them.
 */
export interface KvOffloadReport {
  readonly tiers: readonly KvOffloadTierReport[];
  /** Loads started (a request that loads again after a preemption counts again). */
  readonly loads: number;
  readonly tokens_served: number;
  readonly mean_load_ms: number | null;
  readonly p90_load_ms: number | null;
}

interface Instance {
  readonly role: RankRole;
  readonly tier: number;
  readonly store: TierStore;
  /** TP ranks: the instance models one rank's shard, so a worker's bytes are TP times its own. */
  readonly tp: number;
}

/** The offload section a role's ranks use: the role's own, else the spec's. */
function offloadSpecOf(spec: Spec, role: RankRole): KvOffloadSpec | undefined {
  return (role === "aggregated" ? undefined : spec[role]?.kv_offload) ?? spec.kv_offload;
}

/**
 * Why a role's ranks cannot have the spec's offload tiers, as [path, message]: a tier serves prefix
 * hits (prefix caching must be on) and prices its blocks by each cache group's bytes.
 */
export function offloadProblems(
  spec: Spec,
  role: RankRole,
  profile: Profile,
  engine: EngineSettings,
): { path: string[]; inProfile: boolean; message: string }[] {
  const section = offloadSpecOf(spec, role);
  if (section === undefined) return [];
  const where = role !== "aggregated" && spec[role]?.kv_offload !== undefined ? [role, "kv_offload"] : ["kv_offload"];
  const out: { path: string[]; inProfile: boolean; message: string }[] = [];
  if (!engine.enable_prefix_caching) {
    out.push({ path: where, inProfile: false, message: `${role} rank: offload tiers serve prefix hits; they need engine.enable_prefix_caching` });
  }
  const groups = poolGroupsForProfile(profile, engine);
  const bs = section.block_size;
  if (bs !== undefined) {
    const off = groups.filter((g) => bs % g.block_size_tokens !== 0).map((g) => `${g.name} (${g.block_size_tokens})`);
    if (off.length > 0) {
      out.push({
        path: [...where, "block_size"],
        inProfile: false,
        message: `${role} rank: ${bs} tokens is not a multiple of the block of every cache group: ${off.join(", ")}`,
      });
    }
    if (section.tiers[0]!.store === "on_evict" && groups.some((g) => g.block_size_tokens !== bs)) {
      out.push({
        path: [...where, "block_size"],
        inProfile: false,
        message: `${role} rank: a first tier with store: on_evict takes the GPU pool's evictions, one GPU block at a time; block_size must be the GPU block`,
      });
    }
  }
  groups.forEach((g, i) => {
    if (g.transfer_bytes_per_block === undefined) {
      out.push({
        path: [`kv_cache_groups[${i}].transfer_bytes_per_block`],
        inProfile: true,
        message: `${role} rank: kv_offload prices the blocks a tier holds by each cache group's transfer_bytes_per_block; group ${g.name} has none`,
      });
    }
  });
  return out;
}

export class OffloadTiers {
  private readonly instances: Instance[] = [];
  private readonly nodeStores = new Map<string, TierStore>();
  private readonly delays: number[] = [];
  private tokens = 0;

  constructor(private readonly spec: Spec) {}

  /** True when some role has tiers. */
  get any(): boolean {
    return this.spec.kv_offload !== undefined || this.spec.prefill?.kv_offload !== undefined || this.spec.decode?.kv_offload !== undefined;
  }

  /** The offload of one rank of worker `workerId` (undefined when its role has no tiers). */
  forRank(config: RankConfig, workerId: number): KvOffload | undefined {
    const section = offloadSpecOf(this.spec, config.role);
    if (section === undefined) return undefined;
    const tp = config.profile.tensor_parallel_size;
    const stores = tierConfigs(section, tp).map((c, i) => {
      if (section.tiers[i]!.shared === "node") {
        const node = Math.floor(workerId / section.workers_per_node!);
        const key = `${config.role}:${i}:${node}`;
        let s = this.nodeStores.get(key);
        if (s === undefined) {
          s = new TierStore(c);
          this.nodeStores.set(key, s);
          this.instances.push({ role: config.role, tier: i, store: s, tp });
        }
        return s;
      }
      const s = new TierStore(c);
      this.instances.push({ role: config.role, tier: i, store: s, tp });
      return s;
    });
    return new KvOffload(stores, poolGroupsForProfile(config.profile, config.engine), config.engine.enable_prefix_caching, section.block_size);
  }

  /** A rank started a load. */
  onLoad(l: OffloadLoadStarted): void {
    this.delays.push(l.doneMs - l.startMs);
    this.tokens += l.tokens - l.gpuHitTokens;
  }

  /** The tier names of a role's ranks, in order. */
  tierNames(role: RankRole): string[] {
    return offloadSpecOf(this.spec, role)?.tiers.map((t) => t.name) ?? [];
  }

  /**
   * The time series' probe: each instance's bytes held now (a worker's), in creation order, written
   * into the sample's row, O(instances) (a TierStore keeps its byte count).
   */
  probe(): TierProbe {
    const inst = this.instances;
    return {
      names: this.instanceNames(),
      read(out, at) {
        for (let k = 0; k < inst.length; k++) out[at + k] = inst[k]!.store.usedBytes * inst[k]!.tp;
      },
    };
  }

  /** Names of the instances, in creation order (the probe's). */
  private instanceNames(): string[] {
    const roles = new Set(this.instances.map((i) => i.role));
    const count = new Map<string, number>();
    return this.instances.map((i) => {
      const name = offloadSpecOf(this.spec, i.role)!.tiers[i.tier]!.name;
      const key = roles.size > 1 ? `${i.role} ${name}` : name;
      const n = count.get(key) ?? 0;
      count.set(key, n + 1);
      return `${key} ${n}`;
    });
  }

  report(): KvOffloadReport | undefined {
    if (this.instances.length === 0) return undefined;
    const disaggregated = this.spec.topology.kind === "disaggregated";
    const tiers: KvOffloadTierReport[] = [];
    for (const role of ["aggregated", "prefill", "decode"] as const) {
      const section = offloadSpecOf(this.spec, role);
      const mine = this.instances.filter((i) => i.role === role);
      if (section === undefined || mine.length === 0) continue;
      section.tiers.forEach((t, k) => {
        const of = mine.filter((i) => i.tier === k);
        const sum = (f: (i: Instance) => number) => of.reduce((a, i) => a + f(i), 0);
        tiers.push({
          name: t.name,
          ...(disaggregated ? { role: role as "prefill" | "decode" } : {}),
          store: t.store,
          shared: t.shared,
          instances: of.length,
          capacity_bytes: t.capacity,
          loads: sum((i) => i.store.counters.loads),
          tokens_served: sum((i) => i.store.counters.tokensServed),
          blocks_loaded: sum((i) => i.store.counters.blocksLoaded),
          bytes_loaded: sum((i) => i.store.counters.bytesLoaded * i.tp),
          blocks_stored: sum((i) => i.store.counters.blocksStored),
          bytes_stored: sum((i) => i.store.counters.bytesStored * i.tp),
          blocks_evicted: sum((i) => i.store.counters.blocksEvicted),
          blocks_dropped: sum((i) => i.store.counters.blocksDropped),
          peak_bytes: of.reduce((a, i) => Math.max(a, i.store.counters.peakUsedBytes * i.tp), 0),
        });
      });
    }
    const d = this.delays;
    const sorted = Float64Array.from(d).sort();
    return {
      tiers,
      loads: d.length,
      tokens_served: this.tokens,
      mean_load_ms: d.length === 0 ? null : d.reduce((a, b) => a + b, 0) / d.length,
      p90_load_ms: d.length === 0 ? null : percentile(sorted, 90),
    };
  }
}
