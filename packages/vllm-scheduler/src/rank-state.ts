/**
 * The state of one rank and the helpers every concern shares (admission, the step, handoff
 * commands). Internal to the package: `Rank` is the public face.
 */
import {
  KvCacheManager,
  poolGroupsForProfile,
  type KvCacheManagerApi,
  type KvEvent,
  type KvSequence,
  type PrefillChunking,
  type PromptTokens,
} from "@kvsim/kv-pool";
import {
  groupBlocksForTokens,
  isGroupedProfile,
  prefillCheckpointBlocks,
  tokens,
  type CacheGroup,
  type EngineSettings,
  type Profile,
} from "@kvsim/profile-schema";
import { sourceTerms, type SourceTermsOptions } from "@kvsim/transfer-rules";
import type { KvOffload, LookupMemo, OffloadLoad } from "@kvsim/kv-offload";
import { beginLoad, destinationTierHit } from "./offload-loads.js";
import type { RankConfig, RankMetrics, RankRole } from "./contract.js";
import { Deque } from "./deque.js";
import { IdTable } from "./id-table.js";
import { kvBlockSizeTokens } from "./geometry.js";
import { RankConfigError, mambaBlockSize, rankConfigProblems } from "./rank-config.js";
import { createTimingModel, type TimingModel } from "./timing-model.js";
import { requestIdHash, tokenIdFromHash } from "./token-ids.js";
import { StepRows } from "./step-rows.js";
import { Speculation } from "./speculative.js";
import { SpeculativeTiming } from "./speculative-timing.js";
import type { EffectsBuilder } from "./effects-builder.js";

export type Phase =
  /** In the waiting deque (new or preempted). */
  | "waiting"
  | "running"
  /** Async scheduling: produced its last token in a step still in flight; freed when that step ends. */
  | "finishing"
  /** An activated destination waiting for its one-token row (the materialized queue). */
  | "activated"
  /** A destination in the pending FIFO, not yet reserved. */
  | "pending_destination"
  /** A destination holding reserved blocks, waiting for activation. */
  | "reserved_destination"
  /** A finished source holding its blocks until release or cancel. */
  | "held"
  /** Holding reserved blocks while its prefix loads from an offload tier (vLLM's WAITING_FOR_REMOTE_KVS). */
  | "loading"
  /** Left the rank; stale queue entries of it are skipped. */
  | "gone";

/** A retired handoff's tombstone: its side and, for a destination, how it ended. */
export type RetiredHandoff = "source" | "destination" | "destination_cancelled" | "destination_rejected";

export interface Handoff {
  readonly id: string;
  readonly side: "source" | "destination";
  /** pending: source computing / destination not yet reserved. */
  state: "pending" | "held" | "reserved" | "activated" | "retired";
  /** Retired by a cancel (an activation after it is refused). */
  cancelled: boolean;
  readonly req: Req;
  /** The prompt length N the handoff was priced for (before the backoff). */
  readonly promptTokens: number;
  /** Tokens the prefill computes and hands over: T = N - backoff. */
  readonly transferredTokens: number;
  /** Destination: its own prefix hit at reservation. */
  hitTokens: number;
}

export interface Req {
  readonly id: string;
  readonly seq: KvSequence;
  /** Its prompt (the offload tiers look its blocks up). */
  readonly prompt: PromptTokens;
  /** A load from the offload tiers, from its start until its request is admitted or leaves. */
  load: OffloadLoad | undefined;
  /** Its last offload lookup, so a retried admission resumes the scan (kv-offload's LookupMemo). */
  tierMemo: LookupMemo | undefined;
  /** Tokens it held computed when its load finished (the GPU hit plus the tiers' part), for its admission; 0 otherwise. */
  loadedTokens: number;
  /** Prompt tokens on this rank (a grouped source's prompt is already truncated by the backoff). */
  readonly promptTokens: number;
  readonly maxOutputTokens: number;
  computed: number;
  outputs: number;
  preemptions: number;
  phase: Phase;
  handoff: Handoff | undefined;
  /** Tokens scheduled in the step being planned (0 outside a step). */
  stepTokens: number;
  /** Speculative decoding: drafts the drafter proposed after the request's last sampled token (dropped by a preemption). */
  drafts: number;
  /** Of `stepTokens`, the drafts to verify (0 outside a step). */
  stepDrafts: number;
  /** The request id's hash (token ids and acceptance draws derive from it). */
  readonly idHash: number;
  /** Async scheduling: a finishing request whose blocks a preemption already freed. */
  freed: boolean;
}

const NO_EVENTS: readonly KvEvent[] = [];

/** One rank's configuration, pool, queues and counters, with the helpers its concerns share. */
export class RankState {
  readonly role: RankRole;
  readonly profile: Profile;
  readonly engine: EngineSettings;
  readonly pool: KvCacheManagerApi;
  readonly timing: TimingModel;
  readonly groups: readonly CacheGroup[];
  readonly usablePages: number;
  /** The 0.32.0 checkpoint blocks a prompt takes, summed over the groups (constant per rank: computed once, not per prompt). */
  private readonly checkpointPages: number;
  readonly collectKvEvents: boolean;
  readonly terms: SourceTermsOptions;
  /** Tokens per linear block (missing tokens of a linear destination are counted in them). */
  readonly linearBlockSize: number | undefined;
  /** The block a handoff counts in: the linear block, or the full-attention groups' block. */
  readonly handoffBlockSize: number;
  /** Mamba "align" mode: prefill chunks end on multiples of this block (docs/rules/vllm-scheduling.md §3.6). */
  readonly alignBlock: number | undefined;
  /** How the pool needs prefill chunks cut (kv-pool's PrefillChunking). */
  readonly chunking: PrefillChunking;

  readonly requests = new IdTable<Req>();
  /** Live handoffs; one leaves this map when it retires (its request and prompt must not stay reachable). */
  readonly handoffs = new IdTable<Handoff>();
  /**
   * What is left of a retired handoff (or one rejected at the command): a constant string per id, so
   * late cleanup commands stay no-ops, activation after a cancel or rejection stays refused, and
   * the id stays used, without keeping its request alive.
   */
  readonly retiredHandoffs = new IdTable<RetiredHandoff>();
  readonly running: Req[] = [];
  readonly waiting = new Deque<Req>();
  waitingLive = 0;
  /** Activated destinations, served before the waiting deque (vLLM serves promoted requests first). */
  readonly activated = new Deque<Req>();
  activatedLive = 0;
  readonly pendingDestinations = new Deque<Handoff>();
  pendingLive = 0;
  reservedCount = 0;
  /** Async scheduling: requests in `running` that already produced their last token (phase "finishing"). */
  finishingCount = 0;
  /** Bumped whenever blocks are freed, so a failed destination head is retried only when capacity grew. */
  capacityGeneration = 0;
  reserveFailedAt: { handoff: Handoff; generation: number } | undefined;
  /** The step planner's scratch (step-rows.ts). */
  readonly stepRows = new StepRows();
  /** Speculative decoding (engine.speculative_config), on decode and aggregated ranks; undefined when off. */
  readonly speculation: Speculation | undefined;
  /** Offload tiers below the pool (config.offload); undefined without. */
  readonly offload: KvOffload | undefined;
  /** Requests loading from the offload tiers (phase "loading"), in the order their loads started. */
  readonly loading: Req[] = [];

  constructor(config: RankConfig) {
    this.groups = poolGroupsForProfile(config.profile, config.engine);
    this.collectKvEvents = config.collectKvEvents ?? false;
    this.offload = config.offload;
    this.pool = new KvCacheManager({
      numPages: config.engine.num_gpu_blocks,
      groups: this.groups,
      enablePrefixCaching: config.engine.enable_prefix_caching,
      vllmVersion: config.profile.vllm_version,
      collectEvents: this.collectKvEvents,
      // The offload tiers hear what the pool caches and evicts, and look up in its keys.
      ...(this.offload === undefined ? {} : { blockListener: this.offload }),
    });
    this.offload?.attach(this.pool);
    this.chunking = this.pool.prefillChunking;
    this.alignBlock = this.chunking === "any" ? undefined : mambaBlockSize(this.groups);
    const problems = rankConfigProblems(config, this.alignBlock);
    if (problems.length > 0) throw new RankConfigError(problems);
    this.role = config.role;
    this.profile = config.profile;
    this.engine = config.engine;
    this.usablePages = config.engine.num_gpu_blocks - 1;
    let checkpointPages = 0;
    for (const g of this.groups) checkpointPages += prefillCheckpointBlocks(g, config.profile.vllm_version, config.engine.enable_prefix_caching);
    this.checkpointPages = checkpointPages;
    const spec = config.role === "prefill" ? undefined : config.engine.speculative_config;
    this.speculation = spec === undefined ? undefined : new Speculation(spec);
    const timing = createTimingModel(config.timing, config.profile, config.engine);
    this.timing = spec === undefined ? timing : new SpeculativeTiming(timing, spec, config.profile);
    this.linearBlockSize = isGroupedProfile(config.profile) ? undefined : kvBlockSizeTokens(config.profile, config.engine);
    this.handoffBlockSize = this.linearBlockSize ?? this.groups.find((g) => g.kind === "full_attention")?.block_size_tokens ?? 1;
    this.terms = {
      mode: config.kvTransfer?.mode ?? "destination_missing",
      bandwidthGbps: config.kvTransfer?.bandwidthGbps,
      blockSizeTokens: this.linearBlockSize,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Queries

  /** Running requests that a step could still schedule, or waiting or activated ones. */
  hasSchedulableWork(): boolean {
    return this.running.length > this.finishingCount || this.waitingLive > 0 || this.activatedLive > 0;
  }

  waitingCount(): number {
    return this.waitingLive + this.activatedLive + this.pendingLive + this.reservedCount + this.loading.length;
  }

  metrics(): RankMetrics {
    const m = this.pool.metrics();
    return { running: this.running.length, waiting: this.waitingCount(), pagesUsed: m.usedPages, pagesFree: m.freePages, usage: m.usage };
  }

  takeEvents(): readonly KvEvent[] {
    return this.collectKvEvents ? this.pool.takeEvents() : NO_EVENTS;
  }

  // ---------------------------------------------------------------------------------------------
  // Request lifecycle

  newRequest(id: string, prompt: PromptTokens, maxOutputTokens: number, phase: Phase | undefined): Req {
    const idHash = requestIdHash(id);
    const req: Req = {
      id,
      // Output k is sampled token k: its id is computed when its block is hashed, never stored.
      seq: this.pool.createSequence(id, prompt, (k) => tokenIdFromHash(idHash, k)),
      prompt,
      load: undefined,
      loadedTokens: 0,
      tierMemo: undefined,
      promptTokens: prompt.length,
      maxOutputTokens,
      computed: 0,
      outputs: 0,
      preemptions: 0,
      phase: phase ?? "waiting",
      handoff: undefined,
      stepTokens: 0,
      drafts: 0,
      stepDrafts: 0,
      idHash,
      freed: false,
    };
    this.requests.set(id, req);
    return req;
  }

  enqueueWaiting(req: Req): void {
    req.phase = "waiting";
    this.waiting.pushBack(req);
    this.waitingLive++;
  }

  /** Preemption by recompute (docs/rules/vllm-scheduling.md §1.3), once its blocks are freed tail first: computed 0, to the front of waiting. */
  requeuePreempted(req: Req, fx: EffectsBuilder): void {
    req.computed = 0;
    req.drafts = 0; // vLLM drops a preempted request's drafts
    req.preemptions++;
    req.phase = "waiting";
    this.waiting.pushFront(req);
    this.waitingLive++;
    fx.preemption(req.id);
  }

  /** A request produced its last token (or had none to produce). */
  complete(req: Req, fx: EffectsBuilder): void {
    fx.finish(req.id);
    const h = req.handoff;
    // Surviving mutants: VS-50 (MUTANTS.md).
    if (h?.side === "source" && h.state === "pending") {
      // Source completion (docs/rules/grouped-pd.md §3): free what vLLM frees before the transfer, hold the rest.
      const releasedPages = this.pool.releaseSourceSkipped(req.seq, req.computed);
      this.capacityGeneration++;
      const heldPages = this.pool.heldBlocks(req.seq).reduce((a, b) => a + b, 0);
      h.state = "held";
      req.phase = "held";
      fx.fact({
        type: "source_held",
        handoffId: h.id,
        requestId: req.id,
        terms: sourceTerms(this.profile, tokens(h.promptTokens), this.terms),
        heldPages,
        releasedPages,
      });
      return;
    }
    if (h !== undefined) this.retireHandoff(h, false);
    this.pool.free(req.seq);
    this.capacityGeneration++;
    this.forget(req);
  }

  /** Removes a request from wherever it is and frees its blocks (cancel and release paths); retires its handoff. */
  dropRequest(req: Req, cancelled: boolean): void {
    switch (req.phase) {
      case "waiting":
        this.waitingLive--;
        break;
      case "activated":
        this.activatedLive--;
        break;
      // Surviving mutants: VS-51 (MUTANTS.md).
      case "pending_destination":
        this.pendingLive--;
        break;
      case "reserved_destination":
        this.reservedCount--;
        break;
      case "held":
        break;
      case "loading":
        this.endLoad(req);
        this.loading.splice(this.loading.indexOf(req), 1);
        break;
      case "finishing":
        if (req.freed) {
          // A preemption already freed it and took it off the running list; its step is in flight.
          if (req.handoff !== undefined) this.retireHandoff(req.handoff, cancelled);
          this.forget(req);
          return;
        }
        this.finishingCount--;
        this.removeRunning(req);
        break;
      case "running":
        this.removeRunning(req);
        break;
      case "gone":
        return;
    }
    if (req.handoff !== undefined) this.retireHandoff(req.handoff, cancelled);
    this.endLoad(req);
    this.pool.free(req.seq);
    this.capacityGeneration++;
    this.forget(req);
  }

  /** Forgets a rejected request (its blocks already freed) and retires its handoff. */
  retire(req: Req): void {
    if (req.handoff !== undefined) this.retireHandoff(req.handoff, true);
    this.forget(req);
  }

  /** Retires a handoff: out of the live map (its request may be collected), a tombstone in its place. */
  retireHandoff(h: Handoff, cancelled: boolean): void {
    // Surviving mutants: VS-52 (MUTANTS.md).
    if (h.state === "retired") return;
    h.state = "retired";
    h.cancelled = cancelled;
    this.handoffs.delete(h.id);
    // Surviving mutants: VS-53 (MUTANTS.md).
    if (this.reserveFailedAt?.handoff === h) this.reserveFailedAt = undefined;
    this.retiredHandoffs.set(h.id, h.side === "source" ? "source" : cancelled ? "destination_cancelled" : "destination");
  }

  private removeRunning(req: Req): void {
    const i = this.running.indexOf(req);
    // Surviving mutants: VS-54 (MUTANTS.md).
    if (i < 0) throw new Error(`running request ${req.id} is not in the running list`);
    this.running.splice(i, 1);
  }

  /** A request's offload load is over (loaded, or its request left): its tier blocks may be evicted again. */
  endLoad(req: Req): void {
    if (req.load === undefined) return;
    this.offload!.release(req.load);
    req.load = undefined;
  }

  forget(req: Req): void {
    req.phase = "gone";
    this.requests.delete(req.id);
  }

  /** Drops requests that finished during a step from the running list. */
  compactRunning(): void {
    let w = 0;
    // Surviving mutants: VS-55 (MUTANTS.md).
    for (const req of this.running) if (req.phase === "running" || req.phase === "finishing") this.running[w++] = req;
    // Assigning an array's length, even its own, is a runtime call: most steps drop nothing.
    // Stryker disable next-line ConditionalExpression: VS-56
    if (w !== this.running.length) this.running.length = w;
  }

  /** The live head of a lazily cleaned queue (cancelled entries are dropped when they surface). */
  peekLive(queue: Deque<Req>, phase: Phase): Req | undefined {
    for (;;) {
      const req = queue.peekFront();
      if (req === undefined || req.phase === phase) return req;
      queue.popFront();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Destinations (shared by the step and the handoff commands)

  /**
   * Reserves pending destinations in FIFO order: only the head is tried, without preempting, and
   * only when capacity was freed since it last failed (docs/rules/grouped-pd.md §4).
   */
  tryReserveDestinations(fx: EffectsBuilder): void {
    for (;;) {
      const h = this.peekPendingDestination();
      if (h === undefined) return;
      const last = this.reserveFailedAt;
      // Surviving mutants: VS-57 (MUTANTS.md).
      if (last?.handoff === h && last.generation === this.capacityGeneration) return;
      // With offload tiers, the destination's own hit continues into them: what they hold is loaded,
      // not transferred (the handoff is priced with the longer hit).
      const tierHit = destinationTierHit(this, h);
      const res = this.pool.reserveDestination(h.req.seq, h.transferredTokens);
      if (res === undefined) {
        this.reserveFailedAt = { handoff: h, generation: this.capacityGeneration };
        return;
      }
      this.pendingDestinations.popFront();
      this.pendingLive--;
      this.reservedCount++;
      h.state = "reserved";
      h.hitTokens = res.hitTokens;
      h.req.phase = "reserved_destination";
      let missingBlocks = res.missingFullAttentionBlocks;
      if (tierHit !== undefined) {
        if (tierHit.gpuHitTokens !== res.hitTokens)
          throw new Error(`destination ${h.id}: GPU hit ${res.hitTokens} at reservation, ${tierHit.gpuHitTokens} at lookup`);
        beginLoad(this, h.req, tierHit, fx, this.offload!.clockMs);
        missingBlocks -= (tierHit.tokens - res.hitTokens) / this.handoffBlockSize;
        h.hitTokens = tierHit.tokens;
      }
      const missing =
        this.linearBlockSize === undefined
          ? ({ unit: "block", units: missingBlocks } as const)
          : ({ unit: "token", units: missingBlocks * this.linearBlockSize } as const);
      fx.fact({ type: "destination_reserved", handoffId: h.id, requestId: h.req.id, missing, hitTokens: h.hitTokens });
    }
  }

  /** True when the next `tryReserveDestinations` would try the pending head (it never failed, or capacity grew since). */
  reservationRetryDue(): boolean {
    const h = this.peekPendingDestination();
    if (h === undefined) return false;
    const last = this.reserveFailedAt;
    return !(last?.handoff === h && last.generation === this.capacityGeneration);
  }

  peekPendingDestination(): Handoff | undefined {
    for (;;) {
      const h = this.pendingDestinations.peekFront();
      // Surviving mutants: VS-58 (MUTANTS.md).
      if (h === undefined || (h.state === "pending" && h.req.phase === "pending_destination")) return h;
      this.pendingDestinations.popFront(); // cancelled while pending
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Limits

  /**
   * Why a prompt can never be served, or undefined. `n` is the prompt length, `t` the tokens this
   * rank holds for it (T for a handoff), `outputTokens` the tokens asked for.
   */
  promptRejection(n: number, t: number, outputTokens: number): string | undefined {
    const maxModelLen = this.engine.max_model_len;
    if (maxModelLen !== undefined && n >= maxModelLen) return `prompt of ${n} tokens reaches max_model_len ${maxModelLen}`;
    // vLLM's server refuses a request whose prompt and max_tokens together exceed the context
    // length, before it runs; it never starts one it would have to cut short.
    if (maxModelLen !== undefined && n + outputTokens > maxModelLen) {
      return `prompt of ${n} tokens + ${outputTokens} output tokens = ${n + outputTokens} exceeds max_model_len ${maxModelLen}`;
    }
    if (!this.engine.enable_chunked_prefill && t > this.engine.max_num_batched_tokens) {
      return `prompt of ${t} tokens exceeds max_num_batched_tokens ${this.engine.max_num_batched_tokens} with chunked prefill off`;
    }
    const pages = this.minimumPages(t);
    if (pages > this.usablePages)
      return `prompt of ${t} tokens needs at least ${pages} pages across its cache groups, more than the ${this.usablePages} usable pages of the pool`;
    return undefined;
  }

  /**
   * The fewest pages `t` tokens take across all groups: the window-trimmed blocks plus the 0.32.0
   * checkpoint blocks the pool takes (with prefix caching only, as kv-pool does).
   */
  private minimumPages(t: number): number {
    let pages = this.checkpointPages;
    for (const g of this.groups) pages += groupBlocksForTokens(g, tokens(t));
    return pages;
  }
}
