import type { RoleRankConfig } from "@kvsim/replay-engine";
import { latencyStat, type SlaTerm } from "@kvsim/sweep";
import { createTimingModel, type StepBatch, type TimingModel } from "@kvsim/vllm-scheduler";
import type { Deployment } from "./space.js";
import type { WorkloadStats } from "./workload.js";

/**
 * A deployment's rough capacity in requests per second, from its timing model alone: prefill at a
 * full token budget, decode at the largest batch the KV pool, `max_num_seqs` and any TPOT or ITL
 * bound of the SLA allow. It ignores prefix reuse, queueing and chunk mixing, so it is neither a
 * bound nor a prediction: the plan uses it only to order candidates (likely winners first, so
 * the pruning threshold rises early) and to start each rate search near its answer.
 */
export interface CapacityEstimate {
  /** Requests per second the whole deployment could complete; 0 when the SLA cannot hold at any load. */
  readonly rps: number;
  /** When rps is 0: why, in one line. */
  readonly infeasible?: string;
}

/** The TPOT or ITL limit of the SLA (the tightest), in ms, or undefined. */
export function decodeLimitMs(sla: readonly SlaTerm[]): number | undefined {
  let limit: number | undefined;
  for (const t of sla) {
    const l = latencyStat(t.metric);
    if (t.op !== "<=" || l === undefined || (l.latency !== "tpot" && l.latency !== "itl") || l.stat === "std") continue;
    limit = limit === undefined ? t.value : Math.min(limit, t.value);
  }
  return limit;
}

const prefillStep = (tokens: number, rowTokens: number): StepBatch => {
  const rows = Math.max(1, Math.round(tokens / rowTokens));
  const n = tokens / rows;
  return {
    prefill: { count: rows, sumIsl: tokens, sumPrefix: 0 },
    decode: { count: 0, sumSequenceTokens: 0 },
    promptRows: rows,
    promptTokens: tokens,
    promptContextTokens: 0,
    decodeRows: 0,
    decodeKvTokens: 0,
    promptAttentionPairs: rows * ((n * (n + 1)) / 2),
  };
};

const decodeMs = (model: TimingModel, rows: number, kvTokens: number): number => {
  const fast = model.decodeOnlyMs?.(rows, kvTokens);
  if (fast !== undefined) return fast;
  const t = model.step({
    prefill: { count: 0, sumIsl: 0, sumPrefix: 0 },
    decode: { count: rows, sumSequenceTokens: kvTokens - rows },
    promptRows: 0,
    promptTokens: 0,
    promptContextTokens: 0,
    decodeRows: rows,
    decodeKvTokens: kvTokens,
  });
  return t.prefillMs + t.decodeMs;
};

/** One rank's prefill throughput (prompt tokens per second) and decode throughput (tokens per second). */
interface RankRates {
  readonly prefillTokensPerS: number;
  readonly decodeTokensPerS: number;
  /** A lone decode step at the shortest context, ms: no request's TPOT can be below it. */
  readonly loneDecodeMs: number;
}

function rankRates(config: RoleRankConfig, stats: WorkloadStats, decodeLimit: number | undefined): RankRates {
  const model = createTimingModel(config.config.timing, config.config.profile, config.config.engine);
  const engine = config.config.engine;
  const budget = engine.max_num_batched_tokens;
  const p = model.step(prefillStep(budget, Math.max(1, stats.meanInputTokens)));
  const prefillMs = p.prefillMs + p.decodeMs;
  const context = stats.meanInputTokens + stats.meanOutputTokens / 2;
  const kvTokens = config.capacity?.kv_cache_tokens ?? engine.num_gpu_blocks * (engine.block_size ?? 16);
  let rows = Math.max(1, Math.min(engine.max_num_seqs, Math.floor(kvTokens / Math.max(1, context))));
  const loneDecodeMs = decodeMs(model, 1, stats.minInputTokens + 1);
  if (decodeLimit !== undefined) {
    // The largest batch whose step fits the limit (step time grows with the batch).
    let lo = 0;
    let hi = rows;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (decodeMs(model, mid, Math.round(mid * context)) <= decodeLimit) lo = mid;
      else hi = mid - 1;
    }
    rows = Math.max(1, lo);
  }
  const stepMs = decodeMs(model, rows, Math.round(rows * context));
  return {
    prefillTokensPerS: prefillMs > 0 ? (budget * 1000) / prefillMs : Number.POSITIVE_INFINITY,
    decodeTokensPerS: stepMs > 0 ? (rows * 1000) / stepMs : Number.POSITIVE_INFINITY,
    loneDecodeMs,
  };
}

/**
 * The capacity estimate of a deployment from its roles' rank configurations (aggregated, or
 * prefill then decode), the workload's shape and the SLA. A deployment is infeasible outright
 * only by a sound rule: the timing model is a roofline (every term non-decreasing in rows and
 * context), no speculative decoding, and a lone decode step at the shortest prompt already takes
 * longer than the SLA's TPOT or ITL limit, so every request's TPOT exceeds it.
 */
export function estimateCapacity(d: Deployment, configs: readonly RoleRankConfig[], stats: WorkloadStats, sla: readonly SlaTerm[]): CapacityEstimate {
  const limit = decodeLimitMs(sla);
  const rates = configs.map((c) => rankRates(c, stats, limit));
  const decodeRole = configs.length === 1 ? 0 : 1;
  const decodeConfig = configs[decodeRole]!.config;
  const lone = rates[decodeRole]!.loneDecodeMs;
  if (limit !== undefined && decodeConfig.timing.type === "roofline" && decodeConfig.engine.speculative_config === undefined && lone > limit) {
    return { rps: 0, infeasible: `a lone decode step takes ${lone.toFixed(2)} ms, above the SLA's ${limit} ms per output token at any load` };
  }
  const input = Math.max(1, stats.meanInputTokens);
  const output = Math.max(1, stats.meanOutputTokens);
  if (d.topology === "aggregated") {
    const r = rates[0]!;
    // One rank time-shares prefill and decode: seconds per request is the sum of the two.
    const perWorker = 1 / (input / r.prefillTokensPerS + output / r.decodeTokensPerS);
    return { rps: d.pool.workers * perWorker };
  }
  const [pre, dec] = rates as [RankRates, RankRates];
  return { rps: Math.min((d.prefill.workers * pre.prefillTokensPerS) / input, (d.decode.workers * dec.decodeTokensPerS) / output) };
}
