import type { TerminalFacts } from "./metrics-collector.js";
import { percentileRank } from "./stats.js";

/** One upper bound on a latency statistic: `p90_ttft_ms <= 2000` is { metric: "ttft", stat: 90, limit: 2000 }. */
export interface SlaStopTerm {
  readonly metric: "ttft" | "tpot" | "e2e";
  /** A percentile (0 < p <= 100, the report's nearest rank), or the mean. */
  readonly stat: number | "mean";
  readonly limit: number;
}

/**
 * When a replay may stop early because its SLA is lost whatever the requests still to come do:
 * `total` is how many requests the workload holds, `terms` the latency bounds, and with
 * `allComplete` one rejected or failed request loses it (a sweep's SLA asks every request to
 * complete). Plain data, so a point task carries it to a worker thread or a queue worker.
 */
export interface SlaStop {
  readonly total: number;
  readonly terms: readonly SlaStopTerm[];
  readonly allComplete: boolean;
}

/**
 * Watches the terminal requests of a replay for an SLA lost beyond recovery. A percentile bound
 * is lost once the requests over it are so many that the percentile is over it at any final
 * count up to `total`: the nearest-rank percentile p of n values exceeds the bound when at least
 * n - rank(n, p) values do, and that count never falls as n grows, so n = total decides. A mean
 * bound is lost once the latencies seen sum past bound x total (latencies are not negative, and
 * the mean is over at most `total` of them). TPOT counts requests with two tokens or more.
 */
export class SlaStopWatch {
  private readonly over: number[];
  private readonly sums: number[];
  private readonly needed: number[];
  /** Why the SLA is lost, once it is. */
  lost: string | undefined;

  constructor(private readonly stop: SlaStop) {
    this.over = stop.terms.map(() => 0);
    this.sums = stop.terms.map(() => 0);
    this.needed = stop.terms.map((t) => (t.stat === "mean" ? Number.POSITIVE_INFINITY : stop.total - percentileRank(Math.max(1, stop.total), t.stat)));
  }

  onTerminal(f: TerminalFacts): void {
    if (this.lost !== undefined) return;
    if (f.status !== "completed") {
      if (this.stop.allComplete) this.lost = `a request was ${f.status}${f.reason === undefined ? "" : ` (${f.reason})`}`;
      return;
    }
    if (f.firstTokenMs === undefined || f.lastTokenMs === undefined) return;
    const values = {
      ttft: f.firstTokenMs - f.arrivalMs,
      e2e: f.lastTokenMs - f.arrivalMs,
      tpot: f.outputTokens >= 2 ? (f.lastTokenMs - f.firstTokenMs) / (f.outputTokens - 1) : undefined,
    };
    this.stop.terms.forEach((t, i) => {
      const v = values[t.metric];
      if (v === undefined || this.lost !== undefined) return;
      if (t.stat === "mean") {
        this.sums[i]! += v;
        if (this.sums[i]! > t.limit * this.stop.total) this.lost = `mean_${t.metric}_ms over ${t.limit} whatever the other requests do`;
        return;
      }
      if (v > t.limit && ++this.over[i]! >= this.needed[i]!) {
        this.lost = `p${t.stat}_${t.metric}_ms over ${t.limit}: ${this.over[i]} of at most ${this.stop.total} requests are over it`;
      }
    });
  }
}

/** Thrown inside a replay whose SLA is lost (ReplayInput.stopWhen): it stops without a report. */
export class SlaLost extends Error {
  /** The replay's result: not ok, stopped, saying when and why. */
  result(atMs: number, terminal: number) {
    return {
      ok: false,
      reason: `stopped at ${atMs} ms after ${terminal} requests: the SLA is lost: ${this.message}`,
      stuck: [],
      atMs,
      stopped: true,
    } as const;
  }
}
