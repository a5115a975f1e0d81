import type { TraceFormat } from "./spec.js";
import type { TraceRecord } from "./trace.js";

/** Fewer requests than this give no warning (a handful may well arrive together). */
const ARRIVAL_SPAN_MIN_REQUESTS = 10;
/** A mean gap between arrivals below this (ms) reads as timestamps in the wrong unit: over 1,000 req/s. */
const ARRIVAL_SPAN_MIN_MEAN_GAP_MS = 1;

/**
 * Counts a trace's records and their arrival span as they stream past (O(1) memory), to tell a
 * trace whose times are likely in the wrong unit (Mooncake `timestamp` written in seconds).
 */
export class ArrivalSpan {
  private first: number | undefined;
  private last = 0;
  count = 0;

  add(arrivalMs: number): void {
    this.first ??= arrivalMs;
    this.last = arrivalMs;
    this.count++;
  }

  /** Last arrival minus first, as written in the trace (before any speedup); 0 before two records. */
  get spanMs(): number {
    return this.first === undefined ? 0 : this.last - this.first;
  }

  /** Passes records through, counting them. */
  async *watch(records: AsyncIterable<TraceRecord>): AsyncGenerator<TraceRecord> {
    for await (const r of records) {
      this.add(r.arrivalMs);
      yield r;
    }
  }
}

const TIME_WORDS: Readonly<Record<TraceFormat, string | undefined>> = {
  mooncake: "Mooncake's timestamp is in milliseconds",
  kvsim: "kvsim's arrival_ms is in milliseconds",
  // Azure rows carry dates: no unit to get wrong.
  azure: undefined,
};

/**
 * A warning when a trace's arrivals are implausibly close for its size: at least 10 requests whose
 * mean gap is under 1 ms (over 1,000 requests a second), which is what times written in seconds
 * look like read as milliseconds. A span of 0 (every request at once) is a deliberate burst and
 * gets none. Undefined when the span is plausible.
 */
export function arrivalSpanWarning(format: TraceFormat, count: number, spanMs: number): string | undefined {
  const words = TIME_WORDS[format];
  if (words === undefined || count < ARRIVAL_SPAN_MIN_REQUESTS || !(spanMs > 0)) return undefined;
  const meanGap = spanMs / (count - 1);
  if (meanGap >= ARRIVAL_SPAN_MIN_MEAN_GAP_MS) return undefined;
  const rate = ((count - 1) / spanMs) * 1000;
  const ms = spanMs.toLocaleString("en-US", { maximumSignificantDigits: 3 });
  const rps = rate.toLocaleString("en-US", { maximumFractionDigits: 0 });
  return `the trace's ${count.toLocaleString("en-US")} requests arrive within ${ms} ms (${rps} req/s); ${words}: if its times are seconds, multiply them by 1,000 (or set workload.speedup to 0.001)`;
}
