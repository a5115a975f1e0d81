/**
 * One vLLM rank as a pure state machine (vllm-rules.md section 1; grouped-pd.md sections 3-5):
 * commands in, outcomes out; `step(now)` plans one forward pass and returns its duration and effects.
 */
import {
  KvCacheManager,
  promptPrefix,
  poolGroupsForProfile,
  type KvCacheManagerApi,
  type KvEvent,
  type KvSequence,
  type PrefillChunking,
  type PrefixHit,
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
import { backoffTokens, sourceTerms, transferredTokens, type SourceTermsOptions } from "@kvsim/transfer-rules";
import type {
  Admission,
  Command,
  CommandOutcome,
  Effects,
  LifecycleFact,
  RankConfig,
  RankMetrics,
  RankRole,
  RequestInput,
  ScheduledWork,
  StepResult,
  TokenEmitted,
} from "./contract.js";
import { Deque } from "./deque.js";
import { kvBlockSizeTokens } from "./geometry.js";
import { RankConfigError, mambaBlockSize, rankConfigProblems } from "./rank-config.js";
import { createTimingModel, type TimingModel } from "./timing-model.js";
import { requestIdHash, tokenIdFromHash } from "./token-ids.js";

type Phase =
  /** In the waiting deque (new or preempted). */
  | "waiting"
  | "running"
  /** An activated destination waiting for its one-token row (the materialized queue). */
  | "activated"
  /** A destination in the pending FIFO, not yet reserved. */
  | "pending_destination"
  /** A destination holding reserved blocks, waiting for activation. */
  | "reserved_destination"
  /** A finished source holding its blocks until release or cancel. */
  | "held"
  /** Left the rank; stale queue entries of it are skipped. */
  | "gone";

interface Handoff {
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

interface Req {
  readonly id: string;
  readonly idHash: number;
  readonly seq: KvSequence;
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
}

class EffectsBuilder {
  readonly tokens: TokenEmitted[] = [];
  readonly admissions: Admission[] = [];
  readonly preemptions: { readonly requestId: string }[] = [];
  readonly rejections: { readonly requestId: string; readonly reason: string }[] = [];
  readonly finished: { readonly requestId: string }[] = [];
  readonly lifecycle: LifecycleFact[] = [];

  get empty(): boolean {
    return (
      this.tokens.length === 0 &&
      this.admissions.length === 0 &&
      this.preemptions.length === 0 &&
      this.rejections.length === 0 &&
      this.finished.length === 0 &&
      this.lifecycle.length === 0
    );
  }

  build(kvEvents: readonly KvEvent[], metrics: RankMetrics): Effects {
    return {
      tokens: this.tokens,
      admissions: this.admissions,
      preemptions: this.preemptions,
      rejections: this.rejections,
      finished: this.finished,
      lifecycle: this.lifecycle,
      kvEvents,
      metrics,
    };
  }
}

const SOURCE_COMMANDS = new Set<Command["type"]>(["submit_handoff_prefill", "release_source", "cancel_source"]);
const DESTINATION_COMMANDS = new Set<Command["type"]>(["reserve_destination", "activate_destination", "cancel_destination"]);
const NO_EVENTS: readonly KvEvent[] = [];

const fail = (reason: string): CommandOutcome => ({ ok: false, reason });

/**
 * One vLLM v1 rank. See the package README for the step algorithm, timing and handoff rules.
 *
 * Construction refuses an unusable configuration with a {@link RankConfigError} listing every
 * problem. Commands never throw for expected outcomes: a refused command returns
 * `{ ok: false, reason }` and changes nothing.
 */
export class Rank {
  readonly role: RankRole;
  private readonly profile: Profile;
  private readonly engine: EngineSettings;
  private readonly pool: KvCacheManagerApi;
  private readonly timing: TimingModel;
  private readonly groups: readonly CacheGroup[];
  private readonly usablePages: number;
  private readonly collectKvEvents: boolean;
  private readonly terms: SourceTermsOptions;
  /** Tokens per linear block (missing tokens of a linear destination are counted in them). */
  private readonly linearBlockSize: number | undefined;
  /** Mamba "align" mode: prefill chunks end on multiples of this block (vllm-rules 3.6). */
  private readonly alignBlock: number | undefined;
  /** How the pool needs prefill chunks cut (kv-pool's PrefillChunking). */
  private readonly chunking: PrefillChunking;

  private readonly requests = new Map<string, Req>();
  private readonly handoffs = new Map<string, Handoff>();
  /** Handoffs whose request was rejected at the command: cleanup commands on them are no-ops. */
  private readonly rejectedHandoffs = new Map<string, "source" | "destination">();
  private readonly running: Req[] = [];
  private readonly waiting = new Deque<Req>();
  private waitingLive = 0;
  /** Activated destinations, served before the waiting deque (vLLM serves promoted requests first). */
  private readonly activated = new Deque<Req>();
  private activatedLive = 0;
  private readonly pendingDestinations = new Deque<Handoff>();
  private pendingLive = 0;
  private reservedCount = 0;
  /** Bumped whenever blocks are freed, so a failed destination head is retried only when capacity grew. */
  private capacityGeneration = 0;
  private reserveFailedAt: { handoff: Handoff; generation: number } | undefined;

  constructor(config: RankConfig) {
    this.groups = poolGroupsForProfile(config.profile, config.engine);
    this.collectKvEvents = config.collectKvEvents ?? false;
    this.pool = new KvCacheManager({
      numPages: config.engine.num_gpu_blocks,
      groups: this.groups,
      enablePrefixCaching: config.engine.enable_prefix_caching,
      vllmVersion: config.profile.vllm_version,
      collectEvents: this.collectKvEvents,
    });
    this.chunking = this.pool.prefillChunking;
    this.alignBlock = this.chunking === "any" ? undefined : mambaBlockSize(this.groups);
    const problems = rankConfigProblems(config, this.alignBlock);
    if (problems.length > 0) throw new RankConfigError(problems);
    this.role = config.role;
    this.profile = config.profile;
    this.engine = config.engine;
    this.usablePages = config.engine.num_gpu_blocks - 1;
    this.timing = createTimingModel(config.timing, config.profile, config.engine);
    this.linearBlockSize = isGroupedProfile(config.profile) ? undefined : kvBlockSizeTokens(config.profile, config.engine);
    this.terms = {
      mode: config.kvTransfer?.mode ?? "destination_missing",
      bandwidthGbps: config.kvTransfer?.bandwidthGbps,
      blockSizeTokens: this.linearBlockSize,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Queries

  /** True when a step could schedule something now or later without a command (running or waiting requests). */
  hasWork(): boolean {
    return this.running.length > 0 || this.waitingLive > 0 || this.activatedLive > 0;
  }

  /** True when the rank holds nothing: no request, no held source, no pending or reserved destination. */
  isDrained(): boolean {
    return this.requests.size === 0;
  }

  /** Prefix-hit tokens this rank would give a prompt now (for KV-aware placement). Changes nothing. */
  peekPrefixHitTokens(prompt: PromptTokens): number {
    return this.pool.peekPrefixHitTokens(prompt);
  }

  /** Running requests, and waiting ones (new, preempted, activated and pending or reserved destinations). */
  load(): { readonly running: number; readonly waiting: number } {
    return { running: this.running.length, waiting: this.waitingCount() };
  }

  metrics(): RankMetrics {
    const m = this.pool.metrics();
    return { running: this.running.length, waiting: this.waitingCount(), pagesUsed: m.usedPages, pagesFree: m.freePages, usage: m.usage };
  }

  private waitingCount(): number {
    return this.waitingLive + this.activatedLive + this.pendingLive + this.reservedCount;
  }

  // ---------------------------------------------------------------------------------------------
  // Commands

  submit(command: Command): CommandOutcome {
    if (SOURCE_COMMANDS.has(command.type) && this.role !== "prefill") {
      return fail(`${command.type} is a source command: it needs a prefill rank, this rank is ${this.role}`);
    }
    if (DESTINATION_COMMANDS.has(command.type) && this.role !== "decode") {
      return fail(`${command.type} is a destination command: it needs a decode rank, this rank is ${this.role}`);
    }
    switch (command.type) {
      case "submit":
        return this.submitRequest(command.request);
      case "submit_handoff_prefill":
        return this.submitHandoffPrefill(command.handoffId, command.request);
      case "release_source":
        return this.releaseSource(command.handoffId, false);
      case "cancel_source":
        return this.releaseSource(command.handoffId, true);
      case "reserve_destination":
        return this.reserveDestination(command.handoffId, command.request);
      case "activate_destination":
        return this.activateDestination(command.handoffId);
      case "cancel_destination":
        return this.cancelDestination(command.handoffId);
      case "cancel_request":
        return this.cancelRequest(command.requestId);
    }
  }

  private submitRequest(request: RequestInput): CommandOutcome {
    const invalid = this.invalidRequest(request);
    if (invalid !== undefined) return fail(invalid);
    const fx = new EffectsBuilder();
    const n = request.prompt.tokens.length;
    const rejection = this.promptRejection(n, n, request.maxOutputTokens);
    if (rejection !== undefined) {
      fx.rejections.push({ requestId: request.id, reason: rejection });
    } else {
      const req = this.newRequest(request.id, request.prompt, request.maxOutputTokens, undefined);
      this.enqueueWaiting(req);
    }
    return this.ok("submitted", fx);
  }

  private submitHandoffPrefill(handoffId: string, request: RequestInput): CommandOutcome {
    const invalid = this.invalidHandoffId(handoffId) ?? this.invalidRequest(request);
    if (invalid !== undefined) return fail(invalid);
    const fx = new EffectsBuilder();
    const n = request.prompt.tokens.length;
    // Grouped P/D: the prompt is truncated by the backoff before the request exists (grouped-pd.md 3).
    const t = n - backoffTokens(this.profile, tokens(n));
    // The prefill rank is asked for one token (vLLM's proxy sends max_tokens = 1); the decode rank checks the real output.
    const rejection = this.promptRejection(n, t, 1);
    if (rejection !== undefined) {
      fx.rejections.push({ requestId: request.id, reason: rejection });
      this.rejectedHandoffs.set(handoffId, "source");
      return this.ok("submitted", fx);
    }
    // The truncated prompt shares the whole prompt's block hashes (computed once for both sides).
    const prompt = t === n ? request.prompt : promptPrefix(request.prompt, t);
    // The prefill rank samples exactly one token (vLLM's proxy sends max_tokens = 1).
    const req = this.newRequest(request.id, prompt, 1, undefined);
    const handoff: Handoff = { id: handoffId, side: "source", state: "pending", cancelled: false, req, promptTokens: n, transferredTokens: t, hitTokens: 0 };
    req.handoff = handoff;
    this.handoffs.set(handoffId, handoff);
    this.enqueueWaiting(req);
    return this.ok("submitted", fx);
  }

  /** release_source (cancel = false) and cancel_source (cancel = true). */
  private releaseSource(handoffId: string, cancel: boolean): CommandOutcome {
    const h = this.handoffs.get(handoffId);
    const fx = new EffectsBuilder();
    if (h?.side !== "source") return this.rejectedHandoffs.get(handoffId) === "source" ? this.ok("noop", fx) : fail(`unknown source handoff "${handoffId}"`);
    switch (h.state) {
      case "retired":
        return this.ok("noop", fx);
      case "held":
        this.dropRequest(h.req);
        break;
      case "pending":
        if (cancel) {
          this.dropRequest(h.req);
        } else {
          // Released before it completed: the request runs on and frees its blocks at completion.
          h.req.handoff = undefined;
        }
        break;
      case "reserved":
      case "activated":
        throw new Error(`source handoff ${handoffId} in destination state ${h.state}`);
    }
    h.state = "retired";
    h.cancelled = cancel;
    this.tryReserveDestinations(fx);
    return this.ok("applied", fx);
  }

  private reserveDestination(handoffId: string, request: RequestInput): CommandOutcome {
    const invalid = this.invalidHandoffId(handoffId) ?? this.invalidRequest(request);
    if (invalid !== undefined) return fail(invalid);
    const fx = new EffectsBuilder();
    const n = request.prompt.tokens.length;
    const t = transferredTokens(this.profile, tokens(n));
    const rejection = this.promptRejection(n, t, request.maxOutputTokens);
    if (rejection !== undefined) {
      fx.rejections.push({ requestId: request.id, reason: rejection });
      this.rejectedHandoffs.set(handoffId, "destination");
      return this.ok("accepted", fx);
    }
    const req = this.newRequest(request.id, request.prompt, request.maxOutputTokens, "pending_destination");
    const handoff: Handoff = { id: handoffId, side: "destination", state: "pending", cancelled: false, req, promptTokens: n, transferredTokens: t, hitTokens: 0 };
    req.handoff = handoff;
    this.handoffs.set(handoffId, handoff);
    this.pendingDestinations.pushBack(handoff);
    this.pendingLive++;
    this.tryReserveDestinations(fx);
    return this.ok("accepted", fx);
  }

  private activateDestination(handoffId: string): CommandOutcome {
    const h = this.handoffs.get(handoffId);
    if (h?.side !== "destination") {
      return fail(this.rejectedHandoffs.get(handoffId) === "destination" ? `destination handoff "${handoffId}" was rejected` : `unknown destination handoff "${handoffId}"`);
    }
    const fx = new EffectsBuilder();
    switch (h.state) {
      case "pending":
        return fail(`destination handoff "${handoffId}" is not reserved yet: wait for destination_reserved`);
      case "activated":
        return this.ok("noop", fx);
      case "retired":
        return h.cancelled ? fail(`destination handoff "${handoffId}" was cancelled`) : this.ok("noop", fx);
      case "held":
        throw new Error(`destination handoff ${handoffId} in source state held`);
      case "reserved":
        break;
    }
    const req = h.req;
    this.pool.activateDestination(req.seq, h.transferredTokens);
    // The decode rank computes exactly one token before it samples: the last prompt token (a
    // Mamba-type model received N - 1) or the recomputed last token (attention-only received N).
    req.computed = Math.min(h.transferredTokens, req.promptTokens - 1);
    h.state = "activated";
    this.reservedCount--;
    req.phase = "activated";
    this.activated.pushBack(req);
    this.activatedLive++;
    return this.ok("applied", fx);
  }

  private cancelDestination(handoffId: string): CommandOutcome {
    const h = this.handoffs.get(handoffId);
    const fx = new EffectsBuilder();
    if (h?.side !== "destination") {
      return this.rejectedHandoffs.get(handoffId) === "destination" ? this.ok("noop", fx) : fail(`unknown destination handoff "${handoffId}"`);
    }
    if (h.state === "retired") return this.ok("noop", fx);
    this.dropRequest(h.req);
    h.cancelled = true;
    this.tryReserveDestinations(fx);
    return this.ok("applied", fx);
  }

  private cancelRequest(requestId: string): CommandOutcome {
    const fx = new EffectsBuilder();
    const req = this.requests.get(requestId);
    if (req === undefined) return this.ok("noop", fx);
    if (req.handoff !== undefined) req.handoff.cancelled = true;
    this.dropRequest(req);
    this.tryReserveDestinations(fx);
    return this.ok("applied", fx);
  }

  // ---------------------------------------------------------------------------------------------
  // The step

  /**
   * Plans and prices one forward pass starting at `nowMs`. Returns undefined when nothing can run
   * now (idle, or only blocked work) and nothing changed. A pass that changed state without
   * computing anything (a request preempted itself, or a request that can never be admitted was
   * rejected) returns a result of zero duration.
   */
  step(nowMs: number): StepResult | undefined {
    if (!this.hasWork()) return undefined;
    const fx = new EffectsBuilder();
    const scheduled: Req[] = [];
    const maxModelLen = this.engine.max_model_len;
    const threshold = this.engine.long_prefill_token_threshold;
    let budget = this.engine.max_num_batched_tokens;
    let preempted = false;
    let prefillCount = 0;
    let sumIsl = 0;
    let sumPrefix = 0;
    const chargePrefill = this.role !== "decode";

    const record = (req: Req, computedBefore: number, n: number): void => {
      req.stepTokens = n;
      scheduled.push(req);
      budget -= n;
      const promptBefore = Math.min(computedBefore, req.promptTokens);
      const promptAfter = Math.min(computedBefore + n, req.promptTokens);
      if (chargePrefill && promptAfter > promptBefore) {
        prefillCount++;
        sumIsl += promptAfter;
        sumPrefix += promptBefore;
      }
      // Computed counts advance at schedule time (vllm-rules 1.2 step 8).
      req.computed = computedBefore + n;
    };

    // 1. Running requests in list order.
    for (let i = 0; i < this.running.length && budget > 0; ) {
      const req = this.running[i]!;
      let n = req.seq.numTokens - req.computed;
      if (threshold > 0 && n > threshold) n = threshold;
      if (n > budget) n = budget;
      if (maxModelLen !== undefined) n = Math.min(n, maxModelLen - 1 - req.computed);
      n = this.alignChunk(req, req.computed, n);
      if (n <= 0) {
        i++;
        continue;
      }
      let allocated = false;
      for (;;) {
        if (this.pool.allocateSlots(req.seq, { computedTokens: req.computed, newTokens: n })) {
          allocated = true;
          break;
        }
        // FCFS: the victim is the tail of running; it is never already scheduled in this step.
        const victim = this.running.pop()!;
        this.pool.free(victim.seq);
        this.capacityGeneration++;
        if (victim === req && this.running.length === 0 && this.pool.metrics().usedPages === 0) {
          // Alone in an otherwise empty pool it still does not fit: recomputing would only come
          // back here, so it can never finish (vLLM would loop; max_model_len usually prevents it).
          fx.rejections.push({ requestId: req.id, reason: `its sequence of ${req.seq.numTokens} tokens outgrew the pool: ${req.computed} computed + ${n} new do not fit even in the empty pool of ${this.usablePages} usable pages` });
          this.retire(req);
          break;
        }
        this.requeuePreempted(victim, fx);
        preempted = true;
        if (victim === req) break;
      }
      if (!allocated) break;
      record(req, req.computed, n);
      i++;
    }

    // 2. Waiting requests, only if nothing was preempted in this step.
    while (!preempted && budget > 0 && this.running.length < this.engine.max_num_seqs) {
      const materialized = this.peekLive(this.activated, "activated");
      if (materialized !== undefined) {
        if (!this.admitActivated(materialized, budget, fx, record)) break;
        continue;
      }
      // A pending destination head blocks fresh admissions so that it cannot starve.
      if (this.peekPendingDestination() !== undefined) break;
      const req = this.peekLive(this.waiting, "waiting");
      if (req === undefined) break;
      const outcome = this.admitWaiting(req, budget, fx, record);
      if (outcome === "stop") break;
    }

    if (scheduled.length === 0) {
      if (fx.empty) return undefined;
      return this.finishStep(nowMs, 0, 0, 0, scheduled, fx);
    }

    // 3. Price the pass.
    let clamped = 0;
    const prefill = this.timing.prefill({ count: prefillCount, sumIsl, sumPrefix });
    if (prefill.clamped) clamped++;
    let decodeCount = 0;
    let sumSequence = 0;
    for (const req of scheduled) {
      if (req.computed >= req.seq.numTokens && req.outputs < req.maxOutputTokens) {
        decodeCount++;
        sumSequence += req.seq.numTokens;
      }
    }
    let decodeMs = 0;
    if (this.role !== "prefill") {
      const decode = this.timing.decode({ count: decodeCount, sumSequenceTokens: sumSequence });
      if (decode.clamped) clamped++;
      decodeMs = decode.ms;
    }
    const prefillMs = prefill.ms;
    const endMs = nowMs + prefillMs + decodeMs;

    // 4. Blocks become cache-visible once computed; requests that reached their end sample one token.
    let finishedAny = false;
    for (const req of scheduled) {
      this.pool.commitComputed(req.seq, req.computed);
      if (req.computed < req.seq.numTokens) continue; // a prefill chunk short of the end samples nothing
      if (req.outputs < req.maxOutputTokens) {
        const index = req.outputs;
        req.seq.appendToken(tokenIdFromHash(req.idHash, index));
        req.outputs++;
        fx.tokens.push({ requestId: req.id, index, atMs: endMs });
      }
      if (req.outputs >= req.maxOutputTokens || (maxModelLen !== undefined && req.seq.numTokens >= maxModelLen)) {
        this.complete(req, fx);
        finishedAny = true;
      }
    }
    if (finishedAny) this.compactRunning();
    return this.finishStep(nowMs, endMs, prefillMs, decodeMs, scheduled, fx, clamped);
  }

  private finishStep(nowMs: number, endMs: number, prefillMs: number, decodeMs: number, scheduled: Req[], fx: EffectsBuilder, clamped = 0): StepResult {
    const work: ScheduledWork[] = [];
    let scheduledTokens = 0;
    for (const req of scheduled) {
      work.push({ requestId: req.id, tokens: req.stepTokens });
      scheduledTokens += req.stepTokens;
      req.stepTokens = 0;
    }
    this.tryReserveDestinations(fx);
    const startMs = nowMs;
    const end = scheduled.length === 0 ? nowMs : endMs;
    return {
      startMs,
      durationMs: end - startMs,
      endMs: end,
      prefillMs,
      decodeMs,
      scheduledTokens,
      scheduled: work,
      clampedTimingQueries: clamped,
      effects: fx.build(this.takeEvents(), this.metrics()),
    };
  }

  /** Admits the activated destination at the head: its one-token row. False stops the waiting pass. */
  private admitActivated(req: Req, budget: number, fx: EffectsBuilder, record: (req: Req, before: number, n: number) => void): boolean {
    let n = Math.min(req.seq.numTokens - req.computed, budget);
    n = this.alignChunk(req, req.computed, n);
    if (n <= 0) return false;
    if (!this.pool.allocateSlots(req.seq, { computedTokens: req.computed, newTokens: n })) return false;
    this.activated.popFront();
    this.activatedLive--;
    req.phase = "running";
    this.running.push(req);
    fx.admissions.push({ requestId: req.id, reusedTokens: req.handoff?.hitTokens ?? 0, resumed: false });
    record(req, req.computed, n);
    return true;
  }

  /** Tries to admit the waiting head (vllm-rules 1.2 step 3). */
  private admitWaiting(req: Req, budget: number, fx: EffectsBuilder, record: (req: Req, before: number, n: number) => void): "admitted" | "rejected" | "stop" {
    // A waiting request has computed nothing (new, or preempted: recompute): look up the prefix cache.
    const hit: PrefixHit = this.pool.findPrefixHit(req.seq);
    const full = req.seq.numTokens - hit.tokens;
    let n = full;
    const threshold = this.engine.long_prefill_token_threshold;
    if (threshold > 0 && n > threshold) n = threshold;
    if (!this.engine.enable_chunked_prefill && n > budget) {
      if (n > this.engine.max_num_batched_tokens) {
        return this.rejectWaiting(req, fx, `needs ${n} tokens in one pass with chunked prefill off, more than max_num_batched_tokens ${this.engine.max_num_batched_tokens}`);
      }
      return "stop"; // head-of-line: no skipping ahead to smaller requests
    }
    if (n > budget) n = budget;
    n = this.alignChunk(req, hit.tokens, n);
    if (n <= 0) return "stop";
    if (!this.pool.allocateSlots(req.seq, { computedTokens: 0, newTokens: n, hit })) {
      // Never preempt for a waiting request. If the pool holds nothing and nothing runs, it can never fit.
      if (this.running.length === 0 && this.pool.metrics().usedPages === 0) {
        return this.rejectWaiting(req, fx, `its ${n}-token chunk does not fit even in the empty pool of ${this.usablePages} usable pages`);
      }
      return "stop";
    }
    this.waiting.popFront();
    this.waitingLive--;
    req.phase = "running";
    this.running.push(req);
    fx.admissions.push({ requestId: req.id, reusedTokens: hit.tokens, resumed: req.preemptions > 0 });
    record(req, hit.tokens, n);
    return "admitted";
  }

  private rejectWaiting(req: Req, fx: EffectsBuilder, reason: string): "rejected" {
    this.waiting.popFront();
    this.waitingLive--;
    fx.rejections.push({ requestId: req.id, reason });
    this.retire(req);
    return "rejected";
  }

  /** Forgets a rejected request (its blocks already freed) and retires its handoff. */
  private retire(req: Req): void {
    if (req.handoff !== undefined) {
      req.handoff.state = "retired";
      req.handoff.cancelled = true;
    }
    this.forget(req);
  }

  /**
   * vLLM's `_mamba_block_aligned_split` (vllm-rules 3.6): while a prompt is being prefilled, a chunk
   * that ends before the last block boundary of the sequence is cut down to whole blocks, and one
   * that would cross it ends exactly on it; the last chunk runs to the end unchanged. With vLLM
   * 0.32.0's prefill checkpoint blocks, a chunk that reaches the end of the sequence is not cut (its
   * checkpoint blocks keep the boundary states inside it); earlier chunks still end on whole blocks.
   */
  private alignChunk(req: Req, computedBefore: number, n: number): number {
    const b = this.alignBlock;
    if (b === undefined || req.outputs > 0 || n <= 0) return n;
    const total = req.seq.numTokens;
    if (this.chunking === "whole_blocks_before_final") {
      return computedBefore + n >= total ? n : Math.floor(n / b) * b;
    }
    const lastBoundary = total - (total % b);
    if (computedBefore + n < lastBoundary) return Math.floor(n / b) * b;
    if (computedBefore < lastBoundary) return lastBoundary - computedBefore;
    return n;
  }

  /** Preemption by recompute (vllm-rules 1.3), once its blocks are freed tail first: computed 0, to the front of waiting. */
  private requeuePreempted(req: Req, fx: EffectsBuilder): void {
    req.computed = 0;
    req.preemptions++;
    req.phase = "waiting";
    this.waiting.pushFront(req);
    this.waitingLive++;
    fx.preemptions.push({ requestId: req.id });
  }

  /** A request produced its last token (or had none to produce). */
  private complete(req: Req, fx: EffectsBuilder): void {
    fx.finished.push({ requestId: req.id });
    const h = req.handoff;
    if (h?.side === "source" && h.state === "pending") {
      // Source completion (grouped-pd.md 3): free what vLLM frees before the transfer, hold the rest.
      const releasedPages = this.pool.releaseSourceSkipped(req.seq, req.computed);
      this.capacityGeneration++;
      const heldPages = this.pool.heldBlocks(req.seq).reduce((a, b) => a + b, 0);
      h.state = "held";
      req.phase = "held";
      fx.lifecycle.push({
        type: "source_held",
        handoffId: h.id,
        requestId: req.id,
        terms: sourceTerms(this.profile, tokens(h.promptTokens), this.terms),
        heldPages,
        releasedPages,
      });
      return;
    }
    if (h !== undefined) h.state = "retired";
    this.pool.free(req.seq);
    this.capacityGeneration++;
    this.forget(req);
  }

  /** Removes a request from wherever it is and frees its blocks (cancel paths). */
  private dropRequest(req: Req): void {
    switch (req.phase) {
      case "waiting":
        this.waitingLive--;
        break;
      case "activated":
        this.activatedLive--;
        break;
      case "pending_destination":
        this.pendingLive--;
        break;
      case "reserved_destination":
        this.reservedCount--;
        break;
      case "held":
        break;
      case "running": {
        const i = this.running.indexOf(req);
        if (i < 0) throw new Error(`running request ${req.id} is not in the running list`);
        this.running.splice(i, 1);
        break;
      }
      case "gone":
        return;
    }
    if (req.handoff !== undefined) req.handoff.state = "retired";
    this.pool.free(req.seq);
    this.capacityGeneration++;
    this.forget(req);
  }

  private forget(req: Req): void {
    req.phase = "gone";
    this.requests.delete(req.id);
  }

  private compactRunning(): void {
    let w = 0;
    for (const req of this.running) if (req.phase === "running") this.running[w++] = req;
    this.running.length = w;
  }

  /**
   * Reserves pending destinations in FIFO order: only the head is tried, without preempting, and
   * only when capacity was freed since it last failed (grouped-pd.md 4).
   */
  private tryReserveDestinations(fx: EffectsBuilder): void {
    for (;;) {
      const h = this.peekPendingDestination();
      if (h === undefined) return;
      const last = this.reserveFailedAt;
      if (last?.handoff === h && last.generation === this.capacityGeneration) return;
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
      const missing =
        this.linearBlockSize === undefined
          ? ({ unit: "block", units: res.missingFullAttentionBlocks } as const)
          : ({ unit: "token", units: res.missingFullAttentionBlocks * this.linearBlockSize } as const);
      fx.lifecycle.push({ type: "destination_reserved", handoffId: h.id, requestId: h.req.id, missing, hitTokens: res.hitTokens });
    }
  }

  private peekPendingDestination(): Handoff | undefined {
    for (;;) {
      const h = this.pendingDestinations.peekFront();
      if (h === undefined || (h.state === "pending" && h.req.phase === "pending_destination")) return h;
      this.pendingDestinations.popFront(); // cancelled while pending
    }
  }

  /** The live head of a lazily cleaned queue (cancelled entries are dropped when they surface). */
  private peekLive(queue: Deque<Req>, phase: Phase): Req | undefined {
    for (;;) {
      const req = queue.peekFront();
      if (req === undefined || req.phase === phase) return req;
      queue.popFront();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Helpers

  private newRequest(id: string, prompt: PromptTokens, maxOutputTokens: number, phase: Phase | undefined): Req {
    const req: Req = {
      id,
      idHash: requestIdHash(id),
      seq: this.pool.createSequence(id, prompt),
      promptTokens: prompt.tokens.length,
      maxOutputTokens,
      computed: 0,
      outputs: 0,
      preemptions: 0,
      phase: phase ?? "waiting",
      handoff: undefined,
      stepTokens: 0,
    };
    this.requests.set(id, req);
    return req;
  }

  private enqueueWaiting(req: Req): void {
    req.phase = "waiting";
    this.waiting.pushBack(req);
    this.waitingLive++;
  }

  private invalidRequest(request: RequestInput): string | undefined {
    if (typeof request.id !== "string" || request.id === "") return "request id must be a non-empty string";
    if (this.requests.has(request.id)) return `request "${request.id}" is already on this rank`;
    if (request.prompt.tokens.length < 1) return `request "${request.id}": a prompt needs at least one token`;
    if (!Number.isSafeInteger(request.maxOutputTokens) || request.maxOutputTokens < 0) {
      return `request "${request.id}": maxOutputTokens must be an integer >= 0, got ${request.maxOutputTokens}`;
    }
    return undefined;
  }

  private invalidHandoffId(handoffId: string): string | undefined {
    if (typeof handoffId !== "string" || handoffId === "") return "handoff id must be a non-empty string";
    if (this.handoffs.has(handoffId) || this.rejectedHandoffs.has(handoffId)) return `handoff "${handoffId}" was already used on this rank`;
    return undefined;
  }

  /**
   * Why a prompt can never be served, or undefined. `n` is the prompt length, `t` the tokens this
   * rank holds for it (T for a handoff), `outputTokens` the tokens asked for.
   */
  private promptRejection(n: number, t: number, outputTokens: number): string | undefined {
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
    if (pages > this.usablePages) return `prompt of ${t} tokens needs at least ${pages} pages across its cache groups, more than the ${this.usablePages} usable pages of the pool`;
    return undefined;
  }

  /**
   * The fewest pages `t` tokens take across all groups: the window-trimmed blocks plus the 0.32.0
   * checkpoint blocks the pool takes (with prefix caching only, as kv-pool does).
   */
  private minimumPages(t: number): number {
    let pages = 0;
    for (const g of this.groups) {
      pages += groupBlocksForTokens(g, tokens(t)) + prefillCheckpointBlocks(g, this.profile.vllm_version, this.engine.enable_prefix_caching);
    }
    return pages;
  }

  private takeEvents(): readonly KvEvent[] {
    return this.collectKvEvents ? this.pool.takeEvents() : NO_EVENTS;
  }

  private ok(result: "submitted" | "accepted" | "applied" | "noop", fx: EffectsBuilder): CommandOutcome {
    return { ok: true, result, effects: fx.build(this.takeEvents(), this.metrics()) };
  }
}
