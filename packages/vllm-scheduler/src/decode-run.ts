/**
 * The decode fast path: many decode-only steps of a synchronous rank in one call.
 *
 * When every running request is decoding (one token to compute, at least one more to sample after
 * this step) and nothing waits to be admitted, each step of `synchronousStep` does the same thing:
 * schedule one token per running request in list order, price the batch, append one sampled token
 * per request. `decodeRun` does exactly that, step after step, without building a plan, a step
 * result or effects per step, and calls the pool only for the requests whose step touches it (a
 * block boundary: a new block, a block that becomes cache-visible; see kv-pool's
 * `quietDecodeSteps`). It stops before any step that would differ from that pattern or that the
 * caller must see on its own:
 *
 *   * a step that would finish a request (its last output token, or max_model_len);
 *   * a step whose new blocks might not all fit (a failed allocation preempts: the step path does it);
 *   * a step that would start at or after `startBeforeMs` (the caller's next event that could
 *     change the rank's inputs: an arrival, a command) or end after `endByMs` (a cutoff);
 *   * a step the timing model refuses or prices as non-finite (the step path then reports it).
 *
 * The state after a run of k steps is the state after k calls of `synchronousStep`, each starting
 * at the end of the previous one, and the tokens are the ones those steps would emit (one per
 * request per step, stamped with the step's end). Not used with async scheduling, on prefill
 * ranks, when KV events are collected (they are reported per step), or when a pending destination
 * reservation would be retried after a step.
 */
import { nextLoadDoneMs, settleLoads } from "./offload-loads.js";
import type { RankMetrics } from "./contract.js";
import type { Req, RankState } from "./rank-state.js";
import { newBatch, type MutableBatch } from "./step-rows.js";

/** Where a decode run must stop (see {@link decodeRun}). */
export interface DecodeRunLimits {
  /** A step may start only strictly before this time: the caller's next event that could change what the rank sees. */
  readonly startBeforeMs: number;
  /** Every step must end at or before this time (a cutoff); Infinity when none. */
  readonly endByMs: number;
  /** At most this many steps (unbounded when absent). */
  readonly maxSteps?: number;
  /**
   * For time series: record the pool's per-group pages in force at the times `index` x `everyMs`,
   * (`index` + 1) x `everyMs`... that fall inside the run, and after it (`pages`). The state at a
   * time is the one after every step that started at or before it.
   */
  readonly pagesAt?: { readonly index: number; readonly everyMs: number } | undefined;
}

/**
 * The pool's per-group pages (kv-pool's `groupPages`, copied) at given times inside a run, as rows
 * of one flat buffer (no allocation per step or per row): a row is the time, then `used` per group,
 * then `cached` per group. One row per asked time before the start of the run's last step, in time
 * order, then a last row with the pages after the run (time: its end). Asked times from the last
 * step's start on see the pages after the run (no row of their own).
 */
export interface DecodeRunPages {
  readonly rows: number;
  /** Values per row: 1 + 2 x groups. */
  readonly stride: number;
  /**
   * At least rows x stride values. The rank's scratch buffer: valid until the rank's next decode
   * run (a caller that keeps it longer copies it).
   */
  readonly data: Float64Array;
}

/**
 * Decode-only steps run back to back from `startMs`; each gave every request of the batch one token.
 *
 * `stepEndsMs`, `requestIds`, `firstTokenIndex` and `pages` are the rank's scratch buffers (a run
 * allocates none of them): valid until the rank's next decode run; a caller that keeps them longer
 * copies them. The typed arrays may be longer than the run: read only the entries documented.
 */
export interface DecodeRun {
  readonly startMs: number;
  /** The end of the last step. */
  readonly endMs: number;
  readonly steps: number;
  /** The end of each step (its tokens' time), in the first `steps` entries. */
  readonly stepEndsMs: Float64Array;
  /** The batch, in running order (every step scheduled exactly these requests). */
  readonly requestIds: readonly string[];
  /** Per request of the batch (the first `requestIds.length` entries), the output index of its token in the first step (then +1 per step). */
  readonly firstTokenIndex: Int32Array;
  /** Σ over the steps of the profile-table queries clamped. */
  readonly clampedTimingQueries: number;
  /** The rank's metrics after the last step. */
  readonly metrics: RankMetrics;
  /** With `pagesAt`: the pages at the asked times inside the run, then after it; undefined otherwise. */
  readonly pages: DecodeRunPages | undefined;
}

/** Scratch buffers of one rank (a run never overlaps another on the same rank). */
export class DecodeRunScratch {
  quiet = new Float64Array(16);
  ends = new Float64Array(64);
  /** The recorded pages (see {@link DecodeRunPages}). */
  pages = new Float64Array(64);
  /** The one-token allocation asked at a block boundary (the pool reads it during the call only). */
  readonly oneToken = { computedTokens: 0, newTokens: 1 };
  /** The batch's ids and first token indices (see {@link DecodeRun}). */
  readonly requestIds: string[] = [];
  firstTokenIndex = new Int32Array(16);
  readonly batch: MutableBatch = newBatch();
}

/** Up to how many steps the batch can run before one of its requests would finish (0: none). */
function stepsBeforeFinish(state: RankState, running: readonly Req[]): number {
  const maxModelLen = state.engine.max_model_len;
  let max = Number.MAX_SAFE_INTEGER;
  for (const req of running) {
    if (req.phase !== "running" || req.outputs === 0 || req.computed !== req.seq.numTokens - 1) return 0;
    // Step k (from 0) samples output index outputs + k; the one reaching maxOutputTokens finishes.
    max = Math.min(max, req.maxOutputTokens - req.outputs - 1);
    // After step k the sequence has numTokens + k + 1 tokens; reaching max_model_len finishes it.
    if (maxModelLen !== undefined) max = Math.min(max, maxModelLen - req.seq.numTokens - 1);
    if (max <= 0) return 0;
  }
  return max;
}

/** Appends a row (`timeMs`, then the pages) to the scratch buffer; returns the row count. */
function recordPages(
  scratch: DecodeRunScratch,
  gp: { readonly used: ArrayLike<number>; readonly cached: ArrayLike<number> },
  rows: number,
  timeMs: number,
): number {
  const groups = gp.used.length;
  const stride = 1 + 2 * groups;
  const at = rows * stride;
  if (at + stride > scratch.pages.length) {
    const grown = new Float64Array(Math.max(2 * scratch.pages.length, at + stride));
    grown.set(scratch.pages);
    scratch.pages = grown;
  }
  const rec = scratch.pages;
  rec[at] = timeMs;
  for (let g = 0; g < groups; g++) {
    rec[at + 1 + g] = gp.used[g]!;
    rec[at + 1 + groups + g] = gp.cached[g]!;
  }
  return rows + 1;
}

/**
 * Runs decode-only steps from `nowMs` while they stay the plain pattern (see the module comment);
 * undefined when not even one step can run that way (the caller then uses the step path).
 */
export function decodeRun(state: RankState, scratch: DecodeRunScratch, nowMs: number, limits: DecodeRunLimits): DecodeRun | undefined {
  // Speculative decoding emits a varying number of tokens per step: the step path runs it.
  if (state.role === "prefill" || state.collectKvEvents || state.speculation !== undefined) return undefined;
  if (state.offload !== undefined) {
    // Loads done by now join the activated queue first (the step path admits them); a run stops
    // before the next load is done.
    settleLoads(state, nowMs);
    const loadDone = nextLoadDoneMs(state);
    if (loadDone < limits.startBeforeMs) limits = { ...limits, startBeforeMs: loadDone };
  }
  if (state.waitingLive > 0 || state.activatedLive > 0 || state.finishingCount > 0) return undefined;
  const running = state.running;
  const n = running.length;
  if (n === 0 || n > state.engine.max_num_batched_tokens) return undefined;
  if (state.reservationRetryDue()) return undefined;
  const maxSteps = Math.min(stepsBeforeFinish(state, running), limits.maxSteps ?? Number.MAX_SAFE_INTEGER);
  if (maxSteps <= 0 || !(nowMs < limits.startBeforeMs)) return undefined;

  const pool = state.pool;
  if (scratch.quiet.length < n) scratch.quiet = new Float64Array(Math.max(n, scratch.quiet.length * 2));
  const quiet = scratch.quiet;
  let sumSequenceTokens = 0;
  for (let i = 0; i < n; i++) {
    const req = running[i]!;
    sumSequenceTokens += req.seq.numTokens;
    quiet[i] = pool.quietDecodeSteps(req.seq, req.computed);
  }
  const batch = scratch.batch;
  batch.decode.count = n;
  batch.decode.tokens = n;
  batch.decodeRows = n;
  batch.decodeTokens = n;

  if (scratch.firstTokenIndex.length < n) scratch.firstTokenIndex = new Int32Array(Math.max(n, scratch.firstTokenIndex.length * 2));
  const firstTokenIndex = scratch.firstTokenIndex;
  const requestIds = scratch.requestIds;
  // Assigning an array's length, even its own, is a runtime call: only when it changes.
  // Stryker disable next-line ConditionalExpression: VS-14
  if (requestIds.length !== n) requestIds.length = n;
  for (let i = 0; i < n; i++) {
    firstTokenIndex[i] = running[i]!.outputs;
    requestIds[i] = running[i]!.id;
  }

  let t = nowMs;
  let steps = 0;
  let clamped = 0;
  // Pages at the asked times: before each step, a row for every asked time before its start.
  const pagesAt = limits.pagesAt;
  const every = pagesAt === undefined ? 0 : pagesAt.everyMs;
  let askIndex = pagesAt === undefined ? 0 : pagesAt.index;
  let askMs = pagesAt === undefined ? Infinity : askIndex * every;
  let pageRows = 0;
  const startBefore = limits.startBeforeMs;
  const endBy = limits.endByMs;
  // The model's shortcut for a decode-only step, when it has one (same number, no objects).
  const decodeOnlyMs = state.timing.decodeOnlyMs;
  for (; steps < maxSteps && t < startBefore; steps++) {
    // Every asked time before this step's start sees the state after the steps before it.
    while (askMs < t) {
      pageRows = recordPages(scratch, pool.groupPages(), pageRows, askMs);
      askIndex++;
      askMs = askIndex * every;
    }
    // Price first: a refused or odd price ends the run before the step changes anything.
    let end: number;
    if (decodeOnlyMs !== undefined) {
      // The step path's t + prefillMs (0) + decodeMs: adding 0 first changes no double here (t >= 0).
      end = t + decodeOnlyMs(n, sumSequenceTokens);
    } else {
      batch.decode.sumSequenceTokens = sumSequenceTokens;
      batch.decodeKvTokens = sumSequenceTokens;
      batch.decodeAttentionPairs = sumSequenceTokens;
      try {
        const price = state.timing.step(batch);
        clamped += price.clamped;
        end = t + price.prefillMs + price.decodeMs;
      } catch {
        if (steps === 0) return undefined; // the step path prices it again and reports the refusal
        break;
      }
    }
    if (!Number.isFinite(end) || !(end >= t) || end > endBy) break;

    // Blocks for the requests at a boundary: all of them must fit, or the step path decides.
    let need = 0;
    for (let i = 0; i < n; i++) {
      if (quiet[i] === 0) {
        const req = running[i]!;
        scratch.oneToken.computedTokens = req.computed;
        need += pool.pagesNeeded(req.seq, scratch.oneToken);
      }
    }
    if (need > 0 && need > pool.metrics().freePages) break;

    // Offload tiers see what each step does at the step path's times: evictions at its start.
    const offload = state.offload;
    if (offload !== undefined) offload.clockMs = t;
    // The running pass: one token each, in list order (allocation for those at a boundary).
    for (let i = 0; i < n; i++) {
      const req = running[i]!;
      if (quiet[i] === 0) {
        scratch.oneToken.computedTokens = req.computed;
        if (!pool.allocateSlots(req.seq, scratch.oneToken)) throw new Error(`decode run: request ${req.id} did not get the blocks counted for it`);
      }
      req.computed++;
    }
    // Blocks become cache-visible (stored in write-through tiers from the step's end), then each request samples its token.
    if (offload !== undefined) offload.clockMs = end;
    for (let i = 0; i < n; i++) {
      const req = running[i]!;
      if (quiet[i] === 0) pool.commitComputed(req.seq, req.computed);
      req.seq.appendOutputs(1);
      req.outputs++;
    }
    for (let i = 0; i < n; i++) {
      if (quiet[i] === 0) {
        const req = running[i]!;
        quiet[i] = pool.quietDecodeSteps(req.seq, req.computed);
      } else quiet[i]!--;
    }
    sumSequenceTokens += n;
    if (steps === scratch.ends.length) {
      const grown = new Float64Array(scratch.ends.length * 2);
      grown.set(scratch.ends);
      scratch.ends = grown;
    }
    scratch.ends[steps] = end;
    t = end;
  }
  if (steps === 0) return undefined;
  for (let i = 0; i < n; i++) {
    const req = running[i]!;
    pool.advanceQuietDecode(req.seq, req.computed);
  }
  let pages: DecodeRunPages | undefined;
  if (pagesAt !== undefined) {
    const gp = pool.groupPages();
    pageRows = recordPages(scratch, gp, pageRows, t);
    pages = { rows: pageRows, stride: 1 + 2 * gp.used.length, data: scratch.pages };
  }
  return {
    startMs: nowMs,
    endMs: t,
    steps,
    stepEndsMs: scratch.ends,
    requestIds,
    firstTokenIndex,
    clampedTimingQueries: clamped,
    metrics: state.metrics(),
    pages,
  };
}
