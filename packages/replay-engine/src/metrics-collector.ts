// The report's metrics accumulated over terminal requests (metric definitions of docs/rules/replay.md §5.1).
import type { KvOffloadReport } from "./offload-tiers.js";
import type { Sla } from "@kvsim/profile-schema";
import { SaturationMonitor } from "./saturation.js";
import type { SlaStopWatch } from "./sla-stop.js";
import type { RoutingReport } from "./routing-report.js";
import { ItlSample, TokenTrack } from "./itl.js";
import { percentileRank, percentilesOf, Sample, summarize, type Distribution } from "./stats.js";
import type { NetworkHandoffStats, NetworkReport } from "./transfer-network.js";
import {
  type LatencyQuantiles,
  type RequestStatus,
  type DataParallelReport,
  type ReplayReport,
  type SpeculativeDecodingReport,
  type TtftClock,
  type MetricName,
  DEFAULT_PERCENTILES,
  percentileKey,
  type CutoffSummary,
  type ReasonGroup,
  type KvCapacityByRole,
  digestOf,
} from "./report.js";

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
  /** Gaps between consecutive tokens: as values, or where its tokens fell in a worker's pass log. */
  readonly gaps: Float64Array | TokenTrack | undefined;
  /** Why it was rejected or failed. */
  readonly reason?: string;
}

/** Options of the collector. */
export interface CollectorOptions {
  /** Percentiles (0..100) reported for every metric besides p50, p90 and p99. */
  readonly percentiles?: readonly number[];
}

/** Distinct masked reasons kept per status; later new ones are counted under one "other reasons" group. */
const MAX_REASON_GROUPS = 100;

/** Groups reasons that differ only in numbers (request sizes, worker ids), keeping the first in full. */
class ReasonCounter {
  private readonly groups = new Map<string, { count: number; example: string }>();

  add(reason: string | undefined): void {
    const text = reason ?? "(no reason given)";
    let key = text.replace(/\d+(\.\d+)?/g, "#");
    if (!this.groups.has(key) && this.groups.size >= MAX_REASON_GROUPS) key = "other reasons";
    const g = this.groups.get(key);
    if (g === undefined) this.groups.set(key, { count: 1, example: text });
    else g.count++;
  }

  /** Most frequent first, then by text. */
  list(): ReasonGroup[] {
    return [...this.groups]
      .map(([reason, g]) => ({ reason, count: g.count, example: g.example }))
      .sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : a.reason > b.reason ? 1 : 0));
  }
}

/**
 * Accumulates the report over terminal requests: exact samples of TTFT, TPOT, E2E and every ITL
 * gap of completed requests (metric definitions of docs/rules/replay.md §5.1).
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
  private readonly itl = new ItlSample();
  private readonly e2e = new Sample();
  private readonly rejections = new ReasonCounter();
  private readonly failures = new ReasonCounter();
  private readonly saturation = new SaturationMonitor();
  private readonly percentiles: readonly number[];
  private cutoff: CutoffSummary | undefined;
  private cutoffTokens = 0;

  private network: { handoffStats(): NetworkHandoffStats; report(durationMs: number): NetworkReport } | undefined;

  constructor(
    private readonly sla: Sla | undefined,
    options: CollectorOptions = {},
  ) {
    this.percentiles = [...new Set([...DEFAULT_PERCENTILES, ...(options.percentiles ?? [])])].sort((a, b) => a - b);
  }

  /** Set by the replay when an engine's pool was sized from GPU memory; reported as is. */
  kvCapacity: KvCapacityByRole | undefined;

  /** Set by the replay from spec.frontend; reported as is. */
  ttftClock: TtftClock = "engine";

  /** Set by the replay when a role has data-parallel ranks; reported as is. */
  dataParallel: DataParallelReport | undefined;
  /** Set by the replay at the end: how the routers spread the requests. */
  routing: RoutingReport | undefined;
  /** Set by the replay at the end when a rank speculated. */
  speculative: SpeculativeDecodingReport | undefined;
  /** The offload tiers' section, when the spec has tiers (set before `report`). */
  kvOffload: KvOffloadReport | undefined;

  /** With a shared network: its delays replace the mean delay, and its NIC load joins the report. */
  attachNetwork(network: { handoffStats(): NetworkHandoffStats; report(durationMs: number): NetworkReport }): void {
    this.network = network;
  }

  onArrival(atMs = 0): void {
    this.arrived++;
    this.saturation.onArrival(atMs);
  }

  /**
   * The virtual-time cutoff stopped the replay at `atMs`: the report's duration becomes the cutoff
   * (the time that ran) and the in-flight requests' emitted tokens count in the output throughput.
   */
  onCutoff(atMs: number, inFlightOutputTokens: number, notArrived: number): void {
    this.cutoff = {
      at_ms: atMs,
      in_flight_requests: this.arrived - this.terminalCount,
      not_arrived_requests: notArrived,
      in_flight_output_tokens: inFlightOutputTokens,
    };
    this.cutoffTokens = inFlightOutputTokens;
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

  /** Set by the replay when it may stop once its SLA is lost (ReplayInput.stopWhen). */
  watch: SlaStopWatch | undefined;

  onTerminal(f: TerminalFacts): void {
    this.watch?.onTerminal(f);
    if (f.status === "rejected") {
      this.rejected++;
      this.rejections.add(f.reason);
      return;
    }
    if (f.status === "failed") {
      this.failed++;
      this.failures.add(f.reason);
      return;
    }
    this.completed++;
    this.saturation.onCompleted(f.arrivalMs, f.firstTokenMs, f.terminalMs);
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
      if (f.gaps instanceof TokenTrack) this.itl.addTrack(f.gaps);
      else if (f.gaps !== undefined) this.itl.addValues(f.gaps);
      if (this.sla !== undefined) {
        const { ttft_ms, itl_ms, e2e_ms } = this.sla;
        if (ttft_ms !== undefined && ttft > ttft_ms) goodNow = false;
        if (e2e_ms !== undefined && e2e > e2e_ms) goodNow = false;
        if (itl_ms !== undefined && f.outputTokens >= 2 && (f.lastTokenMs - f.firstTokenMs) / (f.outputTokens - 1) > itl_ms) goodNow = false;
      }
    } else if (this.sla !== undefined) {
      // A tokenless completion is good only under an e2e-only SLA (docs/rules/replay.md §5.1).
      const { ttft_ms, itl_ms, e2e_ms } = this.sla;
      goodNow = e2e_ms !== undefined && ttft_ms === undefined && itl_ms === undefined && f.terminalMs - f.arrivalMs <= e2e_ms;
    }
    if (goodNow) this.good++;
  }

  /**
   * `points` quantiles of TTFT, TPOT, ITL and E2E over the completed requests, at
   * p = 100 k / (points - 1) for k = 0..points-1, exact nearest rank as the report's percentiles
   * (for CDF plots; empty arrays when no request completed).
   */
  quantiles(points: number): LatencyQuantiles {
    if (!Number.isInteger(points) || points < 2) throw new RangeError(`quantiles need at least 2 points, got ${points}`);
    const ps = Array.from({ length: points }, (_, k) => (100 * k) / (points - 1));
    const of = (s: Sample) => {
      const sorted = s.values().sort();
      return sorted.length === 0 ? [] : ps.map((p) => sorted[percentileRank(sorted.length, p)]!);
    };
    return { ttft: of(this.ttft), tpot: of(this.tpot), itl: this.itl.length === 0 ? [] : this.itl.percentiles(ps), e2e: of(this.e2e) };
  }

  /** The report over everything seen; requests not terminal count as in flight. */
  report(): ReplayReport {
    const durationMs = this.cutoff?.at_ms ?? this.durationMs;
    const durationS = durationMs / 1000;
    // A zero duration has no rate: report 0 rather than dividing by an arbitrary epsilon.
    const rate = (x: number) => (durationS > 0 ? x / durationS : 0);
    const samples = { ttft: this.ttft.values(), tpot: this.tpot.values(), e2e: this.e2e.values() };
    const dists = {
      ttft: summarize(samples.ttft),
      tpot: summarize(samples.tpot),
      itl: this.itl.distribution(),
      e2e: summarize(samples.e2e),
    };
    // No request completed: latencies have no sample, so they are null (not a flattering 0).
    const none = this.completed === 0;
    const d = (name: keyof typeof dists) => {
      const dist: Distribution = dists[name];
      return {
        [`mean_${name}_ms`]: none ? null : dist.mean,
        [`p50_${name}_ms`]: none ? null : dist.p50,
        [`p90_${name}_ms`]: none ? null : dist.p90,
        [`p99_${name}_ms`]: none ? null : dist.p99,
      };
    };
    const body = {
      num_requests: this.arrived,
      completed_requests: this.completed,
      rejected_requests: this.rejected,
      failed_requests: this.failed,
      in_flight_requests: this.arrived - this.terminalCount,
      total_input_tokens: this.inputTokens,
      total_output_tokens: this.outputTokens,
      duration_ms: durationMs,
      request_throughput_rps: rate(this.completed),
      input_throughput_tok_s: rate(this.inputTokens),
      output_throughput_tok_s: rate(this.outputTokens + this.cutoffTokens),
      ...d("ttft"),
      ...d("tpot"),
      ...d("itl"),
      ...d("e2e"),
      prefix_cache_reused_ratio: this.inputTokens > 0 ? this.reused / this.inputTokens : 0,
      preemptions: this.preemptionCount,
      handoffs: {
        count: this.handoffCount,
        payload_bytes: this.handoffBytes,
        mean_delay_ms: this.handoffCount > 0 ? this.handoffDelay / this.handoffCount : 0,
        ...this.network?.handoffStats(),
      },
      ...(this.network === undefined ? {} : { network: this.network.report(durationMs) }),
      ...(this.sla === undefined ? {} : { goodput_requests: this.good, goodput_rps: rate(this.good) }),
    } as Omit<ReplayReport, "digest">;
    const digest = digestOf(body);

    // Derived keys (outside the digest): vLLM's names and the requested percentiles.
    const vllm: Record<string, number | null> = {
      duration: durationS,
      completed: this.completed,
      failed: this.rejected + this.failed,
      request_throughput: rate(this.completed),
      request_goodput: this.sla === undefined ? null : rate(this.good),
      output_throughput: rate(this.outputTokens + this.cutoffTokens),
      total_token_throughput: rate(this.inputTokens + this.outputTokens + this.cutoffTokens),
    };
    for (const name of ["ttft", "tpot", "itl", "e2e"] as const) {
      const dist = dists[name];
      const at = name === "itl" ? this.itl.percentiles(this.percentiles) : percentilesOf(samples[name], this.percentiles);
      const names: MetricName[] = name === "e2e" ? ["e2e", "e2el"] : [name];
      for (const m of names) {
        vllm[`mean_${m}_ms`] = none ? null : dist.mean;
        vllm[`median_${m}_ms`] = none ? null : dist.p50;
        vllm[`std_${m}_ms`] = none ? null : dist.std;
        this.percentiles.forEach((p, i) => (vllm[percentileKey(p, m)] = none ? null : at[i]!));
      }
    }
    const derived = {
      ttft_clock: this.ttftClock,
      ...(this.cutoff === undefined ? {} : { cutoff: this.cutoff }),
      ...(this.kvCapacity === undefined ? {} : { kv_capacity: this.kvCapacity }),
      ...(this.dataParallel === undefined ? {} : { data_parallel: this.dataParallel }),
      ...(this.routing === undefined ? {} : { routing: this.routing }),
      ...(this.speculative === undefined ? {} : { speculative_decoding: this.speculative }),
      ...(this.kvOffload === undefined ? {} : { kv_offload: this.kvOffload }),
      rejection_reasons: this.rejections.list(),
      failure_reasons: this.failures.list(),
      saturation: this.saturation.check(),
      ...vllm,
    };
    // Canonical keys keep their values (a derived percentile equals the canonical one it repeats).
    return { ...derived, ...body, digest } as ReplayReport;
  }
}
