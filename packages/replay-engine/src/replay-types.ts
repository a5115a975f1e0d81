/** The inputs and results of `runReplay` (replay.ts). */
import type { Profile, Spec, TraceRecord } from "@kvsim/profile-schema";
import type { StuckRequest } from "./diagnostics.js";
import type { LatencyQuantiles, ReplayReport, RequestRecord } from "./report.js";
import type { SlaStop } from "./sla-stop.js";
import type { TimeSeries } from "./timeseries.js";

export interface ReplayProgress {
  /** Requests released so far. */
  readonly arrived: number;
  /** Requests that reached a terminal status. */
  readonly terminal: number;
  /** Virtual time reached. */
  readonly nowMs: number;
}

export interface ReplayInput {
  /** A parsed spec (paths resolved). */
  readonly spec: Spec;
  /** Names the spec in errors about its configuration (default `<spec>`). */
  readonly specFile?: string;
  /** Profiles the spec names by path, keyed by that path. Inline profiles need no entry. */
  readonly profiles?: ReadonlyMap<string, Profile>;
  /** The trace's records when the workload is a trace; read lazily, one request ahead of the clock. */
  readonly records?: AsyncIterable<TraceRecord> | Iterable<TraceRecord>;
  /** Names the trace in errors (default: the spec's trace path). */
  readonly traceFile?: string;
  /** Called every `progressEvery` terminal requests and once at the end. */
  readonly onProgress?: (progress: ReplayProgress) => void;
  readonly progressEvery?: number;
  /** Percentiles (0..100) to report for every metric besides p50, p90 and p99 (outside the digest). */
  readonly percentiles?: readonly number[];
  /**
   * The decode fast path (default true): a rank whose next passes are all plain decode steps runs
   * them in one call, up to the next event that could change what it sees. Results are the same
   * either way; false runs every pass on its own (tests compare the two).
   */
  readonly fastDecode?: boolean;
  /**
   * Sample time series on the virtual clock (outside the report and its digest). `sampleMs`:
   * the interval; absent, it starts at 10 ms and doubles to keep 2,049 to 4,097 samples.
   */
  readonly timeseries?: { readonly sampleMs?: number };
  /** Return this many quantiles of each latency metric (for CDF plots; outside the report). */
  readonly quantiles?: number;
  /**
   * Stop as soon as these latency bounds are lost whatever the requests still to come do (see
   * SlaStopWatch); the result is then `ok: false` with `stopped: true`. For searches, whose
   * failing probes need no full replay. Absent: the replay runs to its end.
   */
  readonly stopWhen?: SlaStop;
}

export type ReplayResult =
  | {
      readonly ok: true;
      readonly report: ReplayReport;
      readonly records: readonly RequestRecord[];
      readonly timeseries?: TimeSeries;
      readonly quantiles?: LatencyQuantiles;
    }
  /** `stopped`: `stopWhen` ended the replay, the SLA being lost (the reason says how). */
  | { readonly ok: false; readonly reason: string; readonly stuck: readonly StuckRequest[]; readonly atMs: number; readonly stopped?: boolean };
