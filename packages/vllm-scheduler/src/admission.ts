/**
 * Admission of waiting requests into a step (docs/rules/vllm-scheduling.md §1.2 step 3), chunk alignment for
 * Mamba-type states, and vLLM's `scheduler_reserve_full_isl` gate.
 */
import type { PrefixHit } from "@kvsim/kv-pool";
import type { EffectsBuilder } from "./effects-builder.js";
import { startLoad } from "./offload-loads.js";
import { LookupMemo } from "@kvsim/kv-offload";
import type { Req, RankState } from "./rank-state.js";
import type { StepRows } from "./step-rows.js";

/**
 * vLLM's `_mamba_block_aligned_split` (docs/rules/vllm-scheduling.md §3.6): while a prompt is being prefilled, a chunk
 * that ends before the last block boundary of the sequence is cut down to whole blocks, and one
 * that would cross it ends exactly on it; the last chunk runs to the end unchanged. With vLLM
 * 0.32.0's prefill checkpoint blocks, a chunk that reaches the end of the sequence is not cut (its
 * checkpoint blocks keep the boundary states inside it); earlier chunks still end on whole blocks.
 */
export function alignChunk(state: RankState, req: Req, computedBefore: number, n: number): number {
  const b = state.alignBlock;
  // A resumed request (outputs > 0) is not aligned. Its recompute usually starts from its own
  // prefix hit, on the last block boundary it computed, so alignment would cut nothing; it differs
  // after eviction took that hit (admission-preemption.test.ts, "a resumed request's recompute").
  // Surviving mutants: VS-01 (MUTANTS.md).
  if (b === undefined || req.outputs > 0 || n <= 0) return n;
  const total = req.seq.numTokens;
  if (state.chunking === "whole_blocks_before_final") {
    return computedBefore + n >= total ? n : Math.floor(n / b) * b;
  }
  const lastBoundary = total - (total % b);
  // Stryker disable next-line EqualityOperator: VS-02
  if (computedBefore + n < lastBoundary) return Math.floor(n / b) * b;
  if (computedBefore < lastBoundary) return lastBoundary - computedBefore;
  return n;
}

/**
 * `scheduler_reserve_full_isl`: the pages the request's whole sequence (prompt plus any output a
 * preempted request recomputes) needs beyond its prefix hit fit in the free pool now. vLLM checks
 * this before allocating the first chunk of a waiting request, so chunked prefill cannot admit
 * requests that would then preempt each other to finish their prompts.
 */
function wholeSequenceFits(state: RankState, req: Req, hit: PrefixHit): boolean {
  const rest = req.seq.numTokens - hit.tokens;
  // Stryker disable next-line ConditionalExpression,EqualityOperator,BooleanLiteral: VS-03
  if (rest <= 0) return true;
  return state.pool.pagesNeeded(req.seq, { computedTokens: 0, newTokens: rest, hit }) <= state.pool.metrics().freePages;
}

/** Admits the activated destination at the head: its one-token row. False stops the waiting pass. */
export function admitActivated(state: RankState, req: Req, fx: EffectsBuilder, rows: StepRows): boolean {
  const rest = req.seq.numTokens - req.computed;
  // A request whose prefix loaded from an offload tier goes on with its prompt as a waiting one would.
  // (A P/D destination has one token to compute: neither rule can bind it.)
  const threshold = state.engine.long_prefill_token_threshold;
  let n = threshold > 0 && rest > threshold ? threshold : rest;
  if (!state.engine.enable_chunked_prefill && n > rows.budget) return false;
  n = Math.min(n, rows.budget);
  n = alignChunk(state, req, req.computed, n);
  // Stryker disable next-line ConditionalExpression,EqualityOperator,BooleanLiteral: VS-04
  if (n <= 0) return false;
  // Speculative decoding: a request that arrives with computed tokens (a P/D destination) gets the
  // drafter's lookahead slots, as vLLM gives num_lookahead_tokens only when num_computed_tokens > 0.
  const spec = state.speculation;
  let lookaheadTokens = spec === undefined || req.computed === 0 ? 0 : spec.lookahead;
  const maxModelLen = state.engine.max_model_len;
  if (maxModelLen !== undefined) lookaheadTokens = Math.min(lookaheadTokens, Math.max(0, maxModelLen - req.computed - n));
  if (!state.pool.allocateSlots(req.seq, { computedTokens: req.computed, newTokens: n, lookaheadTokens })) return false;
  state.activated.popFront();
  state.activatedLive--;
  req.phase = "running";
  state.running.push(req);
  fx.admission({ requestId: req.id, reusedTokens: req.loadedTokens > 0 ? req.loadedTokens : (req.handoff?.hitTokens ?? 0), resumed: req.preemptions > 0 });
  rows.record(req, req.computed, n);
  return true;
}

/** Tries to admit the waiting head (docs/rules/vllm-scheduling.md §1.2 step 3). */
export function admitWaiting(state: RankState, req: Req, fx: EffectsBuilder, rows: StepRows, nowMs: number): "admitted" | "rejected" | "stop" | "loading" {
  const engine = state.engine;
  const budget = rows.budget;
  // A waiting request has computed nothing (new, or preempted: recompute): look up the prefix cache.
  const hit: PrefixHit = state.pool.findPrefixHit(req.seq);
  const offload = state.offload;
  // Past the GPU hit, the offload tiers (vLLM asks its connector before the budget checks); at most
  // max_num_seqs loads at once, as vLLM's offloading connector defers more.
  if (offload !== undefined && state.loading.length < engine.max_num_seqs) {
    const tierHit = offload.lookup(req.prompt, hit.tokens, req.seq.numTokens - 1, nowMs, (req.tierMemo ??= new LookupMemo()));
    if (tierHit !== undefined) {
      if (startLoad(state, req, tierHit, fx, nowMs)) return "loading";
      // The pool cannot hold the hit's blocks now. In an idle, empty pool it never will: the
      // plain path below then finds whether the request can run at all.
      if (!isIdle(state)) return "stop";
    }
  }
  const full = req.seq.numTokens - hit.tokens;
  let n = full;
  const threshold = engine.long_prefill_token_threshold;
  // Surviving mutants: VS-05 (MUTANTS.md).
  if (threshold > 0 && n > threshold) n = threshold;
  if (!engine.enable_chunked_prefill && n > budget) {
    if (n > engine.max_num_batched_tokens) {
      return rejectWaiting(
        state,
        req,
        fx,
        `needs ${n} tokens in one pass with chunked prefill off, more than max_num_batched_tokens ${engine.max_num_batched_tokens}`,
      );
    }
    return "stop"; // head-of-line: no skipping ahead to smaller requests
  }
  // Stryker disable next-line EqualityOperator: VS-06
  if (n > budget) n = budget;
  n = alignChunk(state, req, hit.tokens, n);
  if (n <= 0) return "stop";
  // In an empty, idle pool the gate is skipped: a sequence longer than the pool (window groups
  // free blocks as chunks advance) would otherwise wait forever.
  // Surviving mutants: VS-07 (MUTANTS.md).
  if (engine.scheduler_reserve_full_isl && n < full && !wholeSequenceFits(state, req, hit) && !isIdle(state)) return "stop";
  if (!state.pool.allocateSlots(req.seq, { computedTokens: 0, newTokens: n, hit })) {
    // Never preempt for a waiting request. If the pool holds nothing and nothing runs, it can never fit.
    if (isIdle(state)) {
      return rejectWaiting(state, req, fx, `its ${n}-token chunk does not fit even in the empty pool of ${state.usablePages} usable pages`);
    }
    return "stop";
  }
  state.waiting.popFront();
  state.waitingLive--;
  req.phase = "running";
  state.running.push(req);
  fx.admission({ requestId: req.id, reusedTokens: hit.tokens, resumed: req.preemptions > 0 });
  rows.record(req, hit.tokens, n);
  return "admitted";
}

/** Nothing runs and the pool holds nothing. */
function isIdle(state: RankState): boolean {
  // Surviving mutants: VS-08 (MUTANTS.md).
  return state.running.length === 0 && state.pool.metrics().usedPages === 0;
}

function rejectWaiting(state: RankState, req: Req, fx: EffectsBuilder, reason: string): "rejected" {
  state.waiting.popFront();
  state.waitingLive--;
  fx.rejection(req.id, reason);
  state.retire(req);
  return "rejected";
}
