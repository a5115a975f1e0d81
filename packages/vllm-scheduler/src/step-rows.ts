/**
 * The bookkeeping of the step being planned: the rows scheduled so far, the budget left and the
 * batch sums the timing model prices. One per rank, reset by every plan, so planning a step
 * allocates no closure, row list or batch object (the replay plans tens of thousands of steps).
 */
import type { Req } from "./rank-state.js";
import type { StepBatch } from "./timing-model.js";

/** A batch the planner fills in place (the timing models only read it, during `step`). */
export interface MutableBatch extends StepBatch {
  readonly prefill: { count: number; sumIsl: number; sumPrefix: number };
  readonly decode: { count: number; sumSequenceTokens: number; tokens: number };
  promptRows: number;
  promptTokens: number;
  promptContextTokens: number;
  promptAttentionPairs: number;
  decodeRows: number;
  decodeKvTokens: number;
  decodeTokens: number;
  decodeAttentionPairs: number;
}

export function newBatch(): MutableBatch {
  return {
    prefill: { count: 0, sumIsl: 0, sumPrefix: 0 },
    decode: { count: 0, sumSequenceTokens: 0, tokens: 0 },
    promptRows: 0,
    promptTokens: 0,
    promptContextTokens: 0,
    promptAttentionPairs: 0,
    decodeRows: 0,
    decodeKvTokens: 0,
    decodeTokens: 0,
    decodeAttentionPairs: 0,
  };
}

export class StepRows {
  /**
   * The scheduled requests, entries [0, count). Kept between steps (its capacity too); `clear`
   * drops the entries so a finished request is not kept reachable.
   */
  readonly scheduled: (Req | undefined)[] = [];
  count = 0;
  budget = 0;
  /** Draft tokens scheduled for verification in this plan (speculative decoding). */
  draftTokens = 0;
  /** False on a decode-role rank: no prefill batch or prompt rows are charged. */
  private chargePrefill = true;
  readonly batch: MutableBatch = newBatch();
  /** The allocation asked for a running row (the pool reads it during the call only): see `allocation`. */
  private readonly request = { computedTokens: 0, newTokens: 0, lookaheadTokens: 0 };

  /**
   * A running row's allocation request, `computedTokens` + `newTokens` (+ `lookaheadTokens` slots
   * for drafts and the drafter's lookahead); valid until the next call.
   */
  allocation(
    computedTokens: number,
    newTokens: number,
    lookaheadTokens = 0,
  ): { readonly computedTokens: number; readonly newTokens: number; readonly lookaheadTokens: number } {
    this.request.computedTokens = computedTokens;
    this.request.newTokens = newTokens;
    this.request.lookaheadTokens = lookaheadTokens;
    return this.request;
  }

  /** Starts a plan with `budget` tokens. */
  reset(budget: number, chargePrefill: boolean): void {
    this.count = 0;
    this.budget = budget;
    this.draftTokens = 0;
    this.chargePrefill = chargePrefill;
    const b = this.batch;
    b.prefill.count = 0;
    b.prefill.sumIsl = 0;
    b.prefill.sumPrefix = 0;
    b.decode.count = 0;
    b.decode.sumSequenceTokens = 0;
    b.decode.tokens = 0;
    b.promptRows = 0;
    b.promptTokens = 0;
    b.promptContextTokens = 0;
    b.promptAttentionPairs = 0;
    b.decodeRows = 0;
    b.decodeKvTokens = 0;
    b.decodeTokens = 0;
    b.decodeAttentionPairs = 0;
  }

  /** The i-th scheduled request (i < count). */
  at(i: number): Req {
    return this.scheduled[i]!;
  }

  /**
   * Records one scheduled row: budget, batch sums, computed count. `drafts` of the row's `n`
   * tokens are draft tokens to verify (speculative decoding; a decode row only).
   */
  record(req: Req, computedBefore: number, n: number, drafts = 0): void {
    req.stepTokens = n;
    req.stepDrafts = drafts;
    this.draftTokens += drafts;
    this.scheduled[this.count++] = req;
    this.budget -= n;
    const b = this.batch;
    const promptBefore = Math.min(computedBefore, req.promptTokens);
    const promptAfter = Math.min(computedBefore + n, req.promptTokens);
    if (this.chargePrefill && promptAfter > promptBefore) {
      b.prefill.count++;
      b.prefill.sumIsl += promptAfter;
      b.prefill.sumPrefix += promptBefore;
    }
    // A decode row computes the one token at the end of a sequence that already has output.
    // Surviving mutants: VS-59 (MUTANTS.md).
    if (this.chargePrefill && !(n - drafts === 1 && req.outputs > 0 && computedBefore + 1 === req.seq.numTokens)) {
      b.promptRows++;
      b.promptTokens += n;
      b.promptContextTokens += computedBefore;
      b.promptAttentionPairs += n * computedBefore + (n * (n + 1)) / 2;
    } else {
      b.decodeRows++;
      b.decodeKvTokens += computedBefore + n;
      b.decodeTokens += n;
      b.decodeAttentionPairs += n === 1 ? computedBefore + 1 : n * computedBefore + (n * (n + 1)) / 2;
    }
    // Computed counts advance at schedule time (docs/rules/vllm-scheduling.md §1.2 step 8).
    req.computed = computedBefore + n;
  }

  /** Drops the references to this step's requests (the count stays for the caller's last loop). */
  clear(): void {
    for (let i = 0; i < this.count; i++) this.scheduled[i] = undefined;
  }
}
