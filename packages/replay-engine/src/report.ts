import { createHash } from "node:crypto";
import stringify from "safe-stable-stringify";
import type { KvCapacity, TransferMode } from "@kvsim/profile-schema";
import type { SaturationCheck } from "./saturation.js";
import type { SpeculationStats } from "@kvsim/vllm-scheduler";
import type { RoutingReport } from "./routing-report.js";
import type { KvOffloadReport } from "./offload-tiers.js";

/** Latency quantiles for CDF plots: each metric's values at p = 100 k / (n - 1), k = 0..n-1. */
export interface LatencyQuantiles {
  readonly ttft: readonly number[];
  readonly tpot: readonly number[];
  readonly itl: readonly number[];
  readonly e2e: readonly number[];
}
import type { NetworkHandoffStats, NetworkReport, TransferPath } from "./transfer-network.js";

export type RequestStatus = "completed" | "rejected" | "failed";

/** The handoff of one P/D request: lifecycle times, terms and price. */
export interface HandoffRecord {
  readonly source_held_ms: number | null;
  readonly destination_reserved_ms: number | null;
  readonly destination_activated_ms: number | null;
  readonly source_released_ms: number | null;
  /** The decode rank's own prefix hit, in tokens. */
  readonly destination_hit_tokens: number | null;
  readonly mode: TransferMode | null;
  /** `block` (grouped source, full-attention blocks) or `token` (linear source). */
  readonly unit: "block" | "token" | null;
  readonly block_size_tokens: number | null;
  readonly backoff_tokens: number | null;
  readonly transferred_tokens: number | null;
  readonly prompt_units: number | null;
  readonly missing_units: number | null;
  readonly bytes_per_unit: number | null;
  readonly fixed_bytes: number | null;
  readonly payload_bytes: number | null;
  readonly bandwidth_gbps: number | null;
  /** The delay used: the priced one, or the spec's fallback latency without bandwidth (plus the setup latency); with a network, requested to last byte. */
  readonly delay_ms: number | null;
  /** With `kv_transfer.network`: the path, when the transfer got its NIC slots, its first and last byte, and the three parts of `delay_ms`. */
  readonly transfer_path?: TransferPath;
  readonly transfer_start_ms?: number | null;
  readonly transfer_first_byte_ms?: number | null;
  readonly transfer_end_ms?: number | null;
  readonly queue_ms?: number | null;
  readonly setup_ms?: number | null;
  readonly transfer_ms?: number | null;
}

/** One terminal request (docs/rules/formats.md §5). Times are virtual ms. */
export interface RequestRecord {
  readonly request_id: string;
  readonly status: RequestStatus;
  /** Why it was rejected or failed. */
  readonly reason?: string;
  readonly arrival_ms: number;
  /** First admission (prefill side in P/D). */
  readonly admitted_ms: number | null;
  readonly first_token_ms: number | null;
  readonly last_token_ms: number | null;
  readonly ttft_ms: number | null;
  /** (last - first) / (n - 1), for n >= 2 tokens. */
  readonly tpot_ms: number | null;
  readonly e2e_ms: number | null;
  readonly input_tokens: number;
  /** Tokens emitted (decode side in P/D). */
  readonly output_tokens: number;
  readonly requested_output_tokens: number;
  /** Largest prefix-cache hit over its admissions (prefill side in P/D). */
  readonly reused_tokens: number;
  readonly preemptions: number;
  /** Worker ids by role: `aggregated`, or `prefill` and `decode`. */
  readonly workers: { readonly aggregated?: number; readonly prefill?: number; readonly decode?: number };
  /** When a role has data_parallel_size > 1: the data-parallel rank within each worker, by role (those roles only). */
  readonly dp_ranks?: { readonly aggregated?: number; readonly prefill?: number; readonly decode?: number };
  readonly handoff?: HandoffRecord;
  /** With offload tiers, when it loaded from them: the prompt tokens each tier served (by name; in P/D by role and name, `decode.cpu`), and its loads' time (start to last byte). */
  readonly offload?: OffloadRecord;
}

/** What the offload tiers served one request. */
export interface OffloadRecord {
  readonly tokens: Readonly<Record<string, number>>;
  readonly load_ms: number;
}

/** One worker of a data-parallel pool: where its front end placed requests and, in lockstep, how its ranks stepped. */
export interface DataParallelWorker {
  /** Requests placed on each of its ranks (index = DP rank); a P/D request counts once per role. */
  readonly placed: readonly number[];
  /** Lockstep only: steps the ranks took together, those in which no rank had work (dummy batches only), and waves. */
  readonly steps?: number;
  readonly idle_steps?: number;
  readonly waves?: number;
}

/** The data-parallel layout of one role's pool. */
export interface DataParallelPool {
  readonly data_parallel_size: number;
  /** `enable_expert_parallel`: the ranks of a worker step in lockstep. */
  readonly expert_parallel: boolean;
  readonly workers: readonly DataParallelWorker[];
}

/** Roles whose engine has data_parallel_size > 1. */
export interface DataParallelReport {
  readonly aggregated?: DataParallelPool;
  readonly prefill?: DataParallelPool;
  readonly decode?: DataParallelPool;
}

/** vLLM's per-metric summary keys the report adds: median_ttft_ms, std_itl_ms, mean_e2el_ms, ... */
export type VllmSummaryKeys = Readonly<Partial<Record<`${"median" | "std"}_${MetricName}_ms` | "mean_e2el_ms", number | null>>>;

/** p<P>_<metric>_ms for every requested percentile P (vLLM's key form: p95, p99.9), `e2e` and `e2el` both. */
export type PercentileKeys = Readonly<Record<`p${number}_${MetricName}_ms`, number | null | undefined>>;

/** The replay summary (docs/rules/formats.md §4). Virtual-time metrics only; the CLI adds the wall-clock ones. */
export interface ReplayReport extends VllmSummaryKeys, PercentileKeys {
  /** Requests that arrived (any status, in flight at the cutoff included). */
  readonly num_requests: number;
  readonly completed_requests: number;
  readonly rejected_requests: number;
  readonly failed_requests: number;
  /** Arrived but not terminal when the virtual-time cutoff stopped the replay. */
  readonly in_flight_requests: number;
  /** Over completed requests. */
  readonly total_input_tokens: number;
  readonly total_output_tokens: number;
  /** Latest terminal time of a completed request. */
  readonly duration_ms: number;
  readonly request_throughput_rps: number;
  readonly input_throughput_tok_s: number;
  readonly output_throughput_tok_s: number;
  /** Latencies over the completed requests; null (every one) when no request completed. */
  readonly mean_ttft_ms: number | null;
  readonly p50_ttft_ms: number | null;
  readonly p90_ttft_ms: number | null;
  readonly p99_ttft_ms: number | null;
  readonly mean_tpot_ms: number | null;
  readonly p50_tpot_ms: number | null;
  readonly p90_tpot_ms: number | null;
  readonly p99_tpot_ms: number | null;
  readonly mean_itl_ms: number | null;
  readonly p50_itl_ms: number | null;
  readonly p90_itl_ms: number | null;
  readonly p99_itl_ms: number | null;
  readonly mean_e2e_ms: number | null;
  readonly p50_e2e_ms: number | null;
  readonly p90_e2e_ms: number | null;
  readonly p99_e2e_ms: number | null;
  /** Sum of reused tokens over sum of input tokens, over completed requests. */
  readonly prefix_cache_reused_ratio: number;
  /** Preemptions over every rank. */
  readonly preemptions: number;
  /** Transfers started: how many, bytes moved, mean delay; with a network, the delays of finished transfers (NetworkHandoffStats). */
  readonly handoffs: { readonly count: number; readonly payload_bytes: number; readonly mean_delay_ms: number } & Partial<NetworkHandoffStats>;
  /** With `kv_transfer.network`: per-worker NIC load. */
  readonly network?: NetworkReport;
  /** With an SLA: completed requests that met it, per second of duration. */
  readonly goodput_requests?: number;
  readonly goodput_rps?: number;
  /** Present when `max_virtual_time_ms` stopped the replay: what was cut off. */
  readonly cutoff?: CutoffSummary;
  /** Why requests were rejected or failed, grouped (numbers masked) and counted, most frequent first. */
  readonly rejection_reasons?: readonly ReasonGroup[];
  readonly failure_reasons?: readonly ReasonGroup[];
  /** Whether the queue kept growing: offered vs served rate and the TTFT trend. */
  readonly saturation?: SaturationCheck;
  /**
   * vLLM's benchmark names (`vllm bench serve` result JSON), derived from the same samples:
   * `duration` in seconds, `completed`, `failed` (rejected + failed: vLLM counts every unsuccessful
   * request as failed), `request_throughput`, `request_goodput` (null without an SLA),
   * `output_throughput`, `total_token_throughput`, and `{mean,median,std}_{ttft,tpot,itl,e2el}_ms`.
   * Percentiles stay exact nearest rank (`median` = p50), not numpy's interpolation.
   */
  readonly duration?: number;
  readonly completed?: number;
  readonly failed?: number;
  readonly request_throughput?: number;
  readonly request_goodput?: number | null;
  readonly output_throughput?: number;
  readonly total_token_throughput?: number;
  /** Where TTFT and E2E start: the engine, or the client (spec.frontend set; not in the digest). */
  readonly ttft_clock?: TtftClock;
  /** Present when an engine sized its pool from GPU memory: how num_gpu_blocks followed, per role (not in the digest). */
  readonly kv_capacity?: KvCapacityByRole;
  /** Present when a role has data_parallel_size > 1: its layout, placements and lockstep steps (not in the digest). */
  readonly data_parallel?: DataParallelReport;
  /** How the routers spread the requests: per pool, requests and computed prompt tokens per worker, and an imbalance warning (not in the digest). */
  readonly routing?: RoutingReport;
  /** Present when the spec has offload tiers (kv_offload): per tier its loads, tokens served, bytes moved and held, and the loads' delays (not in the digest). */
  readonly kv_offload?: KvOffloadReport;
  /** Present when a rank speculates (engine.speculative_config): drafts and acceptance, as vLLM's spec-decode metrics (not in the digest). */
  readonly speculative_decoding?: SpeculativeDecodingReport;
  /** SHA-256 (hex) of the canonical report: the keys of CANONICAL_KEYS, sorted. */
  readonly digest: string;
  /** Added by the CLI: host time of the run. */
  readonly wall_time_ms?: number;
  readonly simulated_requests_per_wall_s?: number;
}

/**
 * Speculative decoding over every rank that speculated, under vLLM's metric names: drafts
 * (`num_drafts`, decode rows that verified drafts), draft and accepted tokens, the mean acceptance
 * length 1 + accepted / drafts (tokens a verifying row emits per step), the draft acceptance rate
 * accepted / draft tokens, and per position the accepted tokens over the drafts.
 */
export interface SpeculativeDecodingReport {
  readonly method: string;
  readonly num_speculative_tokens: number;
  readonly num_drafts: number;
  readonly num_draft_tokens: number;
  readonly num_accepted_tokens: number;
  readonly mean_acceptance_length: number;
  readonly draft_acceptance_rate: number;
  readonly acceptance_per_position: readonly number[];
}

/** The report section from summed counts (undefined when no rank speculated). */
export function speculativeDecodingReport(stats: SpeculationStats | undefined): SpeculativeDecodingReport | undefined {
  if (stats === undefined) return undefined;
  const drafts = stats.verifiedRows;
  return {
    method: stats.method,
    num_speculative_tokens: stats.numSpeculativeTokens,
    num_drafts: drafts,
    num_draft_tokens: stats.draftedTokens,
    num_accepted_tokens: stats.acceptedTokens,
    mean_acceptance_length: drafts === 0 ? 0 : 1 + stats.acceptedTokens / drafts,
    draft_acceptance_rate: stats.draftedTokens === 0 ? 0 : stats.acceptedTokens / stats.draftedTokens,
    acceptance_per_position: stats.acceptedAtPosition.map((a) => (drafts === 0 ? 0 : a / drafts)),
  };
}

/** The clock a report's TTFT and E2E are on: from the engine's arrival, or from the client's (with a front-end overhead). */
export type TtftClock = "engine" | "client";

/** Metric names in report keys: kvsim's `e2e` and vLLM's `e2el` name the same latency. */
export type MetricName = "ttft" | "tpot" | "itl" | "e2e" | "e2el";

/** The percentiles every report has (p50, p90, p99 of each metric); `--percentiles` may add more. */
export const DEFAULT_PERCENTILES: readonly number[] = [50, 90, 99];

/** The key of percentile `p` of `metric`, in vLLM's form: p95_ttft_ms, p99.9_itl_ms. */
export function percentileKey(p: number, metric: MetricName): `p${number}_${MetricName}_ms` {
  return `p${p}_${metric}_ms`;
}

/** What a virtual-time cutoff left unfinished. */
export interface CutoffSummary {
  /** The cutoff (`max_virtual_time_ms`): the virtual time that ran, over which throughputs are computed. */
  readonly at_ms: number;
  /** Arrived but not terminal at the cutoff (also `in_flight_requests`). */
  readonly in_flight_requests: number;
  /** Never arrived: their arrival lies after the cutoff. */
  readonly not_arrived_requests: number;
  /** Output tokens the in-flight requests had emitted; `output_throughput_tok_s` counts them. */
  readonly in_flight_output_tokens: number;
}

/** Requests whose reasons read the same once numbers are masked (`#`), with the first one in full. */
export interface ReasonGroup {
  readonly reason: string;
  readonly count: number;
  readonly example: string;
}

/**
 * The keys the digest covers: the report of docs/rules/formats.md §4 (v1), exactly as before later keys were
 * added. Every other key (wall-clock fields, the cutoff, reason groups, the saturation check,
 * vLLM's benchmark names, extra percentiles, the CLI's run record) is derived from the same run
 * or describes the host, and stays out, so adding a report key never changes a digest. Putting a
 * key here changes every digest: a model change.
 */
export const CANONICAL_KEYS = [
  "num_requests",
  "completed_requests",
  "rejected_requests",
  "failed_requests",
  "in_flight_requests",
  "total_input_tokens",
  "total_output_tokens",
  "duration_ms",
  "request_throughput_rps",
  "input_throughput_tok_s",
  "output_throughput_tok_s",
  ...(["ttft", "tpot", "itl", "e2e"] as const).flatMap((m) => [`mean_${m}_ms`, `p50_${m}_ms`, `p90_${m}_ms`, `p99_${m}_ms`] as const),
  "prefix_cache_reused_ratio",
  "preemptions",
  "handoffs",
  "goodput_requests",
  "goodput_rps",
] as const;

/** The KV capacity derivation of each role whose engine gave GPU memory instead of num_gpu_blocks. */
export interface KvCapacityByRole {
  readonly aggregated?: KvCapacity;
  readonly prefill?: KvCapacity;
  readonly decode?: KvCapacity;
}

/** Keys left out of the canonical report that the report always or often has (the digest and wall-clock fields). */
export const NON_CANONICAL_KEYS = ["digest", "wall_time_ms", "simulated_requests_per_wall_s"] as const;

/** The canonical JSON line of a report: the CANONICAL_KEYS it has, sorted. */
export function canonicalReportJson(report: Omit<ReplayReport, "digest"> & { digest?: string }): string {
  const all = report as unknown as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  for (const k of CANONICAL_KEYS) if (all[k] !== undefined) copy[k] = all[k];
  return stringify(copy);
}

export function digestOf(report: Omit<ReplayReport, "digest"> & { digest?: string }): string {
  return createHash("sha256").update(canonicalReportJson(report)).digest("hex");
}

/** Adds the CLI's wall-clock fields; the digest does not change. */
export function withWallTime(report: ReplayReport, wallTimeMs: number): ReplayReport {
  return {
    ...report,
    wall_time_ms: wallTimeMs,
    simulated_requests_per_wall_s: wallTimeMs > 0 ? report.num_requests / (wallTimeMs / 1000) : 0,
  };
}
