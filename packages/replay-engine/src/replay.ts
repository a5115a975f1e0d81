import { createPromptTokens, poolGroupsForProfile, type PromptTokens } from "@kvsim/kv-pool";
import {
  InputError,
  MAX_VIRTUAL_TIME_MS,
  MAX_VIRTUAL_TIME_TEXT,
  tokens as asTokens,
  type KvCapacity,
  type Profile,
  type Spec,
  type TraceRecord,
} from "@kvsim/profile-schema";
import { payloadBytes, transferDelayMs, withDestination } from "@kvsim/transfer-rules";
import {
  Rank,
  RankConfigError,
  IdTable,
  kvBlockSizeTokens,
  TimingRefusedError,
  type Command,
  type CommandOutcome,
  type DecodeRun,
  type Effects,
  type RankConfig,
  type RankMetrics,
  type RankRole,
  type RequestInput,
  type StepResult,
  addSpeculationStats,
  type SpeculationStats,
} from "@kvsim/vllm-scheduler";
import TinyQueue from "tinyqueue";
import { dummyStepMs, LockstepClock, pickDpRank } from "./data-parallel.js";
import { HandoffCoordinator, type CommandAction, type HandoffAction, type HandoffInput, type TransferPricer } from "./coordinator.js";
import { EventQueue, Phase, Stage } from "./event-queue.js";
import { PassLog, TokenTrack } from "./itl.js";
import { createPlacement, type Placed, type Placement } from "./placement.js";
import { RoutingTally, type RoutingReport } from "./routing-report.js";
import {
  MetricsCollector,
  speculativeDecodingReport,
  type LatencyQuantiles,
  type DataParallelPool,
  type DataParallelReport,
  type HandoffRecord,
  type KvCapacityByRole,
  type ReplayReport,
  type RequestRecord,
  type RequestStatus,
} from "./report.js";
import { Sampler, type TimeSeries } from "./timeseries.js";
import { RecordStore } from "./record-store.js";
import { specProblemPath, specRankConfigs } from "./rank-configs.js";
import { placeOnNodes, TransferNetwork, type NetworkTransfer } from "./transfer-network.js";
import { lowerTrace, syntheticRequests, type ReplayRequest } from "./workload.js";

export interface ReplayProgress {
  /** Requests released so far. */
  readonly arrived: number;
  /** Requests that reached a terminal status. */
  readonly terminal: number;
  /** Virtual time reached. */
  readonly nowMs: number;
}

export interface ReplayInput {
  /** A parsed spec (paths resolved). */
  readonly spec: Spec;
  /** Names the spec in errors about its configuration (default `<spec>`). */
  readonly specFile?: string;
  /** Profiles the spec names by path, keyed by that path. Inline profiles need no entry. */
  readonly profiles?: ReadonlyMap<string, Profile>;
  /** The trace's records when the workload is a trace; read lazily, one request ahead of the clock. */
  readonly records?: AsyncIterable<TraceRecord> | Iterable<TraceRecord>;
  /** Names the trace in errors (default: the spec's trace path). */
  readonly traceFile?: string;
  /** Called every `progressEvery` terminal requests and once at the end. */
  readonly onProgress?: (progress: ReplayProgress) => void;
  readonly progressEvery?: number;
  /** Percentiles (0..100) to report for every metric besides p50, p90 and p99 (outside the digest). */
  readonly percentiles?: readonly number[];
  /**
   * The decode fast path (default true): a rank whose next passes are all plain decode steps runs
   * them in one call, up to the next event that could change what it sees. Results are the same
   * either way; false runs every pass on its own (tests compare the two).
   */
  readonly fastDecode?: boolean;
  /**
   * Sample time series on the virtual clock (outside the report and its digest). `sampleMs`:
   * the interval; absent, it starts at 10 ms and doubles to keep 2,049 to 4,097 samples.
   */
  readonly timeseries?: { readonly sampleMs?: number };
  /** Return this many quantiles of each latency metric (for CDF plots; outside the report). */
  readonly quantiles?: number;
}

/** A request the replay could not move, where it sits and why. */
export interface StuckRequest {
  readonly request_id: string;
  readonly where: string;
  readonly why: string;
}

export type ReplayResult =
  | {
      readonly ok: true;
      readonly report: ReplayReport;
      readonly records: readonly RequestRecord[];
      readonly timeseries?: TimeSeries;
      readonly quantiles?: LatencyQuantiles;
    }
  | { readonly ok: false; readonly reason: string; readonly stuck: readonly StuckRequest[]; readonly atMs: number };

/** Profile paths a spec references (base, prefill and decode), for the caller to load. */
export function specProfilePaths(spec: Spec): string[] {
  const refs = [spec.profile, spec.prefill?.profile, spec.decode?.profile];
  return [...new Set(refs.filter((r): r is string => typeof r === "string"))];
}

/** A rank as the replay drives it: one data-parallel rank of a worker (the worker itself when D = 1). */
interface Worker {
  readonly role: RankRole;
  readonly stage: Stage;
  /** Its worker (front end) in the pool. */
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
  /** Consecutive passes that changed nothing (a livelock guard). */
  idlePasses: number;
  metrics: RankMetrics | undefined;
  /** Times of its passes that emitted tokens (the ITL data). */
  readonly passLog: PassLog;
}

/** A worker of a pool: one front end over its data-parallel ranks. */
interface FrontEnd {
  readonly ranks: readonly Worker[];
  /** Their schedulers, as the data-parallel balancer reads them. */
  readonly schedulers: readonly Rank[];
  /** Requests placed on each rank. */
  readonly placed: number[];
  readonly group: LockstepGroup | undefined;
  readonly expertParallel: boolean;
}

/** The D expert-parallel ranks of one worker, stepping together on one clock. */
interface LockstepGroup {
  readonly ranks: Worker[];
  readonly clock: LockstepClock;
  /** The price of a step in which no rank has work (the wave's tail). */
  readonly dummyMs: number;
  busy: boolean;
}

interface LiveRequest {
  readonly req: ReplayRequest;
  readonly prompt: PromptTokens;
  admittedMs: number | undefined;
  /**
   * The first and last token times, NaN before the first token (`emitted` 0). Always numbers, so
   * V8 keeps the fields as doubles and a store allocates nothing; `number | undefined` fields
   * box every new time (a heap number per token).
   */
  firstTokenMs: number;
  lastTokenMs: number;
  emitted: number;
  /** Where its tokens fell in its worker's pass log; ITL gaps are read from there. */
  readonly track: TokenTrack;
  reused: number;
  preemptions: number;
  /** Aggregated worker, or the prefill worker in P/D. */
  first: Worker | undefined;
  /** The routers' placements, told when the prefill ends and when the request leaves. */
  firstPlaced: Placed | undefined;
  decodePlaced: Placed | undefined;
  decode: Worker | undefined;
  decodeHitTokens: number | undefined;
  handoff: HandoffCoordinator | undefined;
  /** Its transfer on the shared network (with `kv_transfer.network`). */
  transfer?: NetworkTransfer;
  /** A rejection reason reported by the prefill rank, kept for the terminal record. */
  rejected: string | undefined;
}

type QueuedPayload =
  | { readonly kind: "pass"; readonly worker: Worker; readonly step: StepResult }
  | { readonly kind: "run"; readonly worker: Worker; readonly run: DecodeRun }
  | { readonly kind: "transfer"; readonly live: LiveRequest }
  /** A lockstep step: each rank's own pass (undefined: a dummy batch); `counted` unless it only carried zero-length passes. */
  | { readonly kind: "group"; readonly group: LockstepGroup; readonly steps: readonly (StepResult | undefined)[]; readonly counted: boolean };

/** Passes in a row that change nothing before a worker is declared stuck. */
const MAX_IDLE_PASSES = 1024;
/** Stuck requests listed in a no-progress error. */
const MAX_STUCK_LISTED = 10;

class NoProgress extends Error {}
/** The run cannot go on for a reason of its inputs that only the run could find (not a bug). */
class RunFailure extends Error {}

function resolveProfile(ref: Spec["profile"], profiles: ReadonlyMap<string, Profile> | undefined, role: string): Profile {
  if (typeof ref !== "string") return ref;
  const p = profiles?.get(ref);
  if (p === undefined) throw new Error(`the ${role} profile ${ref} was not provided to runReplay (see specProfilePaths)`);
  return p;
}

/**
 * Replays a spec's workload on virtual time and returns the report and per-request records, or,
 * when the replay can make no progress, which requests are stuck where and why.
 *
 * Never reads a clock; the same inputs give the same report and digest. Trace records are pulled
 * lazily as the clock reaches them. Throws an InputError for invalid trace content (the file and
 * line named) and for specs the ranks refuse.
 */
export async function runReplay(input: ReplayInput): Promise<ReplayResult> {
  const engine = new ReplayEngine(input);
  return engine.run();
}

class ReplayEngine {
  private readonly spec: Spec;
  /** Ranks that step on their own. */
  private readonly workers: Worker[] = [];
  /** Lockstep groups (expert parallelism with D > 1). */
  private readonly groups: LockstepGroup[] = [];
  /** Roles whose workers have more than one data-parallel rank. */
  private readonly dpRoles = new Set<RankRole>();
  /** Aggregated workers, or the prefill pool. */
  private readonly firstPool: FrontEnd[] = [];
  private readonly decodePool: FrontEnd[] = [];
  private readonly firstPlacement: Placement;
  private readonly decodePlacement: Placement | undefined;
  private readonly firstTally: RoutingTally;
  private readonly decodeTally: RoutingTally | undefined;
  private readonly disaggregated: boolean;
  private readonly queue = new EventQueue<QueuedPayload>();
  private readonly live = new IdTable<LiveRequest>();
  /** Terminal records, kept compactly by their workload index and built again when read. */
  private readonly records = new RecordStore<RequestRecord>({ enumKeys: ["status", "mode", "unit", "transfer_path"], numberedKeys: ["request_id"] });
  private readonly collector: MetricsCollector;
  private readonly price: TransferPricer;
  private readonly fallbackLatencyMs: number;
  /** Setup latency the coordinator adds (the private pipe's; the network pays its own). */
  private readonly pipeSetupMs: number;
  /** The shared network of handoffs, when the spec sets one; else each has a private pipe. */
  private readonly network: TransferNetwork<LiveRequest> | undefined;
  private readonly requests: AsyncIterator<ReplayRequest> | Iterator<ReplayRequest>;
  /** A trace's raw record iterator, kept to count what a cutoff left unread; closed at the end. */
  private rawRecords: AsyncIterator<TraceRecord> | Iterator<TraceRecord> | undefined;
  private readonly onProgress: ((p: ReplayProgress) => void) | undefined;
  private readonly progressEvery: number;
  private nextProgress: number;
  private now = 0;
  /** Time series, when asked for. */
  private sampler: Sampler | undefined;
  private readonly quantilePoints: number | undefined;
  /** Every rank, in creation order (the sampled workers). */
  private readonly allRanks: Worker[] = [];
  /** When the next request not yet released reaches the engine (Infinity when none is left). */
  private nextArrivalMs = Infinity;
  /**
   * The front end's overhead (spec.frontend): a request arrives (its records' arrival_ms, the
   * start of its TTFT and E2E) this long before the engine sees it.
   */
  private readonly frontendMs: number;
  private readonly fastDecode: boolean;
  /** Times of transfer completions in the heap (decode runs stop before them); stale ones are dropped lazily. */
  private readonly transferTimes = new TinyQueue<number>([], (a, b) => a - b);

  private readonly specFile: string;

  constructor(input: ReplayInput) {
    const { spec } = input;
    this.spec = spec;
    this.specFile = input.specFile ?? "<spec>";
    this.frontendMs = spec.frontend?.overhead_ms ?? 0;
    this.collector = new MetricsCollector(spec.sla, input.percentiles === undefined ? {} : { percentiles: input.percentiles });
    this.collector.ttftClock = spec.frontend === undefined ? "engine" : "client";
    this.onProgress = input.onProgress;
    this.quantilePoints = input.quantiles;
    this.fastDecode = input.fastDecode ?? true;
    this.progressEvery = Math.max(1, input.progressEvery ?? 256);
    this.nextProgress = this.progressEvery;
    this.fallbackLatencyMs = spec.kv_transfer.fallback_latency_ms;
    const setupMs = spec.kv_transfer.setup_latency_ms ?? 0;
    this.pipeSetupMs = spec.kv_transfer.network === undefined ? setupMs : 0;
    let network: TransferNetwork<LiveRequest> | undefined;
    let firstBlockSize: number;
    let decodeBlockSize = 0;
    const base = resolveProfile(spec.profile, input.profiles, "base");
    const roleProfiles =
      spec.topology.kind === "aggregated"
        ? { aggregated: base }
        : {
            prefill: resolveProfile(spec.prefill?.profile ?? spec.profile, input.profiles, "prefill"),
            decode: resolveProfile(spec.decode?.profile ?? spec.profile, input.profiles, "decode"),
          };
    const { configs, problems } = specRankConfigs(spec, roleProfiles);
    if (problems.length > 0)
      throw new InputError(
        this.specFile,
        problems.map((p) => ({ path: specProblemPath(spec, p.at), message: p.message })),
      );
    const capacity: { -readonly [R in keyof KvCapacityByRole]: KvCapacity } = {};
    const configOf = (role: RankRole): RankConfig => {
      const c = configs.find((r) => r.role === role);
      if (c === undefined) throw new Error(`no ${role} rank configuration`);
      if (c.capacity !== undefined) capacity[role] = c.capacity;
      return c.config;
    };
    if (spec.topology.kind === "aggregated") {
      this.disaggregated = false;
      const config = configOf("aggregated");
      for (let i = 0; i < spec.topology.workers; i++) this.firstPool.push(this.addFrontEnd(config, Stage.aggregated, i));
      firstBlockSize = kvBlockSizeTokens(base, config.engine);
      this.price = () => {
        throw new Error("an aggregated replay has no handoffs");
      };
    } else {
      this.disaggregated = true;
      const prefill = configOf("prefill");
      const decode = configOf("decode");
      const prefillProfile = prefill.profile;
      const decodeProfile = decode.profile;
      for (let i = 0; i < spec.topology.prefill.workers; i++) this.firstPool.push(this.addFrontEnd(prefill, Stage.prefill, i));
      for (let i = 0; i < spec.topology.decode.workers; i++) this.decodePool.push(this.addFrontEnd(decode, Stage.decode, i));
      firstBlockSize = kvBlockSizeTokens(prefillProfile, prefill.engine);
      decodeBlockSize = kvBlockSizeTokens(decodeProfile, decode.engine);
      network = this.createNetwork(setupMs, prefillProfile, decodeProfile);
      const linearBlock = { blockSizeTokens: prefill.engine.block_size };
      this.price = (terms, hitTokens) => {
        const priced = withDestination(terms, prefillProfile, asTokens(hitTokens), linearBlock);
        return { terms: priced, payloadBytes: payloadBytes(priced), delayMs: transferDelayMs(priced) };
      };
    }
    this.network = network;
    if (network !== undefined) this.collector.attachNetwork(network);
    // A worker of D ranks offers the router its best rank's hit and the load of all its ranks.
    const targets = (pool: readonly FrontEnd[]) =>
      pool.map((fe) => ({
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
    if (Object.keys(capacity).length > 0) this.collector.kvCapacity = capacity;
    this.firstPlacement = createPlacement(spec.router, targets(this.firstPool), firstBlockSize, this.disaggregated ? "prefill" : "aggregated");
    this.decodePlacement = this.disaggregated ? createPlacement(spec.router, targets(this.decodePool), decodeBlockSize, "decode") : undefined;
    this.firstTally = new RoutingTally(this.firstPool.length);
    this.decodeTally = this.disaggregated ? new RoutingTally(this.decodePool.length) : undefined;
    this.requests = this.requestStream(input);
    if (input.timeseries !== undefined) {
      const dpSizes = new Map<Worker, boolean>();
      for (const w of this.allRanks)
        dpSizes.set(
          w,
          this.allRanks.some((o) => o !== w && o.role === w.role && o.id === w.id),
        );
      const probes = this.allRanks.map((w) => ({
        role: w.role,
        id: w.id,
        ...(dpSizes.get(w) === true ? { label: `${w.role === "aggregated" ? "W" : w.role === "prefill" ? "P" : "D"}${w.id}.${w.dp}` } : {}),
        groups: w.cacheGroups,
        load: () => w.rank.load(),
        groupPages: () => w.rank.kvGroupPages(),
      }));
      this.sampler = new Sampler(probes, input.timeseries.sampleMs);
    }
  }

  /** The shared network of `kv_transfer.network`, with workers placed on nodes when it has `nodes`. */
  private createNetwork(setupMs: number, prefillProfile: Profile, decodeProfile: Profile): TransferNetwork<LiveRequest> | undefined {
    const net = this.spec.kv_transfer.network;
    if (net === undefined) return undefined;
    const p = this.firstPool.length;
    const d = this.decodePool.length;
    if (net.nodes === undefined) return new TransferNetwork(net, setupMs, p, d);
    const tp = (profile: Profile, n: number) => new Array<number>(n).fill(profile.tensor_parallel_size);
    const placed = placeOnNodes(net.nodes.gpus_per_node, net.nodes.fill, tp(prefillProfile, p), tp(decodeProfile, d));
    if (!placed.ok) throw new InputError(this.specFile, [{ path: "kv_transfer.network.nodes.gpus_per_node", message: placed.reason }]);
    return new TransferNetwork(net, setupMs, p, d, placed.placement);
  }

  /** A worker of the pool: its data_parallel_size ranks, in lockstep with enable_expert_parallel. */
  private addFrontEnd(config: RankConfig, stage: Stage, id: number): FrontEnd {
    const d = config.engine.data_parallel_size;
    const group: LockstepGroup | undefined =
      d > 1 && config.engine.enable_expert_parallel ? { ranks: [], clock: new LockstepClock(), dummyMs: dummyStepMs(config), busy: false } : undefined;
    const ranks: Worker[] = [];
    for (let dp = 0; dp < d; dp++) ranks.push(this.addWorker(config, stage, id, dp, group));
    if (group !== undefined) this.groups.push(group);
    if (d > 1) this.dpRoles.add(config.role);
    return { ranks, schedulers: ranks.map((w) => w.rank), placed: new Array<number>(d).fill(0), group, expertParallel: config.engine.enable_expert_parallel };
  }

  private addWorker(config: RankConfig, stage: Stage, id: number, dp: number, group: LockstepGroup | undefined): Worker {
    let rank: Rank;
    try {
      rank = new Rank(config);
    } catch (e) {
      if (e instanceof RankConfigError) {
        throw new InputError(
          this.specFile,
          e.problems.map((p) => ({ path: p.path, message: p.message.startsWith(p.role) ? p.message : `${p.role} rank: ${p.message}` })),
          { cause: e },
        );
      }
      throw e;
    }
    const d = config.engine.data_parallel_size;
    const label = d > 1 ? `${config.role} worker ${id} DP rank ${dp}` : `${config.role} worker ${id}`;
    const cacheGroups = poolGroupsForProfile(config.profile, config.engine).map((g) => g.name);
    const w: Worker = {
      role: config.role,
      stage,
      id,
      dp,
      order: id * d + dp,
      label,
      group,
      rank,
      sampleIndex: this.allRanks.length,
      cacheGroups,
      busy: false,
      passEndMs: 0,
      dirty: false,
      idlePasses: 0,
      metrics: undefined,
      passLog: new PassLog(),
    };
    this.allRanks.push(w);
    if (group === undefined) this.workers.push(w);
    else group.ranks.push(w);
    return w;
  }

  private requestStream(input: ReplayInput): AsyncIterator<ReplayRequest> | Iterator<ReplayRequest> {
    const w = this.spec.workload;
    if (w.synthetic !== undefined) return syntheticRequests(w.synthetic);
    if (input.records === undefined) throw new Error("the spec's workload is a trace: pass its records to runReplay");
    const file = input.traceFile ?? w.trace ?? "<trace>";
    const records = input.records;
    const raw = Symbol.asyncIterator in records ? records[Symbol.asyncIterator]() : records[Symbol.iterator]();
    this.rawRecords = raw;
    // Lowering reads through a view without `return`, so stopping it leaves the records open for
    // the cutoff count; run() closes them.
    const view: AsyncIterable<TraceRecord> = { [Symbol.asyncIterator]: () => ({ next: async () => raw.next() }) };
    return lowerTrace(view, { traceBlockSize: w.trace_block_size, speedup: w.speedup, file })[Symbol.asyncIterator]();
  }

  async run(): Promise<ReplayResult> {
    const cap = this.spec.max_virtual_time_ms;
    let next = await this.pull();
    let stoppedAtCap = false;
    try {
      for (;;) {
        // Settle the current instant: heap events in their order, then arrivals, then idle
        // workers start passes; zero-duration passes and transfers complete in the same instant.
        for (;;) {
          for (let ev = this.queue.popDue(this.now); ev !== undefined; ev = this.queue.popDue(this.now)) {
            const p = ev.payload;
            if (p.kind === "pass") this.completePass(p.worker, p.step, undefined);
            else if (p.kind === "run") this.completeRun(p.worker, p.run);
            else if (p.kind === "group") this.completeGroupStep(p.group, p.steps, p.counted);
            else this.transferDone(p.live);
          }
          if (this.network?.nextTimeMs() === this.now) {
            for (const live of this.network.settle(this.now)) this.transferDone(live);
          }
          while (next !== undefined && next.arrivalMs + this.frontendMs <= this.now) {
            this.arrive(next);
            next = await this.pull();
          }
          for (const w of this.workers) if (w.dirty && !w.busy) this.startPass(w);
          for (const g of this.groups) if (!g.busy) this.startGroupStep(g);
          if (this.queue.nextTimeMs() !== this.now && this.network?.nextTimeMs() !== this.now) break;
        }
        // Infinity, not undefined, for "none": the loop's comparisons see numbers only.
        const netNext = this.network?.nextTimeMs();
        const queueNext = this.queue.nextTimeMs();
        const heapNext = netNext === undefined ? queueNext : Math.min(queueNext, netNext);
        const t = next === undefined ? heapNext : Math.min(heapNext, next.arrivalMs + this.frontendMs);
        if (t === Infinity) break;
        // The state now holds until t (or the cap): the samples due before then see it.
        this.sampler?.advance(cap !== undefined && t > cap ? cap : t);
        if (cap !== undefined && t > cap) {
          stoppedAtCap = true;
          break;
        }
        // Beyond it a double no longer resolves a pass: time would stop while work goes on.
        if (t > MAX_VIRTUAL_TIME_MS) {
          throw new RunFailure(
            `virtual time would pass ${MAX_VIRTUAL_TIME_TEXT} (next event at ${t} ms): the workload's passes and transfers take too long to model`,
          );
        }
        if (!(t >= this.now)) throw new Error(`virtual time went back from ${this.now} ms to ${t} ms`);
        this.now = t;
      }
      if (stoppedAtCap) await this.countCutoff(cap!, next);
    } catch (e) {
      if (e instanceof NoProgress) return this.stuck(e.message);
      if (e instanceof RunFailure) return { ok: false, reason: `the replay stopped at ${this.now} ms: ${e.message}`, stuck: [], atMs: this.now };
      throw e;
    } finally {
      // Stopped early (cutoff, no progress, an error): let the record stream close its source.
      await this.requests.return?.();
      await this.rawRecords?.return?.();
    }
    if (this.live.size > 0 && !stoppedAtCap) {
      return this.stuck(`no event is pending and ${this.live.size} request(s) have not finished`);
    }
    if (!stoppedAtCap) this.checkDrained();
    this.onProgress?.({ arrived: this.collector.arrivedCount, terminal: this.collector.terminalCount, nowMs: this.now });
    this.collector.dataParallel = this.dataParallelReport();
    this.collector.routing = this.routingReport();
    this.collector.speculative = speculativeDecodingReport(this.speculationStats());
    const report = this.collector.report();
    const quantiles = this.quantilePoints === undefined ? undefined : this.collector.quantiles(this.quantilePoints);
    this.sampler?.finish(stoppedAtCap ? cap! : this.now);
    const readRecords = lazyRecords(this.records);
    return {
      ok: true,
      report,
      get records() {
        return readRecords();
      },
      ...(this.sampler === undefined ? {} : { timeseries: this.sampler.result() }),
      ...(quantiles === undefined ? {} : { quantiles }),
    };
  }

  /** The drafts of every rank that speculated, summed (undefined when none did). */
  private speculationStats(): SpeculationStats | undefined {
    let sum: SpeculationStats | undefined;
    for (const w of this.workers) sum = addSpeculationStats(sum, w.rank.speculationStats());
    for (const g of this.groups) for (const w of g.ranks) sum = addSpeculationStats(sum, w.rank.speculationStats());
    return sum;
  }

  /** Block conservation at the end: with every request terminal, no rank holds a request or a page. */
  private checkDrained(): void {
    const check = (w: Worker) => {
      const used = w.rank.metrics().pagesUsed;
      if (!w.rank.isDrained() || used !== 0) throw new Error(`${w.label} still holds requests or ${used} pages after every request ended`);
    };
    for (const w of this.workers) check(w);
    for (const g of this.groups) for (const w of g.ranks) check(w);
  }

  /**
   * Tells the collector what the cutoff left: the in-flight requests' emitted tokens and the
   * requests that never arrived (`next`, already read, and every later one; a trace is read to its
   * end to count them, so a bad line after the cutoff is still an error).
   */
  private async countCutoff(cap: number, next: ReplayRequest | undefined): Promise<void> {
    let emitted = 0;
    for (const live of this.live.values()) emitted += live.emitted;
    let notArrived = next === undefined ? 0 : 1;
    const synthetic = this.spec.workload.synthetic;
    if (synthetic !== undefined) notArrived = synthetic.requests - this.collector.arrivedCount;
    else if (this.rawRecords !== undefined && next !== undefined) {
      for (let r = await this.rawRecords.next(); r.done !== true; r = await this.rawRecords.next()) notArrived++;
    }
    this.collector.onCutoff(cap, emitted, notArrived);
  }

  private async pull(): Promise<ReplayRequest | undefined> {
    const r = await this.requests.next();
    const next = r.done === true ? undefined : r.value;
    this.nextArrivalMs = next === undefined ? Infinity : next.arrivalMs + this.frontendMs;
    return next;
  }

  /** A handoff's last byte arrived. */
  private transferDone(live: LiveRequest): void {
    this.sampler?.onTransferDone(live.handoff?.priced?.payloadBytes ?? 0);
    this.feed(live, { type: "transfer_completed", atMs: this.now });
  }

  private arrive(req: ReplayRequest): void {
    this.collector.onArrival(req.arrivalMs);
    this.sampler?.onArrival();
    const live: LiveRequest = {
      req,
      prompt: req.prompt ?? createPromptTokens(req.tokens),
      admittedMs: undefined,
      firstTokenMs: NaN,
      lastTokenMs: NaN,
      emitted: 0,
      track: new TokenTrack(),
      reused: 0,
      preemptions: 0,
      first: undefined,
      firstPlaced: undefined,
      decodePlaced: undefined,
      decode: undefined,
      decodeHitTokens: undefined,
      handoff: undefined,
      rejected: undefined,
    };
    this.live.set(req.id, live);
    if (this.disaggregated) {
      live.handoff = new HandoffCoordinator(req.id, this.price, this.fallbackLatencyMs, this.pipeSetupMs);
      this.feed(live, { type: "start", atMs: this.now });
      return;
    }
    const w = this.placeFirst(live);
    const outcome = this.submit(w, { type: "submit", request: this.requestInput(live, req.outputTokens) });
    if (!outcome.ok) this.terminate(live, "rejected", outcome.reason);
    else this.applyEffects(w, outcome.effects, this.now);
  }

  /** Places a request on the aggregated or prefill pool and returns its rank. */
  private placeFirst(live: LiveRequest): Worker {
    const placed = this.firstPlacement.place(live.prompt);
    live.firstPlaced = placed;
    this.firstTally.placed(placed.index);
    const w = this.rankOf(this.firstPool[placed.index]!);
    live.first = w;
    return w;
  }

  /** The report's routing section: the policy and how each pool's requests spread. */
  private routingReport(): RoutingReport {
    const policy = this.spec.router.policy;
    if (!this.disaggregated) return { policy, aggregated: this.firstTally.report("worker") };
    return { policy, prefill: this.firstTally.report("prefill worker"), decode: this.decodeTally!.report("decode worker") };
  }

  /** The rank a request placed on a worker goes to: vLLM's data-parallel load balancer over its ranks. */
  private rankOf(fe: FrontEnd): Worker {
    const dp = fe.ranks.length === 1 ? 0 : pickDpRank(fe.schedulers);
    fe.placed[dp]!++;
    return fe.ranks[dp]!;
  }

  /** The report's data_parallel section: each data-parallel pool's layout, placements and lockstep steps. */
  private dataParallelReport(): DataParallelReport | undefined {
    if (this.dpRoles.size === 0) return undefined;
    const pool = (fes: readonly FrontEnd[]): DataParallelPool => ({
      data_parallel_size: fes[0]!.ranks.length,
      expert_parallel: fes[0]!.expertParallel,
      workers: fes.map((fe) => {
        const c = fe.group?.clock;
        return c === undefined ? { placed: [...fe.placed] } : { placed: [...fe.placed], steps: c.totalSteps, idle_steps: c.dummySteps, waves: c.waves };
      }),
    });
    const out: Partial<Record<RankRole, DataParallelPool>> = {};
    if (this.disaggregated) {
      if (this.dpRoles.has("prefill")) out.prefill = pool(this.firstPool);
      if (this.dpRoles.has("decode")) out.decode = pool(this.decodePool);
    } else out.aggregated = pool(this.firstPool);
    return out;
  }

  private requestInput(live: LiveRequest, maxOutputTokens: number): RequestInput {
    return { id: live.req.id, prompt: live.prompt, maxOutputTokens };
  }

  private submit(w: Worker, command: Command): CommandOutcome {
    w.dirty = true;
    return w.rank.submit(command);
  }

  /** Plans a rank's pass from now (undefined: nothing to run); the rank is no longer dirty. */
  private stepRank(w: Worker): StepResult | undefined {
    w.dirty = false;
    let step: StepResult | undefined;
    try {
      step = w.rank.step(this.now);
    } catch (e) {
      // outside_grid: refuse, and this pass left the measured grid: a result of the workload.
      if (e instanceof TimingRefusedError) throw new RunFailure(`${w.label} could not price a pass: ${e.message}`);
      throw e;
    }
    if (step !== undefined && (!(step.endMs >= this.now) || !Number.isFinite(step.endMs))) {
      throw new Error(`${w.label} planned a pass ending at ${step.endMs} ms, before now (${this.now} ms)`);
    }
    if (step !== undefined) this.sampler?.onPass(w.sampleIndex, step.scheduledTokens, step.durationMs);
    return step;
  }

  private startPass(w: Worker): void {
    if (this.fastDecode && w.role !== "prefill") {
      w.dirty = false;
      // With time series, a run that may hold samples records its pages at their times: the rank's
      // state moves to the run's end when it starts, and a sample inside it must see its step's.
      const horizon = this.runHorizon(w);
      const pagesAt = this.sampler?.samplesBefore(horizon);
      const run = w.rank.decodeRun(this.now, {
        pagesAt,
        startBeforeMs: horizon,
        endByMs: Math.min(this.spec.max_virtual_time_ms ?? Infinity, MAX_VIRTUAL_TIME_MS),
      });
      if (run !== undefined) {
        w.busy = true;
        w.passEndMs = run.endMs;
        this.sampler?.onRunStarted(w.sampleIndex, run.startMs, run.stepEndsMs, run.steps, run.requestIds.length, run.pages);
        this.queue.push(run.endMs, Phase.passCompletion, w.stage, w.order, { kind: "run", worker: w, run });
        return;
      }
    }
    const step = this.stepRank(w);
    if (step === undefined) return;
    w.busy = true;
    w.passEndMs = step.endMs;
    this.queue.push(step.endMs, Phase.passCompletion, w.stage, w.order, { kind: "pass", worker: w, step });
  }

  /**
   * Starts a lockstep step of a group now, when a rank has something new or the wave's tail needs a
   * dummy step: every changed rank plans its pass, and the step lasts as long as the slowest one
   * (ranks without work run a dummy batch padded to it). Without work on any rank, the step is the
   * dummy's price if the wave runs with every rank empty; otherwise (work that cannot run yet) the
   * group waits for a change.
   */
  private startGroupStep(g: LockstepGroup): void {
    let dirty = false;
    for (const w of g.ranks) if (w.dirty) dirty = true;
    const unfinished = dirty || this.anyUnfinished(g);
    if (!dirty && !g.clock.tailStep(unfinished)) return;
    const steps: (StepResult | undefined)[] = [];
    const prices: (number | undefined)[] = [];
    let effectsOnly = false;
    for (const w of g.ranks) {
      const step = w.dirty ? this.stepRank(w) : undefined;
      steps.push(step);
      const works = step !== undefined && step.scheduledTokens > 0;
      prices.push(works ? step.durationMs : undefined);
      if (step !== undefined && !works) effectsOnly = true;
    }
    const longest = LockstepClock.stepMs(prices);
    let end: number;
    let counted = true;
    if (longest !== undefined) {
      g.clock.startWork();
      end = this.now + longest;
    } else if (effectsOnly) {
      // Passes that only preempted or rejected: applied now, then the group plans again.
      end = this.now;
      counted = false;
    } else if (g.clock.tailStep(this.anyUnfinished(g))) {
      end = this.now + g.dummyMs;
    } else {
      return;
    }
    g.busy = true;
    for (const w of g.ranks) {
      w.busy = true;
      w.passEndMs = end;
    }
    const first = g.ranks[0]!;
    this.queue.push(end, Phase.passCompletion, first.stage, first.order, { kind: "group", group: g, steps, counted });
  }

  /** True when a rank of the group holds a request (running or waiting): vLLM's unfinished requests. */
  private anyUnfinished(g: LockstepGroup): boolean {
    for (const w of g.ranks) {
      const l = w.rank.load();
      if (l.running + l.waiting > 0) return true;
    }
    return false;
  }

  /** A lockstep step ended now: every rank's pass completes, its tokens at the step's end. */
  private completeGroupStep(g: LockstepGroup, steps: readonly (StepResult | undefined)[], counted: boolean): void {
    g.busy = false;
    let dummy = true;
    g.ranks.forEach((w, i) => {
      w.busy = false;
      const step = steps[i];
      if (step === undefined) return;
      if (step.scheduledTokens > 0) dummy = false;
      this.completePass(w, step, this.now);
    });
    if (counted) g.clock.endStep(dummy, this.anyUnfinished(g));
  }

  /**
   * The time before which a decode run of `w` may start its steps: nothing that could change what
   * the rank sees happens before it. An aggregated worker sees only requests placed on it, at
   * arrivals. A decode worker gets commands from prefill pass completions (reservations), from
   * transfer completions (activations) and from what follows arrivals; a prefill worker that
   * waits with work may start a pass after any event (a release frees its pages), so then every
   * pending event bounds the run.
   */
  private runHorizon(w: Worker): number {
    let t = this.nextArrivalMs;
    if (w.role === "aggregated") return t;
    const transfers = this.transferTimes;
    while (transfers.length > 0 && transfers.peek()! <= this.now) transfers.pop();
    if (transfers.length > 0) t = Math.min(t, transfers.peek()!);
    const net = this.network?.nextTimeMs();
    if (net !== undefined) t = Math.min(t, net);
    for (const fe of this.firstPool) {
      for (const p of fe.ranks) {
        if (p.busy) t = Math.min(t, p.passEndMs);
        else if (p.rank.hasWork()) t = Math.min(t, this.queue.nextTimeMs());
      }
    }
    return t;
  }

  /** A decode run's steps ended: each gave one token to every request of its batch. */
  private completeRun(w: Worker, run: DecodeRun): void {
    this.sampler?.onRunDone(w.sampleIndex);
    w.busy = false;
    w.dirty = true;
    w.idlePasses = 0;
    w.metrics = run.metrics;
    const log = w.passLog;
    const ends = run.stepEndsMs;
    let entry0 = -1;
    for (let j = 0; j < run.steps; j++) {
      const e = log.append(ends[j]!);
      if (j === 0) entry0 = e;
    }
    const ids = run.requestIds;
    for (let i = 0; i < ids.length; i++) {
      const live = this.live.get(ids[i]!);
      if (live === undefined) throw new Error(`${w.label} emitted a token for unknown request ${ids[i]}`);
      const first = run.firstTokenIndex[i]!;
      for (let j = 0; j < run.steps; j++) this.recordToken(live, first + j, ends[j]!, log, entry0 + j);
    }
  }

  /** A pass ended: its effects apply now; `tokensAtMs` replaces its tokens' own times (a lockstep step's end). */
  private completePass(w: Worker, step: StepResult, tokensAtMs: number | undefined): void {
    w.busy = false;
    w.dirty = true;
    const e = step.effects;
    const changed =
      step.scheduledTokens > 0 ||
      e.tokens.length + e.admissions.length + e.preemptions.length + e.rejections.length + e.finished.length + e.lifecycle.length > 0;
    w.idlePasses = changed ? 0 : w.idlePasses + 1;
    if (w.idlePasses >= MAX_IDLE_PASSES) {
      throw new NoProgress(`${w.label} ran ${MAX_IDLE_PASSES} passes in a row that changed nothing`);
    }
    this.applyEffects(w, e, step.startMs, tokensAtMs);
  }

  /**
   * Applies a rank's effects at `this.now`; admissions are stamped at `admittedAt` (the pass start),
   * tokens at their own time or `tokensAtMs`.
   */
  private applyEffects(w: Worker, e: Effects, admittedAt: number, tokensAtMs?: number): void {
    w.metrics = e.metrics;
    for (const a of e.admissions) {
      const live = this.live.get(a.requestId);
      if (live === undefined) continue;
      if (w.role === "decode") continue;
      live.admittedMs ??= admittedAt;
      live.reused = Math.max(live.reused, a.reusedTokens);
    }
    for (const p of e.preemptions) {
      this.collector.onPreemption();
      const live = this.live.get(p.requestId);
      if (live !== undefined) live.preemptions++;
    }
    if (w.role !== "prefill") {
      let entry = -1;
      let entryMs = 0;
      for (const t of e.tokens) {
        const live = this.live.get(t.requestId);
        if (live === undefined) throw new Error(`${w.label} emitted a token for unknown request ${t.requestId}`);
        const atMs = tokensAtMs ?? t.atMs;
        // One log entry per pass (all its tokens carry its end time).
        if (entry < 0 || atMs !== entryMs) {
          entry = w.passLog.append(atMs);
          entryMs = atMs;
        }
        this.recordToken(live, t.index, atMs, w.passLog, entry);
      }
      this.sampler?.onOutputTokens(e.tokens.length);
    }
    for (const r of e.rejections) {
      const live = this.live.get(r.requestId);
      if (live === undefined) continue;
      if (live.handoff === undefined) this.terminate(live, "rejected", r.reason);
      else {
        if (w.role === "prefill") live.rejected = r.reason;
        this.feed(live, { type: "failed", atMs: this.now, reason: `${w.label} rejected the request: ${r.reason}` });
      }
    }
    if (w.role !== "prefill") {
      for (const f of e.finished) {
        const live = this.live.get(f.requestId);
        if (live === undefined) continue;
        if (live.emitted < live.req.outputTokens) {
          this.terminate(live, "failed", `${w.label} finished the request after ${live.emitted} of ${live.req.outputTokens} output tokens`);
        } else {
          this.terminate(live, "completed", undefined);
        }
      }
    }
    for (const fact of e.lifecycle) {
      const live = this.live.get(fact.requestId);
      if (live === undefined) throw new Error(`${w.label} reported ${fact.type} for unknown request ${fact.requestId}`);
      if (fact.type === "source_held") {
        this.sampler?.onPrefillDone(live.req.inputTokens);
        // Dynamo's prefill router lets go of a request when its prefill returns.
        this.prefillEnded(live);
        if (live.firstPlaced !== undefined) this.firstPlacement.finished?.(live.firstPlaced);
        this.feed(live, { type: "source_held", atMs: this.now, terms: fact.terms });
      } else {
        live.decodeHitTokens = fact.hitTokens;
        this.feed(live, { type: "destination_reserved", atMs: this.now, hitTokens: fact.hitTokens });
      }
    }
  }

  /** The prefill of a request ended on its first worker: its router and tally learn it. */
  private prefillEnded(live: LiveRequest): void {
    if (live.firstPlaced === undefined) return;
    this.firstPlacement.prefillDone?.(live.firstPlaced);
    this.firstTally.computed(live.firstPlaced.index, live.req.inputTokens - live.reused);
  }

  private recordToken(live: LiveRequest, index: number, atMs: number, log: PassLog, entry: number): void {
    if (index !== live.emitted) throw new Error(`request ${live.req.id}: token ${index} arrived, expected token ${live.emitted}`);
    // Causality: arrival <= first token <= every later token.
    if (!(atMs >= live.req.arrivalMs) || (live.emitted > 0 && !(atMs >= live.lastTokenMs))) {
      throw new Error(
        `request ${live.req.id}: token ${index} at ${atMs} ms is before its arrival (${live.req.arrivalMs} ms) or its previous token (${live.emitted > 0 ? live.lastTokenMs : "none"} ms)`,
      );
    }
    if (live.emitted === 0) {
      live.firstTokenMs = atMs;
      // Aggregated: the first token ends the prefill (in P/D the prefill rank reports it).
      if (!this.disaggregated) {
        this.sampler?.onPrefillDone(live.req.inputTokens);
        this.prefillEnded(live);
      }
    }
    // Gaps count up to the requested outputs (a token past them would have no gap slot).
    if (index < live.req.outputTokens) live.track.add(log, entry);
    live.lastTokenMs = atMs;
    live.emitted++;
  }

  /** Feeds one input to a request's coordinator and runs the actions it asks for. */
  private feed(live: LiveRequest, input: HandoffInput): void {
    const h = live.handoff;
    if (h === undefined) throw new Error(`request ${live.req.id} has no handoff`);
    for (const action of h.on(input)) this.execute(live, h, action);
  }

  /** Sends a handoff's command to a worker, feeds the outcome back (`what`, when it waits for one), applies its effects. */
  private command(live: LiveRequest, w: Worker, c: Command, what: CommandAction | undefined): void {
    const outcome = this.submit(w, c);
    if (what !== undefined) {
      this.feed(
        live,
        outcome.ok
          ? { type: "outcome", action: what, atMs: this.now, ok: true }
          : { type: "outcome", action: what, atMs: this.now, ok: false, reason: outcome.reason },
      );
    }
    if (outcome.ok) this.applyEffects(w, outcome.effects, this.now);
  }

  private execute(live: LiveRequest, h: HandoffCoordinator, action: HandoffAction): void {
    const id = live.req.id;
    switch (action.type) {
      case "submit_prefill": {
        const w = this.placeFirst(live);
        // The hidden prefill request: the prompt with an output limit of one token.
        this.command(live, w, { type: "submit_handoff_prefill", handoffId: id, request: this.requestInput(live, 1) }, "submit_prefill");
        return;
      }
      case "reserve_destination": {
        const placed = this.decodePlacement!.place(live.prompt);
        live.decodePlaced = placed;
        this.decodeTally!.placed(placed.index);
        const w = this.rankOf(this.decodePool[placed.index]!);
        live.decode = w;
        this.command(live, w, { type: "reserve_destination", handoffId: id, request: this.requestInput(live, live.req.outputTokens) }, "reserve_destination");
        return;
      }
      case "start_transfer": {
        const priced = h.priced!;
        if (this.network !== undefined) {
          // The network times it; the collector counts it now and takes its delay from the network.
          this.collector.onTransferStarted(priced.payloadBytes, 0);
          this.sampler?.onTransferStarted();
          live.transfer = this.network.request(this.now, live, live.first!.id, live.decode!.id, priced.payloadBytes);
          return;
        }
        if (!(action.delayMs >= 0) || !Number.isFinite(action.delayMs)) throw new Error(`request ${id}: transfer delay ${action.delayMs} ms`);
        this.collector.onTransferStarted(priced.payloadBytes, action.delayMs);
        this.sampler?.onTransferStarted();
        this.queue.push(this.now + action.delayMs, Phase.transferCompletion, Stage.decode, live.decode!.order, { kind: "transfer", live });
        if (this.fastDecode) this.transferTimes.push(this.now + action.delayMs);
        return;
      }
      case "activate_destination":
        this.command(live, live.decode!, { type: "activate_destination", handoffId: id }, "activate_destination");
        return;
      case "release_source":
        this.command(live, live.first!, { type: "release_source", handoffId: id }, "release_source");
        return;
      case "cancel_source":
        this.command(live, live.first!, { type: "cancel_source", handoffId: id }, undefined);
        return;
      case "cancel_destination":
        this.command(live, live.decode!, { type: "cancel_destination", handoffId: id }, undefined);
        return;
      case "complete":
        if (!action.ok) {
          if (live.rejected !== undefined) this.terminate(live, "rejected", live.rejected);
          else this.terminate(live, "failed", action.reason);
        }
        return;
    }
  }

  private terminate(live: LiveRequest, status: RequestStatus, reason: string | undefined): void {
    if (this.live.get(live.req.id) !== live) return;
    this.live.delete(live.req.id);
    if (live.firstPlaced !== undefined) this.firstPlacement.finished?.(live.firstPlaced);
    if (live.decodePlaced !== undefined) this.decodePlacement!.finished?.(live.decodePlaced);
    if (live.handoff !== undefined) {
      // The replay sends no more commands for its handoff (a terminal request's last action was
      // its coordinator's `complete`): its ranks drop what they kept of it.
      live.first?.rank.forgetHandoff(live.req.id);
      live.decode?.rank.forgetHandoff(live.req.id);
    }
    const { req } = live;
    const completed = status === "completed";
    this.sampler?.onTerminal(completed);
    const first = live.emitted > 0 ? live.firstTokenMs : undefined;
    const last = live.emitted > 0 ? live.lastTokenMs : undefined;
    const terminalMs = last ?? this.now;
    this.collector.onTerminal({
      status,
      inputTokens: req.inputTokens,
      outputTokens: live.emitted,
      arrivalMs: req.arrivalMs,
      terminalMs,
      firstTokenMs: first,
      lastTokenMs: last,
      reusedTokens: live.reused,
      gaps: completed ? live.track : undefined,
      ...(reason === undefined ? {} : { reason }),
    });
    const record: RequestRecord = {
      request_id: req.id,
      status,
      ...(reason === undefined ? {} : { reason }),
      arrival_ms: req.arrivalMs,
      admitted_ms: live.admittedMs ?? null,
      first_token_ms: first ?? null,
      last_token_ms: last ?? null,
      ttft_ms: first === undefined ? null : first - req.arrivalMs,
      tpot_ms: first !== undefined && last !== undefined && live.emitted >= 2 ? (last - first) / (live.emitted - 1) : null,
      e2e_ms: last === undefined ? null : last - req.arrivalMs,
      input_tokens: req.inputTokens,
      output_tokens: live.emitted,
      requested_output_tokens: req.outputTokens,
      reused_tokens: live.reused,
      preemptions: live.preemptions,
      workers: this.workersOf(live),
      ...(this.dpRoles.size === 0 ? {} : { dp_ranks: this.dpRanksOf(live) }),
      ...(live.handoff === undefined ? {} : { handoff: this.handoffRecord(live, live.handoff) }),
    };
    this.records.add(req.index, record);
    if (this.onProgress !== undefined && this.collector.terminalCount >= this.nextProgress) {
      this.nextProgress += this.progressEvery;
      this.onProgress({ arrived: this.collector.arrivedCount, terminal: this.collector.terminalCount, nowMs: this.now });
    }
  }

  /** Plain literals, not spreads: spreading conditional parts gave every record's object a map of its own. */
  private workersOf(live: LiveRequest): RequestRecord["workers"] {
    const { first, decode } = live;
    if (!this.disaggregated) return first === undefined ? {} : { aggregated: first.id };
    if (first === undefined) return decode === undefined ? {} : { decode: decode.id };
    return decode === undefined ? { prefill: first.id } : { prefill: first.id, decode: decode.id };
  }

  /** The data-parallel rank of each of its workers, for the roles with D > 1. */
  private dpRanksOf(live: LiveRequest): NonNullable<RequestRecord["dp_ranks"]> {
    const out: { aggregated?: number; prefill?: number; decode?: number } = {};
    for (const w of [live.first, live.decode]) if (w !== undefined && this.dpRoles.has(w.role)) out[w.role] = w.dp;
    return out;
  }

  private handoffRecord(live: LiveRequest, h: HandoffCoordinator): HandoffRecord {
    const p = h.priced;
    const t = p?.terms;
    return {
      source_held_ms: h.times.sourceHeldMs ?? null,
      destination_reserved_ms: h.times.destinationReservedMs ?? null,
      destination_activated_ms: h.times.destinationActivatedMs ?? null,
      source_released_ms: h.times.sourceReleasedMs ?? null,
      destination_hit_tokens: live.decodeHitTokens ?? null,
      mode: t?.mode ?? null,
      unit: t?.unit ?? null,
      block_size_tokens: t?.unit === "block" ? t.blockSizeTokens : null,
      backoff_tokens: t?.backoffTokens ?? null,
      transferred_tokens: t?.transferredTokens ?? null,
      prompt_units: t?.promptUnits ?? null,
      missing_units: t?.missing?.units ?? null,
      bytes_per_unit: t?.bytesPerUnit ?? null,
      fixed_bytes: t === undefined ? null : t.mode === "destination_missing" && t.missing !== undefined ? t.missing.fixedBytes : t.fixedBytes,
      payload_bytes: p?.payloadBytes ?? null,
      bandwidth_gbps: t?.bandwidthGbps ?? null,
      delay_ms: h.delayMs ?? null,
      ...(live.transfer === undefined ? {} : networkTimes(live.transfer)),
    };
  }

  private stuck(reason: string): ReplayResult {
    const stuck: StuckRequest[] = [];
    for (const live of this.live.values()) {
      if (stuck.length >= MAX_STUCK_LISTED) break;
      stuck.push(this.describe(live));
    }
    const more = this.live.size > stuck.length ? ` (the first ${stuck.length} of ${this.live.size} listed)` : "";
    return { ok: false, reason: `the replay can make no progress at ${this.now} ms: ${reason}${more}`, stuck, atMs: this.now };
  }

  private describe(live: LiveRequest): StuckRequest {
    const rankState = (w: Worker) => {
      const m = w.metrics;
      const pages = m === undefined ? "" : `; ${m.running} running, ${m.waiting} waiting, ${m.pagesFree} of ${m.pagesUsed + m.pagesFree} pages free`;
      return `${w.label}${pages}`;
    };
    const prompt = `prompt of ${live.req.inputTokens} tokens, ${live.req.outputTokens} output tokens`;
    const h = live.handoff;
    if (h === undefined || h.phase === "prefilling" || h.phase === "submitting" || h.phase === "new") {
      const w = live.first;
      const where = w === undefined ? "not placed" : `on ${w.label}`;
      const state =
        live.admittedMs === undefined ? "waiting for admission" : live.emitted > 0 ? `running after ${live.emitted} tokens` : "admitted, no token yet";
      return { request_id: live.req.id, where: `${where}, ${state}`, why: `${prompt}; ${w === undefined ? "" : rankState(w)}` };
    }
    const src = live.first === undefined ? "" : ` (source held on ${live.first.label})`;
    const dst = live.decode;
    switch (h.phase) {
      case "reserving":
      case "awaiting_reservation":
        return {
          request_id: live.req.id,
          where: `awaiting a destination reservation on ${dst?.label ?? "decode worker ?"}${src}`,
          why: `${prompt}; the decode rank has not found room for it; ${dst === undefined ? "" : rankState(dst)}`,
        };
      case "transferring":
      case "activating":
      case "releasing":
        return { request_id: live.req.id, where: `in transfer to ${dst?.label ?? "decode worker ?"}${src}`, why: prompt };
      case "complete":
      case "failed":
        return {
          request_id: live.req.id,
          where: `on ${dst?.label ?? "decode worker ?"}, ${live.emitted > 0 ? `decoding after ${live.emitted} tokens` : "waiting to decode"}`,
          why: `${prompt}; ${dst === undefined ? "" : rankState(dst)}`,
        };
    }
  }
}

/**
 * The records, built from the store when first read (most callers read only the report), then
 * kept (the store is dropped). Outside the engine, so the result keeps only the store alive.
 */
function lazyRecords(store: RecordStore<RequestRecord>): () => readonly RequestRecord[] {
  let from: RecordStore<RequestRecord> | undefined = store;
  let records: readonly RequestRecord[] | undefined;
  return () => {
    if (records === undefined) {
      records = from!.toArray();
      from = undefined;
    }
    return records;
  };
}

/** A handoff record's network fields; its delay runs from the request to the last byte. */
function networkTimes(t: NetworkTransfer): Partial<HandoffRecord> {
  const since = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? null : a - b);
  return {
    delay_ms: since(t.endMs, t.requestedMs),
    transfer_path: t.path,
    transfer_start_ms: t.startMs ?? null,
    transfer_first_byte_ms: t.firstByteMs ?? null,
    transfer_end_ms: t.endMs ?? null,
    queue_ms: since(t.startMs, t.requestedMs),
    setup_ms: since(t.firstByteMs, t.startMs),
    transfer_ms: since(t.endMs, t.firstByteMs),
  };
}
