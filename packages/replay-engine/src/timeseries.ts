/**
 * Time series of a replay, sampled on the virtual clock.
 *
 * Sample i sits at time i x interval. Gauges (running, waiting, KV pages, handoffs in flight) are
 * the state after every event at or before that time; counters (arrivals, completions, tokens,
 * passes, bytes) add up what happened in the interval (t - interval, t]. Every value comes from
 * counters the engine and the pools keep, so a sample costs O(workers x cache groups), never a
 * scan of a pool or of the requests.
 *
 * Without a fixed interval the sampler starts at `DEFAULT_START_MS` and doubles the interval
 * whenever it holds more than `MAX_ADAPTIVE_SAMPLES`, merging pairs of samples (gauges keep the
 * even sample, counters add up), so a run of any length ends with 2,049 to 4,097 samples.
 */

/** One worker's gauges as the sampler reads them. */
export interface WorkerProbe {
  readonly role: "aggregated" | "prefill" | "decode";
  readonly id: number;
  /** Overrides the label (`P0.1`: data-parallel rank 1 of prefill worker 0). */
  readonly label?: string;
  /** Cache group names in pool order (one "kv" group for a linear profile). */
  readonly groups: readonly string[];
  load(): { readonly running: number; readonly waiting: number };
  /** Live per-group counters: referenced pages and free pages still caching a key. */
  groupPages(): { readonly used: ArrayLike<number>; readonly cached: ArrayLike<number> };
}

/** The offload tiers' gauges as the sampler reads them (OffloadTiers, spec.kv_offload). */
export interface TierProbe {
  /** One name per tier instance (`cpu 0`, `prefill cpu 1`), in the order `read` writes them. */
  readonly names: readonly string[];
  /** Writes each instance's bytes held now into `out` from `at` on, O(instances). */
  read(out: Float64Array, at: number): void;
}

/** One offload tier instance (a worker's, or a node's when shared), one value per sample. */
export interface OffloadSeries {
  /** The tier's name and the instance's index (`cpu 0`); the role first in P/D with tiers on both sides (`decode cpu 0`). */
  readonly name: string;
  /** Bytes it holds at the sample time, stores in flight included (a worker's: every TP rank's shard). */
  readonly used_bytes: number[];
}

/** Per worker, one value per sample. */
export interface WorkerSeries {
  /** `W0`, `W1`... (aggregated), `P0`... (prefill), `D0`... (decode). */
  readonly label: string;
  readonly role: "aggregated" | "prefill" | "decode";
  readonly id: number;
  readonly running: number[];
  readonly waiting: number[];
  /** KV pages referenced by requests (all groups). */
  readonly kv_used_pages: number[];
  /** Free KV pages still holding a cached prefix (evictable; all groups). */
  readonly kv_cached_pages: number[];
  /** Per cache group (grouped profiles; a linear profile has one group, `kv`). */
  readonly groups: readonly { readonly name: string; readonly used_pages: number[]; readonly cached_pages: number[] }[];
  /** Passes started in the interval. */
  readonly passes: number[];
  /** Mean tokens scheduled per pass started in the interval (null when none started). */
  readonly batch_tokens: (number | null)[];
  /** Mean duration of the passes started in the interval, ms (null when none started). */
  readonly step_ms: (number | null)[];
}

/** The deployment, one value per sample. */
export interface DeploymentSeries {
  readonly arrivals: number[];
  readonly completions: number[];
  /** Requests that ended rejected or failed in the interval. */
  readonly rejected_or_failed: number[];
  /** Prompt tokens of requests whose prefill finished in the interval, per second. */
  readonly input_tokens_per_s: number[];
  /** Output tokens emitted in the interval, per second. */
  readonly output_tokens_per_s: number[];
  /** P/D: handoffs started and not yet transferred. */
  readonly handoffs_in_flight: number[];
  /** P/D: bytes of the handoffs whose transfer finished in the interval. */
  readonly handoff_bytes: number[];
}

export interface TimeSeries {
  /** Virtual ms between samples (the final one, when adaptive). */
  readonly sample_ms: number;
  /** True when the interval was chosen (and widened) by the sampler. */
  readonly adaptive: boolean;
  readonly times_ms: number[];
  readonly workers: WorkerSeries[];
  readonly deployment: DeploymentSeries;
  /** Per offload tier instance, in OffloadTiers' order; only when the spec has kv_offload tiers. */
  readonly offload?: readonly OffloadSeries[];
}

/** The first interval when none is given, virtual ms. */
export const DEFAULT_START_MS = 10;
/** Samples held before an adaptive sampler doubles its interval (2^12: then it keeps 2^11 + 1). */
export const MAX_ADAPTIVE_SAMPLES = 4096;

/**
 * The most values a time series with a fixed interval may hold (2^24: 128 MiB as doubles, about
 * as much again as the arrays and the CSV it becomes): rows of samples times the deployment's
 * columns (8, plus 5 and 2 per cache group for each worker, plus 1 per offload tier instance). An
 * adaptive sampler never comes near.
 */
export const MAX_SERIES_VALUES = 2 ** 24;

/**
 * A fixed sample interval too short for the run: it needs more than MAX_SERIES_VALUES values. Thrown
 * from inside the replay, which then stops; the caller names the interval (kvsim: --sample-ms).
 */
export class TooManySamples extends Error {
  override readonly name = "TooManySamples";
  constructor(
    /** The interval asked for, ms. */
    readonly sampleMs: number,
    /** Samples taken when the limit was met. */
    readonly samples: number,
    /** Virtual time the samples reached, ms (the run was not over). */
    readonly reachedMs: number,
    /** Values per sample for this deployment. */
    readonly columns: number,
  ) {
    super(
      `a sample every ${sampleMs} ms takes more than ${samples} samples of ${columns} values (the limit is ${MAX_SERIES_VALUES} values) before ${reachedMs} ms of a run that is not over`,
    );
  }
}

/**
 * The series as one flat table, a row per sample: `time_ms`, the deployment's columns, then each
 * worker's columns prefixed with its label (`P0.running`, `D1.kv_used_pages`,
 * `W0.kv_used_pages.full_attention` for a group), then with offload tiers one column per tier
 * instance (`offload.cpu 0.used_bytes`). For CSV writers.
 */
export function timeSeriesTable(ts: TimeSeries): { readonly columns: string[]; readonly rows: (number | null)[][] } {
  const cols: { name: string; values: readonly (number | null)[] }[] = [{ name: "time_ms", values: ts.times_ms }];
  for (const [k, v] of Object.entries(ts.deployment)) cols.push({ name: k, values: v as number[] });
  for (const w of ts.workers) {
    const p = w.label;
    cols.push(
      { name: `${p}.running`, values: w.running },
      { name: `${p}.waiting`, values: w.waiting },
      { name: `${p}.kv_used_pages`, values: w.kv_used_pages },
      { name: `${p}.kv_cached_pages`, values: w.kv_cached_pages },
    );
    if (w.groups.length > 1) {
      for (const g of w.groups)
        cols.push({ name: `${p}.kv_used_pages.${g.name}`, values: g.used_pages }, { name: `${p}.kv_cached_pages.${g.name}`, values: g.cached_pages });
    }
    cols.push({ name: `${p}.passes`, values: w.passes }, { name: `${p}.batch_tokens`, values: w.batch_tokens }, { name: `${p}.step_ms`, values: w.step_ms });
  }
  for (const o of ts.offload ?? []) cols.push({ name: `offload.${o.name}.used_bytes`, values: o.used_bytes });
  const rows = ts.times_ms.map((_, i) => cols.map((c) => c.values[i] ?? null));
  return { columns: cols.map((c) => c.name), rows };
}

/**
 * The series as one JSON object per sample (`time_ms`, `deployment`, `workers` by label, and with
 * offload tiers `offload` by tier instance: `{ "cpu 0": { used_bytes } }`). For JSONL writers.
 */
export function timeSeriesRecords(ts: TimeSeries): object[] {
  return ts.times_ms.map((t, i) => {
    const deployment: Record<string, number> = {};
    for (const [k, v] of Object.entries(ts.deployment)) deployment[k] = (v as number[])[i]!;
    const workers: Record<string, object> = {};
    for (const w of ts.workers) {
      workers[w.label] = {
        running: w.running[i],
        waiting: w.waiting[i],
        kv_used_pages: w.kv_used_pages[i],
        kv_cached_pages: w.kv_cached_pages[i],
        ...(w.groups.length > 1
          ? { groups: Object.fromEntries(w.groups.map((g) => [g.name, { used_pages: g.used_pages[i], cached_pages: g.cached_pages[i] }])) }
          : {}),
        passes: w.passes[i],
        batch_tokens: w.batch_tokens[i],
        step_ms: w.step_ms[i],
      };
    }
    const offload = ts.offload;
    if (offload === undefined) return { time_ms: t, deployment, workers };
    return { time_ms: t, deployment, workers, offload: Object.fromEntries(offload.map((o) => [o.name, { used_bytes: o.used_bytes[i] }])) };
  });
}
