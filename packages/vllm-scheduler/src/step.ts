/**
 * One forward pass of a rank (docs/rules/vllm-scheduling.md §1.2, §1.3): the running pass, the waiting pass, the price
 * of the step, and sampling. `planStep` does the work; `synchronousStep` is vLLM's classic engine
 * loop (plan, run, process the outputs, plan again) and async scheduling
 * (async-scheduling.ts) pipelines the same plans.
 */
import type { ScheduledWork, StepResult } from "./contract.js";
import { admitActivated, admitWaiting, alignChunk } from "./admission.js";
import { EffectsBuilder } from "./effects-builder.js";
import { settleLoads } from "./offload-loads.js";
import type { Req, RankState } from "./rank-state.js";
import type { Speculation } from "./speculative.js";

/** A planned and priced step. */
export interface PlannedStep {
  readonly prefillMs: number;
  readonly decodeMs: number;
  readonly clamped: number;
  readonly work: readonly ScheduledWork[];
  readonly scheduledTokens: number;
  /** Tokens sampled at the end of the step (only when the plan defers them, see `planStep`). */
  readonly sampled: readonly { readonly req: Req; readonly index: number }[];
  /** Requests whose last token the step samples (only when the plan defers finishing). */
  readonly finishing: readonly Req[];
}

/** What a synchronous plan samples and finishes on its own (never written: see `planStep`). */
const NONE_SAMPLED: { readonly req: Req; readonly index: number }[] = [];
const NONE_FINISHING: Req[] = [];

/**
 * Plans and prices one step from the rank's state now; undefined when it schedules nothing (the
 * effects of a pass that only preempted or rejected are still in `fx`).
 *
 * `synchronous`: the sampled tokens go to `fx` stamped at the end of the step (`nowMs` plus its
 * price) and finished requests are completed at once. Otherwise (async scheduling) the sampled
 * tokens are listed in the plan and a request whose last token the step samples stays in the
 * running list as "finishing" until the caller frees it when the step has run.
 */
export function planStep(state: RankState, fx: EffectsBuilder, nowMs: number, synchronous: boolean): PlannedStep | undefined {
  const engine = state.engine;
  const maxModelLen = engine.max_model_len;
  const threshold = engine.long_prefill_token_threshold;
  let preempted = false;
  const rows = state.stepRows;
  rows.reset(engine.max_num_batched_tokens, state.role !== "decode");
  const spec = state.speculation;
  // vLLM's num_lookahead_tokens: every running allocation holds this many slots more.
  const lookahead = spec === undefined ? 0 : spec.lookahead;

  // 1. Running requests in list order.
  const running = state.running;
  // Surviving mutants: VS-60 (MUTANTS.md).
  for (let i = 0; i < running.length && rows.budget > 0;) {
    const req = running[i]!;
    if (req.phase === "finishing") {
      // Async scheduling: its last token is in flight; vLLM skips a request certain to be done.
      i++;
      continue;
    }
    // vLLM's num_tokens_with_spec - num_computed_tokens: the drafts ride on a decode row.
    const proposed = req.drafts;
    let n = req.seq.numTokens - req.computed + proposed;
    // Surviving mutants: VS-61 (MUTANTS.md).
    if (threshold > 0 && n > threshold) n = threshold;
    // Stryker disable next-line EqualityOperator: VS-62
    if (n > rows.budget) n = rows.budget;
    // Stryker disable next-line ArithmeticOperator: VS-63
    if (maxModelLen !== undefined) n = Math.min(n, maxModelLen - 1 - req.computed);
    n = alignChunk(state, req, req.computed, n);
    // A guard no schedule tried by hand reaches: the max_model_len cap never binds, and an aligned
    // chunk of 0 needs a running prefill left with less than a block of budget.
    // Stryker disable next-line ConditionalExpression,EqualityOperator,BlockStatement: VS-64
    if (n <= 0) {
      // Stryker disable next-line UpdateOperator: VS-65
      i++;
      continue;
    }
    // The drafts that fit (the caps above may truncate them); the request's list is cleared.
    let drafts = 0;
    let slots = 0;
    if (spec !== undefined) {
      if (proposed > 0) {
        drafts = Math.min(proposed, Math.max(0, n + req.computed - req.seq.numTokens));
        req.drafts = 0;
      }
      // Slots for the drafts and the lookahead, within max_model_len (vllm-rules 3.1 step 2).
      slots = drafts + lookahead;
      if (maxModelLen !== undefined) slots = Math.min(slots, Math.max(0, maxModelLen - (req.computed + n - drafts)));
    }
    let allocated = false;
    for (;;) {
      if (state.pool.allocateSlots(req.seq, rows.allocation(req.computed, n - drafts, slots))) {
        allocated = true;
        break;
      }
      // FCFS: the victim is the tail of running; it is never already scheduled in this step.
      const victim = running.pop()!;
      state.pool.free(victim.seq);
      state.capacityGeneration++;
      preempted = true;
      if (victim.phase === "finishing") {
        // Async scheduling: preempted while its last token is in flight. vLLM keeps that token,
        // so the request still finishes when the step ends; only its blocks go now.
        victim.freed = true;
        state.finishingCount--;
        fx.preemption(victim.id);
        continue;
      }
      // Surviving mutants: VS-66 (MUTANTS.md).
      if (victim === req && running.length === 0 && state.pool.metrics().usedPages === 0) {
        // Alone in an otherwise empty pool it still does not fit: recomputing would only come
        // back here, so it can never finish (vLLM would loop; max_model_len usually prevents it).
        fx.rejection(
          req.id,
          `its sequence of ${req.seq.numTokens} tokens outgrew the pool: ${req.computed} computed + ${n} new do not fit even in the empty pool of ${state.usablePages} usable pages`,
        );
        state.retire(req);
        break;
      }
      state.requeuePreempted(victim, fx);
      if (victim === req) break;
    }
    if (!allocated) break;
    rows.record(req, req.computed, n, drafts);
    i++;
  }

  // 2. Waiting requests, only if nothing was preempted in this step.
  // Surviving mutants: VS-67 (MUTANTS.md).
  while (!preempted && rows.budget > 0 && running.length < engine.max_num_seqs) {
    const materialized = state.peekLive(state.activated, "activated");
    if (materialized !== undefined) {
      if (!admitActivated(state, materialized, fx, rows)) break;
      continue;
    }
    // A pending destination head blocks fresh admissions so that it cannot starve.
    if (state.peekPendingDestination() !== undefined) break;
    const req = state.peekLive(state.waiting, "waiting");
    if (req === undefined) break;
    const outcome = admitWaiting(state, req, fx, rows, nowMs);
    if (outcome === "stop") break;
  }

  const count = rows.count;
  if (count === 0) return undefined;

  // 3. Price the pass.
  const batch = rows.batch;
  if (state.role !== "prefill") {
    let decodeCount = 0;
    let sumSequenceTokens = 0;
    let decodeTokens = 0;
    for (let i = 0; i < count; i++) {
      const req = rows.at(i);
      if (req.computed - req.stepDrafts >= req.seq.numTokens && req.outputs < req.maxOutputTokens) {
        decodeCount++;
        sumSequenceTokens += req.seq.numTokens;
        decodeTokens += 1 + req.stepDrafts;
      }
    }
    batch.decode.count = decodeCount;
    batch.decode.sumSequenceTokens = sumSequenceTokens;
    batch.decode.tokens = decodeTokens;
  }
  const price = state.timing.step(batch);
  const endMs = nowMs + price.prefillMs + price.decodeMs;
  // The blocks the step computes exist from its end: write-through tiers store them from then.
  if (state.offload !== undefined) state.offload.clockMs = endMs;

  // 4. Blocks become cache-visible once computed; requests that reached their end sample one token.
  // Stryker disable next-line BooleanLiteral: VS-68
  let finishedAny = false;
  // The synchronous loop samples and finishes at once: its plan lists neither (shared empty lists).
  const sampled: { readonly req: Req; readonly index: number }[] = synchronous ? NONE_SAMPLED : [];
  const finishing: Req[] = synchronous ? NONE_FINISHING : [];
  for (let i = 0; i < count; i++) {
    const req = rows.at(i);
    const drafts = req.stepDrafts;
    // Unverified drafts are never cached: only the sequence's own tokens become visible.
    state.pool.commitComputed(req.seq, req.computed - drafts);
    if (req.computed - drafts < req.seq.numTokens) continue; // a prefill chunk short of the end samples nothing
    if (req.outputs < req.maxOutputTokens) {
      const index = req.outputs;
      if (spec === undefined) {
        req.seq.appendOutputs(1); // output `index`, whose id the sequence asks tokenIdFromHash for
        req.outputs++;
        if (synchronous) fx.token({ requestId: req.id, index, atMs: endMs });
        else sampled.push({ req, index });
      } else {
        emitVerified(state, spec, req, drafts, fx, endMs);
      }
    }
    // Surviving mutants: VS-69 (MUTANTS.md).
    if (req.outputs >= req.maxOutputTokens || (maxModelLen !== undefined && req.seq.numTokens >= maxModelLen)) {
      if (synchronous) {
        state.complete(req, fx);
        finishedAny = true;
      } else {
        req.phase = "finishing";
        state.finishingCount++;
        finishing.push(req);
      }
    } else if (spec !== undefined) {
      req.drafts = spec.k; // the drafter proposes after every sampled token
    }
  }
  // Surviving mutants: VS-70 (MUTANTS.md).
  if (finishedAny) state.compactRunning();

  const work: ScheduledWork[] = [];
  let scheduledTokens = 0;
  for (let i = 0; i < count; i++) {
    const req = rows.at(i);
    work.push({ requestId: req.id, tokens: req.stepTokens });
    scheduledTokens += req.stepTokens;
    req.stepTokens = 0;
    req.stepDrafts = 0;
  }
  rows.clear();
  return { prefillMs: price.prefillMs, decodeMs: price.decodeMs, clamped: price.clamped, work, scheduledTokens, sampled, finishing };
}

/**
 * Speculative decoding after a step (vllm-rules 1.5 steps 1-2): of the `drafts` the row verified,
 * the accepted prefix stays computed and the rejected slots are given back (num_computed_tokens
 * falls by the rejected count, so the next step writes over them); the accepted drafts and the
 * bonus token are emitted at the end of the step, cut at max_tokens and max_model_len.
 */
function emitVerified(state: RankState, spec: Speculation, req: Req, drafts: number, fx: EffectsBuilder, endMs: number): void {
  const index = req.outputs;
  let accepted = 0;
  if (drafts > 0) {
    accepted = spec.accept(req.idHash, index, drafts);
    req.computed -= drafts - accepted;
  }
  let emit = Math.min(1 + accepted, req.maxOutputTokens - index);
  const maxModelLen = state.engine.max_model_len;
  if (maxModelLen !== undefined) emit = Math.min(emit, maxModelLen - req.seq.numTokens);
  req.seq.appendOutputs(emit);
  req.outputs += emit;
  // Cut at its end, a finishing request computed past its last token: it is freed this step.
  if (req.computed > req.seq.numTokens) req.computed = req.seq.numTokens;
  for (let j = 0; j < emit; j++) fx.token({ requestId: req.id, index: index + j, atMs: endMs });
}

/** The result of a step that runs from `startMs` for the plan's duration (or of a pass that scheduled nothing). */
export function stepResult(state: RankState, startMs: number, plan: PlannedStep | undefined, fx: EffectsBuilder): StepResult {
  state.tryReserveDestinations(fx);
  const prefillMs = plan?.prefillMs ?? 0;
  const decodeMs = plan?.decodeMs ?? 0;
  // Surviving mutants: VS-71 (MUTANTS.md).
  const end = plan === undefined ? startMs : startMs + prefillMs + decodeMs;
  return {
    startMs,
    durationMs: end - startMs,
    endMs: end,
    prefillMs,
    decodeMs,
    scheduledTokens: plan?.scheduledTokens ?? 0,
    scheduled: plan?.work ?? [],
    clampedTimingQueries: plan?.clamped ?? 0,
    effects: fx.build(state.takeEvents(), state.metrics()),
  };
}

/**
 * vLLM's synchronous engine loop: plan the step at `nowMs`, and apply its outputs (tokens at the
 * end of the step, finished requests freed) before anything else happens on the rank.
 */
export function synchronousStep(state: RankState, nowMs: number): StepResult | undefined {
  settleLoads(state, nowMs);
  // Surviving mutants: VS-72 (MUTANTS.md).
  if (!state.hasSchedulableWork()) return undefined;
  const fx = new EffectsBuilder();
  const plan = planStep(state, fx, nowMs, true);
  if (plan === undefined && fx.empty) return undefined;
  return stepResult(state, nowMs, plan, fx);
}

/** Token effects of a deferred plan, stamped at the end of its step (none for requests cancelled since it was planned). */
export function emitSampled(plan: PlannedStep, atMs: number, fx: EffectsBuilder): void {
  for (const s of plan.sampled) if (s.req.phase !== "gone") fx.token({ requestId: s.req.id, index: s.index, atMs });
}
