// Stage 1 of the linear fit: a regression over the step times the fit part's timestamps imply,
// the start of stage 2's search (fit.ts).
import type { MeasuredRun } from "./measured.js";
import { nonNegativeLeastSquares } from "./nnls.js";
import { maxOf } from "./stats.js";
import type { ExpertsTerm, LinearCoefficients } from "./fit.js";

/** The expected share of `experts` experts that `tokens` tokens touch, each routed to `perToken` of them. */
function shareTouched(tokens: number, experts: number, perToken: number): number {
  return tokens <= 0 ? 0 : 1 - Math.pow(1 - perToken / experts, tokens);
}

/**
 * One request's decode interval holds `output - 1` steps (a token per step), so its TPOT is the
 * mean step time there. The load of those steps is estimated from the fit part's own timestamps on
 * a 5 ms grid: running sequences (scheduled to last token), KV tokens of decoding sequences (prompt
 * plus the tokens produced so far, linearly), prompt tokens computed (each prompt spread over its
 * prefill window), the context those prompt chunks attend, and the share of time with prompt work.
 * Requests outside the fit part are not seen, so late in the window the load is underestimated;
 * the simulation stage corrects the scale.
 */
/** The most cells of the regression's load grid: 2^21, 5 ms cells over 2.9 hours (four arrays of doubles, 64 MiB). */
export const MAX_REGRESSION_CELLS = 2 ** 21;
/** The most cell visits the requests may make (each visits the cells of its own interval a few times). */
export const MAX_REGRESSION_VISITS = 2 ** 26;

/**
 * The regression grid's cell, ms: 5, or wider when the run is so long (`endMs`, its last token) or
 * its requests so long together (`sumE2eMs`) that 5 ms cells would cost more than
 * MAX_REGRESSION_CELLS cells or MAX_REGRESSION_VISITS visits. Memory and time stay bounded
 * whatever the measured timestamps say (one request of 2^53 s once asked for exabytes).
 */
export function regressionGridMs(endMs: number, sumE2eMs: number): number {
  return Math.max(5, endMs / (MAX_REGRESSION_CELLS - 2), sumE2eMs / MAX_REGRESSION_VISITS);
}

export function regressionStart(fit: MeasuredRun, maxNumBatchedTokens: number, experts?: Omit<ExpertsTerm, "all_experts_ms">): LinearCoefficients {
  const reqs = fit.requests.filter((r) => r.arrivalMs !== null);
  const tpots = reqs
    .map((r) => r.tpotMs)
    .filter((t): t is number => t !== null)
    .sort((a, b) => a - b);
  const medianTpot = tpots.length === 0 ? 20 : tpots[Math.floor(tpots.length / 2)]!;
  const withExperts = (c: Omit<LinearCoefficients, "experts">, allExpertsMs: number): LinearCoefficients =>
    experts === undefined
      ? c
      : { ...c, experts: { num_experts: experts.num_experts, num_experts_per_tok: experts.num_experts_per_tok, all_experts_ms: allExpertsMs } };
  const fallback = withExperts(
    { step_ms: medianTpot, per_sequence_ms: 0, per_kv_token_us: 0, per_prompt_token_us: 0, per_cached_token_us: 0, prompt_step_ms: 0 },
    0,
  );
  if (reqs.length < 2 || tpots.length < 2) return fallback;
  const end = maxOf(reqs.map((r) => r.arrivalMs! + r.e2eMs));
  const dt = regressionGridMs(
    end,
    reqs.reduce((s, r) => s + r.e2eMs, 0),
  );
  const n = Math.ceil(end / dt) + 2;
  const running = new Float64Array(n);
  const kv = new Float64Array(n);
  const promptRate = new Float64Array(n);
  const contextRate = new Float64Array(n);
  const promptActive = new Uint8Array(n);
  const idx = (t: number) => Math.min(n - 1, Math.max(0, Math.floor(t / dt)));
  for (const r of reqs) {
    const a = r.arrivalMs!;
    const first = a + r.ttftMs;
    const last = a + r.e2eMs;
    const chunks = Math.ceil(r.inputTokens / maxNumBatchedTokens);
    const start = r.queueMs !== undefined ? a + r.queueMs : Math.max(a, first - (chunks + 1) * medianTpot);
    const window = Math.max(dt, first - start);
    // Context of the chunks: chunk m (0-based) attends the m chunks before it.
    const context = (maxNumBatchedTokens * chunks * (chunks - 1)) / 2;
    for (let k = idx(start); k < idx(first); k++) {
      promptActive[k] = 1;
      promptRate[k]! += (r.inputTokens * dt) / window;
      contextRate[k]! += (context * dt) / window;
    }
    for (let k = idx(start); k < idx(last); k++) running[k]! += 1;
    const span = Math.max(dt, last - first);
    for (let k = idx(first); k < idx(last); k++) kv[k]! += r.inputTokens + (r.outputTokens * (k * dt - first)) / span;
  }
  // Only the time before the fit part's last arrival is fully observed: every request running
  // then is in the fit part (later requests arrive later). Each row is the part of a request's
  // decode interval before it, its steps counted at the request's mean step time (its TPOT).
  const cut = idx(maxOf(reqs.map((r) => r.arrivalMs!)));
  const build = (minShare: number) => {
    const rows: number[][] = [];
    const ys: number[] = [];
    for (const r of reqs) {
      if (r.tpotMs === null || r.tpotMs <= 0) continue;
      const a = r.arrivalMs!;
      const lo = idx(a + r.ttftMs);
      const full = Math.max(lo + 1, idx(a + r.e2eMs));
      const hi = Math.min(full, cut);
      if (hi <= lo) continue;
      const share = (hi - lo) / (full - lo);
      if (share < minShare) continue;
      let sr = 0,
        skv = 0,
        sp = 0,
        sc = 0,
        sa = 0,
        se = 0;
      for (let k = lo; k < hi; k++) {
        // Experts touched: every one in a step with prompt work; else the share the running
        // sequences' tokens touch (all ranks' decode rows reach every expert-parallel rank).
        if (experts !== undefined) se += promptActive[k] === 1 ? 1 : shareTouched(running[k]!, experts.num_experts, experts.num_experts_per_tok);
        sr += running[k]!;
        skv += kv[k]!;
        sp += promptRate[k]!;
        sc += contextRate[k]!;
        sa += promptActive[k]!;
      }
      const cells = hi - lo;
      const steps = Math.max(1, (cells * dt) / r.tpotMs);
      // Per step: c0 + c_seq R + c_kv KV / 1000 + c_pstep share + (c_ptok prompt + c_ctx context) / 1000 / steps.
      const row = [1, sr / cells, skv / cells / 1000, sp / steps / 1000, sc / steps / 1000, sa / cells];
      if (experts !== undefined) row.push(se / cells);
      // Relative errors (each row over its TPOT), weighted by the observed share of the interval.
      rows.push(row.map((x) => (x * share) / r.tpotMs!));
      ys.push(share);
    }
    return { rows, ys };
  };
  let { rows, ys } = build(0.5);
  if (rows.length < 8) ({ rows, ys } = build(0));
  if (rows.length < 6) return fallback;
  const x = nonNegativeLeastSquares(rows, ys);
  if (x === undefined || x[0]! + x[1]! + x[2]! + (x[6] ?? 0) <= 0) return fallback;
  return withExperts(
    { step_ms: x[0]!, per_sequence_ms: x[1]!, per_kv_token_us: x[2]!, per_prompt_token_us: x[3]!, per_cached_token_us: x[4]!, prompt_step_ms: x[5]! },
    x[6] ?? 0,
  );
}
