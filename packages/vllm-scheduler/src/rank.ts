/**
 * One vLLM rank as a pure state machine (docs/rules/vllm-scheduling.md §1; docs/rules/grouped-pd.md §3-§5):
 * commands in, outcomes out; `step(now)` plans one forward pass and returns its duration and effects.
 *
 * The concerns live in their own modules: the rank's state and shared helpers (rank-state.ts),
 * admission (admission.ts), the step (step.ts), async scheduling (async-scheduling.ts) and the
 * P/D handoff commands (handoff-commands.ts).
 */
import type { GroupPages, PromptTokens } from "@kvsim/kv-pool";
import { AsyncScheduling } from "./async-scheduling.js";
import type { Command, CommandOutcome, RankConfig, RankMetrics, RankRole, RequestInput, StepResult } from "./contract.js";
import {
  activateDestination,
  cancelDestination,
  fail,
  invalidRequest,
  ok,
  releaseSource,
  reserveDestination,
  submitHandoffPrefill,
} from "./handoff-commands.js";
import { RankConfigError, type RankConfigProblem } from "./rank-config.js";
import { decodeRun, DecodeRunScratch, type DecodeRun, type DecodeRunLimits } from "./decode-run.js";
import { EffectsBuilder } from "./effects-builder.js";
import { RankState } from "./rank-state.js";
import { nextLoadDoneMs } from "./offload-loads.js";
import { synchronousStep } from "./step.js";
import type { SpeculationStats } from "./speculative.js";

const SOURCE_COMMANDS = new Set<Command["type"]>(["submit_handoff_prefill", "release_source", "cancel_source"]);
const DESTINATION_COMMANDS = new Set<Command["type"]>(["reserve_destination", "activate_destination", "cancel_destination"]);

/**
 * One vLLM v1 rank. See the package README for the step algorithm, timing and handoff rules.
 *
 * Construction refuses an unusable configuration with a {@link RankConfigError} listing every
 * problem. Commands never throw for expected outcomes: a refused command returns
 * `{ ok: false, reason }` and changes nothing.
 */
export class Rank {
  readonly role: RankRole;
  private readonly state: RankState;
  /** Set when the engine schedules asynchronously (`async_scheduling`). */
  private readonly async: AsyncScheduling | undefined;
  private scratch: DecodeRunScratch | undefined;

  constructor(config: RankConfig) {
    this.state = new RankState(config);
    this.role = config.role;
    this.async = config.engine.async_scheduling ? new AsyncScheduling(this.state) : undefined;
  }

  // ---------------------------------------------------------------------------------------------
  // Queries

  /** True when a step could schedule something now or later without a command (running or waiting requests). */
  hasWork(): boolean {
    return this.state.hasSchedulableWork() || this.async?.pending === true;
  }

  /**
   * When a load from the offload tiers in flight is done (Infinity when none is): the rank has work
   * from then without a command, so its driver steps it again then.
   */
  nextWakeMs(): number {
    return nextLoadDoneMs(this.state);
  }

  /** True when the rank holds nothing: no request, no held source, no pending or reserved destination. */
  isDrained(): boolean {
    return this.state.requests.size === 0;
  }

  /** Prefix-hit tokens this rank would give a prompt now (for KV-aware placement). Changes nothing. */
  peekPrefixHitTokens(prompt: PromptTokens): number {
    return this.state.pool.peekPrefixHitTokens(prompt);
  }

  /** Running requests, and waiting ones (new, preempted, activated and pending or reserved destinations). */
  load(): { readonly running: number; readonly waiting: number } {
    return { running: this.state.running.length, waiting: this.state.waitingCount() };
  }

  metrics(): RankMetrics {
    return this.state.metrics();
  }

  /** Speculative decoding's counts so far (drafted, accepted, per position); undefined when the rank does not speculate. */
  speculationStats(): SpeculationStats | undefined {
    return this.state.speculation?.stats();
  }

  /**
   * Per cache group of the pool (the profile's group order; one for a linear profile): pages its
   * tables reference and free pages still caching its keys. Live O(1) counters: read, do not keep.
   */
  kvGroupPages(): GroupPages {
    return this.state.pool.groupPages();
  }

  /**
   * The caller will send no more commands for handoff `handoffId` (its request has ended): the rank
   * drops what it kept of the retired handoff (so a long replay does not keep one entry per
   * handoff ever made). After this a command for the id is refused as unknown and the id may be
   * used again. A handoff still live on the rank is kept. Returns whether anything was dropped.
   */
  forgetHandoff(handoffId: string): boolean {
    return this.state.retiredHandoffs.delete(handoffId);
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
    const state = this.state;
    switch (command.type) {
      case "submit":
        return this.submitRequest(command.request);
      case "submit_handoff_prefill":
        return submitHandoffPrefill(state, command.handoffId, command.request);
      case "release_source":
        return releaseSource(state, command.handoffId, false);
      case "cancel_source":
        return releaseSource(state, command.handoffId, true);
      case "reserve_destination":
        return reserveDestination(state, command.handoffId, command.request);
      case "activate_destination":
        return activateDestination(state, command.handoffId);
      case "cancel_destination":
        return cancelDestination(state, command.handoffId);
      case "cancel_request":
        return this.cancelRequest(command.requestId);
    }
  }

  private submitRequest(request: RequestInput): CommandOutcome {
    const state = this.state;
    const invalid = invalidRequest(state, request);
    if (invalid !== undefined) return fail(invalid);
    const fx = new EffectsBuilder();
    const n = request.prompt.length;
    const rejection = state.promptRejection(n, n, request.maxOutputTokens);
    if (rejection !== undefined) {
      fx.rejection(request.id, rejection);
    } else {
      const req = state.newRequest(request.id, request.prompt, request.maxOutputTokens, undefined);
      state.enqueueWaiting(req);
    }
    return ok(state, "submitted", fx);
  }

  private cancelRequest(requestId: string): CommandOutcome {
    const state = this.state;
    const fx = new EffectsBuilder();
    const req = state.requests.get(requestId);
    if (req === undefined) return ok(state, "noop", fx);
    state.dropRequest(req, true);
    state.tryReserveDestinations(fx);
    return ok(state, "applied", fx);
  }

  // ---------------------------------------------------------------------------------------------
  // The step

  /**
   * Plans and prices one forward pass starting at `nowMs`. Returns undefined when nothing can run
   * now (idle, or only blocked work) and nothing changed. A pass that changed state without
   * computing anything (a request preempted itself, or a request that can never be admitted was
   * rejected) returns a result of zero duration. With `async_scheduling` the pass that runs from
   * `nowMs` is the one planned at the previous call (see async-scheduling.ts).
   */
  step(nowMs: number): StepResult | undefined {
    return this.async === undefined ? synchronousStep(this.state, nowMs) : this.async.step(nowMs);
  }

  /**
   * The decode fast path: runs decode-only steps back to back from `nowMs`, exactly as that many
   * `step` calls would (each from the previous one's end, no command in between), stopping before
   * anything else would happen (a request finishing, a possible preemption, an admission) and
   * within `limits`. Undefined when not even one such step can run: call `step` instead. Never
   * used with async scheduling, on a prefill rank, or when the rank collects KV events. See
   * decode-run.ts.
   */
  decodeRun(nowMs: number, limits: DecodeRunLimits): DecodeRun | undefined {
    if (this.async !== undefined) return undefined;
    this.scratch ??= new DecodeRunScratch();
    return decodeRun(this.state, this.scratch, nowMs, limits);
  }
}

/**
 * Every reason `new Rank(config)` would refuse `config` (empty when it would not), without building
 * its pool: the checks do not depend on the pool's size, so a two-page pool stands in for it. Lets a
 * caller (`kvsim validate`) refuse what the replay would refuse, before any work.
 */
export function checkRankConfig(config: RankConfig): RankConfigProblem[] {
  try {
    new Rank({ ...config, engine: { ...config.engine, num_gpu_blocks: 2 } });
    return [];
  } catch (e) {
    if (e instanceof RankConfigError) return [...e.problems];
    throw e;
  }
}
