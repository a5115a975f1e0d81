/**
 * The acceptance rate of speculative decoding, fitted from a measured run's tokens per step.
 *
 * A streamed response carries one chunk per engine step (vLLM's default stream interval), so a
 * `vllm bench serve --save-detailed` file, whose `itls` list one gap per chunk after the first,
 * records the tokens each decode step emitted: Σ (output tokens - 1) / Σ chunks after the first is
 * the measured mean acceptance length m. With k drafts per step each accepted with probability p
 * given the ones before were, a step emits 1 + p + p^2 + ... + p^k tokens on average; that is
 * increasing in p from 1 (p = 0) to k + 1 (p = 1), so m gives p by bisection. Formats without
 * per-chunk gaps (vLLM per-request stats, kvsim records) do not record it: take the rate from
 * vLLM's own spec-decode metrics instead (its logged mean acceptance length, or per-position rates
 * for `acceptance_per_position`).
 */
import type { MeasuredRun } from "./measured.js";

/** What a measured run says about speculative decoding. */
export interface AcceptanceFit {
  /** Output tokens after the first, over the completed requests with per-chunk gaps. */
  readonly tokens: number;
  /** Chunks (steps) after the first. */
  readonly chunks: number;
  /** tokens / chunks: the measured mean acceptance length. */
  readonly meanAcceptanceLength: number;
  /** The constant per-position acceptance rate that gives it with `k` drafts (clamped to [0, 1]). */
  readonly acceptanceRate: number;
}

/** 1 + p + ... + p^k: the tokens a step emits on average. */
export function tokensPerStep(p: number, k: number): number {
  let sum = 1;
  let pow = 1;
  for (let i = 0; i < k; i++) {
    pow *= p;
    sum += pow;
  }
  return sum;
}

/** The p in [0, 1] with tokensPerStep(p, k) = m (0 below 1 token, 1 above k + 1). */
export function acceptanceRateFor(m: number, k: number): number {
  if (!(m > 1)) return 0;
  if (m >= k + 1) return 1;
  let lo = 0;
  let hi = 1;
  // 60 halvings take the interval below 1e-18, past a double's resolution near 1.
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (tokensPerStep(mid, k) < m) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** The fit from a run's per-chunk gaps; undefined when the run has none (its format does not record them). */
export function fitAcceptance(run: MeasuredRun, k: number): AcceptanceFit | undefined {
  let tokens = 0;
  let chunks = 0;
  for (const r of run.requests) {
    if (r.itlsMs === undefined || r.outputTokens < 2) continue;
    tokens += r.outputTokens - 1;
    chunks += r.itlsMs.length;
  }
  if (chunks === 0) return undefined;
  const m = tokens / chunks;
  return { tokens, chunks, meanAcceptanceLength: m, acceptanceRate: acceptanceRateFor(m, k) };
}
