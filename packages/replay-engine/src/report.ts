import { createHash } from "node:crypto";
import stringify from "safe-stable-stringify";
import type { Sla, TransferMode } from "@kvsim/profile-schema";
import { Sample, summarize, type Distribution } from "./stats.js";

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
  /** The delay used: the priced one, or the spec's fallback latency without bandwidth. */
  readonly delay_ms: number | null;
}

/** One terminal request (product.md per-request records). Times are virtual ms. */
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
  readonly handoff?: HandoffRecord;
}

/** The replay summary (product.md). Virtual-time metrics only; the CLI adds the wall-clock ones. */
export interface ReplayReport {
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
  readonly mean_ttft_ms: number;
  readonly p50_ttft_ms: number;
  readonly p90_ttft_ms: number;
  readonly p99_ttft_ms: number;
  readonly mean_tpot_ms: number;
  readonly p50_tpot_ms: number;
  readonly p90_tpot_ms: number;
  readonly p99_tpot_ms: number;
  readonly mean_itl_ms: number;
  readonly p50_itl_ms: number;
  readonly p90_itl_ms: number;
  readonly p99_itl_ms: number;
  readonly mean_e2e_ms: number;
  readonly p50_e2e_ms: number;
  readonly p90_e2e_ms: number;
  readonly p99_e2e_ms: number;
  /** Sum of reused tokens over sum of input tokens, over completed requests. */
  readonly prefix_cache_reused_ratio: number;
  /** Preemptions over every rank. */
  readonly preemptions: number;
  /** Transfers started: how many, bytes moved, mean delay. */
  readonly handoffs: { readonly count: number; readonly payload_bytes: number; readonly mean_delay_ms: number };
  /** With an SLA: completed requests that met it, per second of duration. */
  readonly goodput_requests?: number;
  readonly goodput_rps?: number;
  /** SHA-256 (hex) of the canonical report: keys sorted, wall-clock fields and the digest left out. */
  readonly digest: string;
  /** Added by the CLI: host time of the run. */
  readonly wall_time_ms?: number;
  readonly simulated_requests_per_wall_s?: number;
}

/** Keys left out of the canonical report (the digest itself and wall-clock fields). */
export const NON_CANONICAL_KEYS = ["digest", "wall_time_ms", "simulated_requests_per_wall_s"] as const;

/** The canonical JSON line of a report: sorted keys, the non-canonical keys removed. */
export function canonicalReportJson(report: Omit<ReplayReport, "digest"> & { digest?: string }): string {
  const copy: Record<string, unknown> = { ...report };
  for (const k of NON_CANONICAL_KEYS) Reflect.deleteProperty(copy, k);
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

/** What the collector needs to know of a request that reached its terminal. */
export interface TerminalFacts {
  readonly status: RequestStatus;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly arrivalMs: number;
  /** Terminal time: the last token, or when it ended without one. */
  readonly terminalMs: number;
  readonly firstTokenMs: number | undefined;
  readonly lastTokenMs: number | undefined;
  readonly reusedTokens: number;
  /** Gaps between consecutive tokens. */
  readonly gaps: Float64Array | undefined;
}

/**
 * Accumulates the report over terminal requests: exact samples of TTFT, TPOT, E2E and every ITL
 * gap of completed requests (metric definitions of aisimulate-replay.md section 5.1).
 */
export class MetricsCollector {
  private arrived = 0;
  private completed = 0;
  private rejected = 0;
  private failed = 0;
  private inputTokens = 0;
  private outputTokens = 0;
  private reused = 0;
  private durationMs = 0;
  private good = 0;
  private preemptionCount = 0;
  private handoffCount = 0;
  private handoffBytes = 0;
  private handoffDelay = 0;
  private readonly ttft = new Sample();
  private readonly tpot = new Sample();
  private readonly itl = new Sample();
  private readonly e2e = new Sample();

  constructor(private readonly sla: Sla | undefined) {}

  onArrival(): void {
    this.arrived++;
  }
  onPreemption(): void {
    this.preemptionCount++;
  }
  onTransferStarted(payloadBytes: number, delayMs: number): void {
    this.handoffCount++;
    this.handoffBytes += payloadBytes;
    this.handoffDelay += delayMs;
  }

  get arrivedCount(): number {
    return this.arrived;
  }
  get terminalCount(): number {
    return this.completed + this.rejected + this.failed;
  }

  onTerminal(f: TerminalFacts): void {
    if (f.status === "rejected") {
      this.rejected++;
      return;
    }
    if (f.status === "failed") {
      this.failed++;
      return;
    }
    this.completed++;
    this.inputTokens += f.inputTokens;
    this.outputTokens += f.outputTokens;
    this.reused += f.reusedTokens;
    this.durationMs = Math.max(this.durationMs, f.terminalMs);
    let goodNow = this.sla !== undefined;
    if (f.firstTokenMs !== undefined && f.lastTokenMs !== undefined) {
      const ttft = f.firstTokenMs - f.arrivalMs;
      const e2e = f.lastTokenMs - f.arrivalMs;
      this.ttft.push(ttft);
      this.e2e.push(e2e);
      if (f.outputTokens >= 2) this.tpot.push((f.lastTokenMs - f.firstTokenMs) / (f.outputTokens - 1));
      if (f.gaps !== undefined) for (const g of f.gaps) this.itl.push(g);
      if (this.sla !== undefined) {
        const { ttft_ms, itl_ms, e2e_ms } = this.sla;
        if (ttft_ms !== undefined && ttft > ttft_ms) goodNow = false;
        if (e2e_ms !== undefined && e2e > e2e_ms) goodNow = false;
        if (itl_ms !== undefined && f.outputTokens >= 2 && (f.lastTokenMs - f.firstTokenMs) / (f.outputTokens - 1) > itl_ms) goodNow = false;
      }
    } else if (this.sla !== undefined) {
      // A tokenless completion is good only under an e2e-only SLA (aisimulate-replay.md 5.1).
      const { ttft_ms, itl_ms, e2e_ms } = this.sla;
      goodNow = e2e_ms !== undefined && ttft_ms === undefined && itl_ms === undefined && f.terminalMs - f.arrivalMs <= e2e_ms;
    }
    if (goodNow) this.good++;
  }

  /** The report over everything seen; requests not terminal count as in flight. */
  report(): ReplayReport {
    const durationS = this.durationMs / 1000;
    // A zero duration has no rate: report 0 rather than dividing by an arbitrary epsilon.
    const rate = (x: number) => (durationS > 0 ? x / durationS : 0);
    const d = (name: string, dist: Distribution) => ({
      [`mean_${name}_ms`]: dist.mean,
      [`p50_${name}_ms`]: dist.p50,
      [`p90_${name}_ms`]: dist.p90,
      [`p99_${name}_ms`]: dist.p99,
    });
    const body = {
      num_requests: this.arrived,
      completed_requests: this.completed,
      rejected_requests: this.rejected,
      failed_requests: this.failed,
      in_flight_requests: this.arrived - this.terminalCount,
      total_input_tokens: this.inputTokens,
      total_output_tokens: this.outputTokens,
      duration_ms: this.durationMs,
      request_throughput_rps: rate(this.completed),
      input_throughput_tok_s: rate(this.inputTokens),
      output_throughput_tok_s: rate(this.outputTokens),
      ...d("ttft", summarize(this.ttft.values())),
      ...d("tpot", summarize(this.tpot.values())),
      ...d("itl", summarize(this.itl.values())),
      ...d("e2e", summarize(this.e2e.values())),
      prefix_cache_reused_ratio: this.inputTokens > 0 ? this.reused / this.inputTokens : 0,
      preemptions: this.preemptionCount,
      handoffs: {
        count: this.handoffCount,
        payload_bytes: this.handoffBytes,
        mean_delay_ms: this.handoffCount > 0 ? this.handoffDelay / this.handoffCount : 0,
      },
      ...(this.sla === undefined ? {} : { goodput_requests: this.good, goodput_rps: rate(this.good) }),
    } as Omit<ReplayReport, "digest">;
    return { ...body, digest: digestOf(body) };
  }
}
