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
}

/** The first interval when none is given, virtual ms. */
export const DEFAULT_START_MS = 10;
/** Samples held before an adaptive sampler doubles its interval (2^12: then it keeps 2^11 + 1). */
export const MAX_ADAPTIVE_SAMPLES = 4096;

/** Per-group pages: `used` then `cached`, one entry per group each. */
export interface RunPages {
  readonly step: number;
  readonly used: ArrayLike<number>;
  readonly cached: ArrayLike<number>;
}

interface ActiveRun {
  readonly startMs: number;
  readonly ends: ArrayLike<number>;
  readonly steps: number;
  readonly batch: number;
  /** Steps counted so far as passes, and as tokens. */
  passes: number;
  tokens: number;
  /** The pages before the run, and after each of its steps that touched the pool. */
  readonly before: RunPages | undefined;
  readonly pageSteps: readonly RunPages[];
}

/** A run's pages at time t: after the last of its pool-touching steps that started at or before t. */
function runPagesAt(run: ActiveRun, t: number): RunPages {
  let at = run.before!;
  for (const ps of run.pageSteps) {
    const start = ps.step === 0 ? run.startMs : run.ends[ps.step - 1]!;
    if (start > t) break;
    at = ps;
  }
  return at;
}

const workerPrefix = { aggregated: "W", prefill: "P", decode: "D" } as const;

/** Deployment columns of a sample row, then per worker `WORKER_FIXED` columns and 2 per group. */
const TIME = 0;
const ARRIVALS = 1;
const COMPLETIONS = 2;
const ENDED = 3;
const INPUT = 4;
const OUTPUT = 5;
const IN_FLIGHT = 6;
const BYTES = 7;
const DEPLOYMENT_COLUMNS = 8;
const RUNNING = 0;
const WAITING = 1;
const PASSES = 2;
const PASS_TOKENS = 3;
const PASS_MS = 4;
const WORKER_FIXED = 5;

/**
 * Samples are rows of one growing Float64Array (a push per value into dozens of arrays cost more
 * than the rest of a sample); `result` turns the columns into arrays.
 */
export class Sampler {
  private interval: number;
  private readonly adaptive: boolean;
  private readonly probes: readonly WorkerProbe[];
  /** Row offset of each worker's first column. */
  private readonly base: Int32Array;
  private readonly stride: number;
  /** Per column: 1 when it counts events in the interval (merged by adding), 0 for a gauge. */
  private readonly counter: Uint8Array;
  /** The counter columns, for the per-sample copy. */
  private readonly counterColumns: Int32Array;
  private data: Float64Array;
  private count = 0;
  /** The open interval's counts, one slot per column (counter columns only). */
  private readonly acc: Float64Array;
  private handoffsInFlight = 0;
  /**
   * Per worker, its decode run in flight (the rank ran its steps when it started): its passes and
   * tokens are counted as the samples reach their times, not all at its end.
   */
  private readonly runs: (ActiveRun | undefined)[];

  constructor(probes: readonly WorkerProbe[], sampleMs: number | undefined) {
    if (sampleMs !== undefined && !(sampleMs > 0 && Number.isFinite(sampleMs))) throw new RangeError(`sample interval must be a positive number of ms, got ${sampleMs}`);
    this.interval = sampleMs ?? DEFAULT_START_MS;
    this.adaptive = sampleMs === undefined;
    this.probes = probes;
    this.base = new Int32Array(probes.length);
    let col = DEPLOYMENT_COLUMNS;
    probes.forEach((p, i) => {
      this.base[i] = col;
      col += WORKER_FIXED + 2 * p.groups.length;
    });
    this.stride = col;
    this.counter = new Uint8Array(col);
    for (const c of [ARRIVALS, COMPLETIONS, ENDED, INPUT, OUTPUT, BYTES]) this.counter[c] = 1;
    for (const b of this.base) for (const c of [PASSES, PASS_TOKENS, PASS_MS]) this.counter[b + c] = 1;
    this.counterColumns = Int32Array.from(Array.from(this.counter).flatMap((c, i) => (c === 1 ? [i] : [])));
    this.acc = new Float64Array(col);
    this.data = new Float64Array(col * 256);
    this.runs = probes.map(() => undefined);
  }

  // Counters, called by the engine as things happen.
  onArrival(): void {
    this.acc[ARRIVALS]!++;
  }
  onTerminal(completed: boolean): void {
    this.acc[completed ? COMPLETIONS : ENDED]!++;
  }
  onPrefillDone(promptTokens: number): void {
    this.acc[INPUT]! += promptTokens;
  }
  onOutputTokens(n: number): void {
    this.acc[OUTPUT]! += n;
  }
  onPass(worker: number, scheduledTokens: number, durationMs: number): void {
    const b = this.base[worker]!;
    this.acc[b + PASSES]!++;
    this.acc[b + PASS_TOKENS]! += scheduledTokens;
    this.acc[b + PASS_MS]! += durationMs;
  }
  /** The time of the next sample. */
  get nextSampleMs(): number {
    return this.count * this.interval;
  }

  /** A copy of a worker's per-group pages now (before a decode run changes them). */
  pagesNow(worker: number): RunPages {
    const gp = this.probes[worker]!.groupPages();
    return { step: -1, used: Array.from(gp.used), cached: Array.from(gp.cached) };
  }

  /**
   * A decode run of `steps` steps from `startMs`, each ending at `ends[j]` with a token for each of
   * `batch` requests; `before` its pages before it and `pageSteps` after each step that touched the
   * pool (the rank is already at the run's end: samples inside it read these instead).
   */
  onRunStarted(worker: number, startMs: number, ends: ArrayLike<number>, steps: number, batch: number, before?: RunPages, pageSteps?: readonly RunPages[]): void {
    this.runs[worker] = { startMs, ends, steps, batch, passes: 0, tokens: 0, before, pageSteps: pageSteps ?? [] };
  }
  /** The run's end was reached: what is left of it counts now. */
  onRunDone(worker: number): void {
    this.drainRun(worker, Infinity);
    this.runs[worker] = undefined;
  }
  /** Counts the steps of a worker's run that started, and the tokens it gave, at or before `t`. */
  private drainRun(worker: number, t: number): void {
    const r = this.runs[worker];
    if (r === undefined) return;
    const b = this.base[worker]!;
    const acc = this.acc;
    for (; r.passes < r.steps; r.passes++) {
      const start = r.passes === 0 ? r.startMs : r.ends[r.passes - 1]!;
      if (start > t) break;
      acc[b + PASSES]!++;
      acc[b + PASS_TOKENS]! += r.batch;
      acc[b + PASS_MS]! += r.ends[r.passes]! - start;
    }
    for (; r.tokens < r.steps && r.ends[r.tokens]! <= t; r.tokens++) acc[OUTPUT]! += r.batch;
  }
  onTransferStarted(): void {
    this.handoffsInFlight++;
  }
  onTransferDone(bytes: number): void {
    this.handoffsInFlight--;
    this.acc[BYTES]! += bytes;
  }

  /** The time of the next sample. */
  private get nextTime(): number {
    return this.count * this.interval;
  }

  /**
   * The state is settled at the current instant and holds until `untilMs` (the next event):
   * takes every sample due before it (each sample due before the current instant was taken).
   */
  advance(untilMs: number): void {
    for (let t = this.nextTime; t < untilMs; t = this.nextTime) this.take(t);
  }

  /** The run ended at `nowMs`: samples up to the first sample time at or after it. */
  finish(nowMs: number): void {
    while (this.count === 0 || this.data[(this.count - 1) * this.stride + TIME]! < nowMs) this.take(this.nextTime);
  }

  private take(t: number): void {
    const stride = this.stride;
    if ((this.count + 1) * stride > this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    const d = this.data;
    const acc = this.acc;
    const row = this.count * stride;
    for (let i = 0; i < this.runs.length; i++) if (this.runs[i] !== undefined) this.drainRun(i, t);
    // Counters: the open interval's counts, then a fresh interval.
    for (const c of this.counterColumns) {
      d[row + c] = acc[c]!;
      acc[c] = 0;
    }
    d[row + TIME] = t;
    d[row + IN_FLIGHT] = this.handoffsInFlight;
    for (let i = 0; i < this.probes.length; i++) {
      const p = this.probes[i]!;
      const at = row + this.base[i]!;
      const load = p.load();
      d[at + RUNNING] = load.running;
      d[at + WAITING] = load.waiting;
      const gp = p.groupPages();
      const n = p.groups.length;
      for (let g = 0; g < n; g++) {
        d[at + WORKER_FIXED + g] = gp.used[g] ?? 0;
        d[at + WORKER_FIXED + n + g] = gp.cached[g] ?? 0;
      }
      // Inside a decode run the rank is already at the run's end: take back what the run's steps
      // that start after t changed (commands it got meanwhile, a reservation, stay counted).
      const run = this.runs[i];
      if (run?.before !== undefined && run.pageSteps.length > 0) {
        const final = run.pageSteps[run.pageSteps.length - 1]!;
        const then = runPagesAt(run, t);
        if (then !== final) {
          for (let g = 0; g < n; g++) {
            d[at + WORKER_FIXED + g]! += (then.used[g] ?? 0) - (final.used[g] ?? 0);
            d[at + WORKER_FIXED + n + g]! += (then.cached[g] ?? 0) - (final.cached[g] ?? 0);
          }
        }
      }
    }
    this.count++;
    if (this.adaptive && this.count > MAX_ADAPTIVE_SAMPLES && this.count % 2 === 1) this.compact();
  }

  /** Doubles the interval: sample j becomes old sample 2j (gauges), plus old 2j - 1 (counters). */
  private compact(): void {
    const n = this.count;
    const stride = this.stride;
    const d = this.data;
    for (let j = 1; 2 * j < n; j++) {
      const to = j * stride;
      const from = 2 * j * stride;
      const prev = from - stride;
      for (let c = 0; c < stride; c++) d[to + c] = this.counter[c] === 1 ? d[from + c]! + d[prev + c]! : d[from + c]!;
    }
    this.count = (n + 1) / 2;
    this.interval *= 2;
  }

  result(): TimeSeries {
    const n = this.count;
    const d = this.data;
    const stride = this.stride;
    const column = (c: number): number[] => {
      const out = new Array<number>(n);
      for (let i = 0; i < n; i++) out[i] = d[i * stride + c]!;
      return out;
    };
    const perS = 1000 / this.interval;
    const rate = (c: number) => column(c).map((v) => v * perS);
    return {
      sample_ms: this.interval,
      adaptive: this.adaptive,
      times_ms: column(TIME),
      workers: this.probes.map((p, i) => {
        const b = this.base[i]!;
        const g = p.groups.length;
        const groups = p.groups.map((name, k) => ({ name, used_pages: column(b + WORKER_FIXED + k), cached_pages: column(b + WORKER_FIXED + g + k) }));
        const sum = (pick: (x: (typeof groups)[number]) => number[]) => {
          const out = new Array<number>(n).fill(0);
          for (const x of groups) pick(x).forEach((v, k) => (out[k]! += v));
          return out;
        };
        const passes = column(b + PASSES);
        const mean = (c: number) => column(c).map((v, k) => (passes[k] === 0 ? null : v / passes[k]!));
        return {
          label: p.label ?? `${workerPrefix[p.role]}${p.id}`,
          role: p.role,
          id: p.id,
          running: column(b + RUNNING),
          waiting: column(b + WAITING),
          kv_used_pages: sum((x) => x.used_pages),
          kv_cached_pages: sum((x) => x.cached_pages),
          groups,
          passes,
          batch_tokens: mean(b + PASS_TOKENS),
          step_ms: mean(b + PASS_MS),
        };
      }),
      deployment: {
        arrivals: column(ARRIVALS),
        completions: column(COMPLETIONS),
        rejected_or_failed: column(ENDED),
        input_tokens_per_s: rate(INPUT),
        output_tokens_per_s: rate(OUTPUT),
        handoffs_in_flight: column(IN_FLIGHT),
        handoff_bytes: column(BYTES),
      },
    };
  }
}

/**
 * The series as one flat table, a row per sample: `time_ms`, the deployment's columns, then each
 * worker's columns prefixed with its label (`P0.running`, `D1.kv_used_pages`,
 * `W0.kv_used_pages.full_attention` for a group). For CSV writers.
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
      for (const g of w.groups) cols.push({ name: `${p}.kv_used_pages.${g.name}`, values: g.used_pages }, { name: `${p}.kv_cached_pages.${g.name}`, values: g.cached_pages });
    }
    cols.push({ name: `${p}.passes`, values: w.passes }, { name: `${p}.batch_tokens`, values: w.batch_tokens }, { name: `${p}.step_ms`, values: w.step_ms });
  }
  const rows = ts.times_ms.map((_, i) => cols.map((c) => c.values[i] ?? null));
  return { columns: cols.map((c) => c.name), rows };
}

/** The series as one JSON object per sample (`time_ms`, `deployment`, `workers` by label). For JSONL writers. */
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
        ...(w.groups.length > 1 ? { groups: Object.fromEntries(w.groups.map((g) => [g.name, { used_pages: g.used_pages[i], cached_pages: g.cached_pages[i] }])) } : {}),
        passes: w.passes[i],
        batch_tokens: w.batch_tokens[i],
        step_ms: w.step_ms[i],
      };
    }
    return { time_ms: t, deployment, workers };
  });
}
