/**
 * The physically meaningful ranges kvsim accepts, in one place. Each bound is far beyond any real
 * deployment and small enough that the arithmetic that uses it stays exact (byte counts within
 * 2^53) and that virtual time keeps advancing (a double still resolves microseconds at the largest
 * time kvsim reaches). The schemas, the trace reader, the replay and the stdio engine all check
 * against these, so what `kvsim validate` accepts the replay runs.
 */

/**
 * The most tokens one request may ask for, in its prompt or its output (2^24, about 16.8M): beyond
 * any model's context, and small enough that a mistyped length cannot exhaust memory when the
 * replay synthesises the prompt.
 */
export const MAX_REQUEST_TOKENS = 2 ** 24;

/**
 * The latest virtual time, in ms: 10^13 ms, about 317 years. At that magnitude a double still
 * resolves 2 µs, so a pass of any meaningful length moves the clock forward.
 */
export const MAX_VIRTUAL_TIME_MS = 1e13;
/** MAX_VIRTUAL_TIME_MS in words, for messages. */
export const MAX_VIRTUAL_TIME_TEXT = "10^13 ms (about 317 years)";

/**
 * The longest single duration a spec or profile may state (a forward pass, a fixed transfer
 * latency): 10^6 ms, about 17 minutes.
 */
export const MAX_DURATION_MS = 1e6;

/** Transfer bandwidth range in decimal GB/s (10^9 B/s): 1 MB/s to 100 TB/s. */
export const MIN_BANDWIDTH_GBPS = 1e-3;
export const MAX_BANDWIDTH_GBPS = 1e5;

/** Synthetic arrival rate range, requests per second: one per 100 s to a million per second. */
export const MIN_RATE_PER_S = 1e-2;
export const MAX_RATE_PER_S = 1e6;

/** Trace speedup range (arrival times are divided by it). */
export const MIN_SPEEDUP = 1e-6;
export const MAX_SPEEDUP = 1e6;

/**
 * The most requests a synthetic workload may ask for. Every request keeps a record in memory until
 * the report is written; a million keeps that within a few hundred MB. With the slowest rate
 * (0.01/s) and the largest exponential gap a double can draw (36.7 mean gaps), the last arrival
 * still lands before MAX_VIRTUAL_TIME_MS.
 */
export const MAX_SYNTHETIC_REQUESTS = 1_000_000;

/**
 * Deepest nesting of arrays and objects in a profile, spec, engine-args document or trace line.
 * The deepest real document (a spec with an inline profile's forward_pass table) nests 6 levels.
 */
export const MAX_NESTING_DEPTH = 64;

/**
 * The most lines and commas (an upper bound on its values) a YAML profile, spec, grid or
 * engine-args document may have: 100,000. Real ones have hundreds; the YAML parser spends some
 * 3 KB and 25 µs on each, so a 16 MiB list of five million items would take gigabytes.
 */
export const MAX_YAML_ITEMS = 100_000;

/** The same bound for a JSON document, counting its commas: 1,000,000 (JSON parses some 50 times cheaper). */
export const MAX_JSON_ITEMS = 1_000_000;

/** The largest profile, spec or engine-args file kvsim reads: 16 MiB. */
export const MAX_DOCUMENT_BYTES = 16 * 2 ** 20;

/**
 * The longest line of a JSONL trace (Mooncake or kvsim) or of the stdio engine protocol: 64 MiB,
 * room for a prompt of several million token ids. An Azure CSV row is three short fields:
 * 4 KiB.
 */
export const MAX_JSONL_LINE_BYTES = 64 * 2 ** 20;
export const MAX_CSV_LINE_BYTES = 4 * 2 ** 10;

/** A number of bytes in words: `16 MiB`, `4 KiB`, `512 bytes`. */
export function describeBytes(n: number): string {
  if (n >= 2 ** 20 && n % 2 ** 20 === 0) return `${n / 2 ** 20} MiB`;
  if (n >= 2 ** 10 && n % 2 ** 10 === 0) return `${n / 2 ** 10} KiB`;
  return `${n} bytes`;
}
