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

/**
 * The most values a time series with a fixed interval may hold (2^24: 128 MiB as doubles, about
 * as much again as the arrays and the CSV it becomes): rows of samples times the deployment's
 * columns (8, plus 5 and 2 per cache group for each worker). An adaptive sampler never comes near.
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
 * A decode run's pages as the rank recorded them (vllm-scheduler's `DecodeRunPages`): rows of a
 * time, then `used` per group, then `cached` per group: one per sample time before the start of the
 * run's last step, then one with the pages after the run. Read while the run is in flight, never kept.
 */
export interface RunPages {
  readonly rows: number;
  readonly stride: number;
  readonly data: ArrayLike<number>;
}

/** A worker's decode run in flight; one per worker, reused run after run (no allocation per run). */
interface ActiveRun {
  active: boolean;
  startMs: number;
  ends: ArrayLike<number>;
  steps: number;
  batch: number;
  /** Steps counted so far as passes, and as tokens. */
  passes: number;
  tokens: number;
  /** Its recorded pages (undefined: none recorded, no sample was due inside it when it started). */
  pages: RunPages | undefined;
  /** The row of `pages` the last sample read (samples come in time order). */
  row: number;
}

const NO_ENDS = new Float64Array(0);

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
  /** The columns that count events in the interval (merged by adding); the others are gauges. */
  private readonly counterColumns: Int32Array;
  /** Room for 16 rows at first, doubled whenever full (see `take`). */
  private data: Float64Array;
  private count = 0;
  /** The count at which an adaptive sampler merges its samples (-1: never). */
  private readonly compactAt: number;
  /** The count at which `take` calls `full`: the rows `data` holds, or `compactAt` if that comes first. */
  private limit = 0;
  /** The time of the next sample: count x interval. */
  private nextAt = 0;
  /** The open interval's counts, one slot per column (counter columns only). */
  private readonly acc: Float64Array;
  /** Zeros, as many as `acc` holds: copying them (a memory copy) clears `acc` faster than `fill` (a C++ call). */
  private readonly zeros: Float64Array;
  private handoffsInFlight = 0;
  /**
   * Per worker, its decode run in flight (the rank ran its steps when it started): its passes and
   * tokens are counted as the samples reach their times, not all at its end.
   */
  private readonly runs: ActiveRun[];

  constructor(probes: readonly WorkerProbe[], sampleMs: number | undefined) {
    if (sampleMs !== undefined && !(sampleMs > 0 && Number.isFinite(sampleMs)))
      throw new RangeError(`sample interval must be a positive number of ms, got ${sampleMs}`);
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
    const counters = [ARRIVALS, COMPLETIONS, ENDED, INPUT, OUTPUT, BYTES];
    for (const b of this.base) counters.push(b + PASSES, b + PASS_TOKENS, b + PASS_MS);
    this.counterColumns = Int32Array.from(counters);
    this.acc = new Float64Array(col);
    this.zeros = new Float64Array(col);
    this.compactAt = this.adaptive ? MAX_ADAPTIVE_SAMPLES + 1 : -1;
    this.data = new Float64Array(16 * col);
    this.limit = this.nextLimit();
    this.runs = probes.map(() => ({ active: false, startMs: 0, ends: NO_ENDS, steps: 0, batch: 0, passes: 0, tokens: 0, pages: undefined, row: 0 }));
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
  /**
   * The sample times a decode run from now to `untilMs` must record its pages at (the next
   * sample's index and the interval: sample i is at i x interval), or undefined when none falls
   * before `untilMs`.
   */
  samplesBefore(untilMs: number): { readonly index: number; readonly everyMs: number } | undefined {
    return this.nextAt < untilMs ? { index: this.count, everyMs: this.interval } : undefined;
  }

  /**
   * A decode run of `steps` steps from `startMs`, each ending at `ends[j]` with a token for each of
   * `batch` requests; `pages` the pages the rank recorded through it (the rank is already at the
   * run's end: samples inside it read these instead). `ends` and `pages` are read until
   * `onRunDone`, never kept.
   */
  onRunStarted(worker: number, startMs: number, ends: ArrayLike<number>, steps: number, batch: number, pages?: RunPages): void {
    const r = this.runs[worker]!;
    r.active = true;
    r.startMs = startMs;
    r.ends = ends;
    r.steps = steps;
    r.batch = batch;
    r.passes = 0;
    r.tokens = 0;
    r.pages = pages;
    r.row = 0;
  }
  /** The run's end was reached: what is left of it counts now. */
  onRunDone(worker: number): void {
    const r = this.runs[worker]!;
    if (!r.active) return;
    this.drainRun(r, this.base[worker]!, Infinity);
    r.active = false;
    r.ends = NO_ENDS;
    r.pages = undefined;
  }
  /**
   * Counts the steps of a run that started, and the tokens it gave, at or before `t`. Step counts
   * and tokens are whole numbers, so adding them once times the steps gives the very doubles one
   * addition per step gave; the step times are added one by one, in order (the same sum).
   */
  private drainRun(r: ActiveRun, b: number, t: number): void {
    const acc = this.acc;
    const ends = r.ends;
    const steps = r.steps;
    let j = r.passes;
    if (j < steps) {
      let start = j === 0 ? r.startMs : ends[j - 1]!;
      if (start <= t) {
        const from = j;
        let ms = acc[b + PASS_MS]!;
        do {
          const end = ends[j]!;
          ms += end - start;
          start = end;
          j++;
        } while (j < steps && start <= t);
        acc[b + PASS_MS] = ms;
        acc[b + PASSES]! += j - from;
        acc[b + PASS_TOKENS]! += (j - from) * r.batch;
        r.passes = j;
      }
    }
    let k = r.tokens;
    const first = k;
    while (k < steps && ends[k]! <= t) k++;
    if (k > first) {
      acc[OUTPUT]! += (k - first) * r.batch;
      r.tokens = k;
    }
  }
  onTransferStarted(): void {
    this.handoffsInFlight++;
  }
  onTransferDone(bytes: number): void {
    this.handoffsInFlight--;
    this.acc[BYTES]! += bytes;
  }

  /**
   * The state is settled at the current instant and holds until `untilMs` (the next event):
   * takes every sample due before it (each sample due before the current instant was taken).
   */
  advance(untilMs: number): void {
    while (this.nextAt < untilMs) this.take(this.nextAt);
  }

  /** The run ended at `nowMs`: samples up to the first sample time at or after it. */
  finish(nowMs: number): void {
    while (this.count === 0 || this.data[(this.count - 1) * this.stride + TIME]! < nowMs) this.take(this.nextAt);
  }

  // A sample is taken some 13,000 times in a long adaptive run, most of them before the code is
  // warm: the rare paths (growing, compacting, a decode run's pages) are methods of their own so
  // that `take` stays small. V8 throws an optimised `take` away and compiles it again when it first
  // meets a path it has no type feedback for (a TurboFan compile of `take` costs more than a
  // thousand samples), so growing and compacting share one call, `full`, made from the 16th
  // sample on: compacting, first met at sample 4,097, adds no new path to `take`.
  private take(t: number): void {
    const stride = this.stride;
    const d = this.data;
    const acc = this.acc;
    const row = this.count * stride;
    const runs = this.runs;
    const base = this.base;
    for (let i = 0; i < runs.length; i++) if (runs[i]!.active) this.drainRun(runs[i]!, base[i]!, t);
    // Counters: the open interval's counts (acc is 0 in every gauge column, written below), then
    // a fresh interval. Two typed-array copies, no loop to compile.
    d.set(acc, row);
    acc.set(this.zeros);
    d[row + TIME] = t;
    d[row + IN_FLIGHT] = this.handoffsInFlight;
    const probes = this.probes;
    for (let i = 0; i < probes.length; i++) {
      const p = probes[i]!;
      const at = row + base[i]!;
      const load = p.load();
      d[at + RUNNING] = load.running;
      d[at + WAITING] = load.waiting;
      const gp = p.groupPages();
      const used = gp.used;
      const cached = gp.cached;
      const n = p.groups.length;
      for (let g = 0; g < n; g++) {
        d[at + WORKER_FIXED + g] = used[g]!;
        d[at + WORKER_FIXED + n + g] = cached[g]!;
      }
      const run = runs[i]!;
      if (run.active && run.pages !== undefined) this.pagesInRun(run, run.pages, at + WORKER_FIXED, n, t);
    }
    this.count++;
    this.nextAt = this.count * this.interval;
    if (this.count === this.limit) this.full();
  }

  /** The next count at which `take` must grow the buffer or compact. */
  private nextLimit(): number {
    const rows = this.data.length / this.stride;
    return this.compactAt > 0 && this.compactAt < rows ? this.compactAt : rows;
  }

  /** `take` reached `limit`: compacts (adaptive, at `compactAt`), else doubles the buffer. */
  private full(): void {
    if (this.count === this.compactAt) this.compact();
    else {
      if (this.data.length * 2 > MAX_SERIES_VALUES)
        throw new TooManySamples(this.interval, this.count, this.data[(this.count - 1) * this.stride + TIME]!, this.stride);
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.limit = this.nextLimit();
  }

  /**
   * Inside a decode run the rank is already at the run's end: takes back, from the pages just read
   * (`n` used then `n` cached from `at`), what the run's steps that start after t changed
   * (commands the rank got meanwhile, a reservation, stay counted).
   */
  private pagesInRun(run: ActiveRun, pages: RunPages, at: number, n: number, t: number): void {
    const last = pages.rows - 1;
    const pd = pages.data;
    const ps = pages.stride;
    // The row of time t; none when t is at or after the start of the run's last step (the pages
    // after the run hold then).
    while (run.row < last && pd[run.row * ps]! < t) run.row++;
    if (run.row === last || pd[run.row * ps] !== t) return;
    const then = run.row * ps + 1;
    const final = last * ps + 1;
    const d = this.data;
    for (let g = 0; g < n; g++) {
      d[at + g]! += pd[then + g]! - pd[final + g]!;
      d[at + n + g]! += pd[then + n + g]! - pd[final + n + g]!;
    }
  }

  /** Doubles the interval: sample j becomes old sample 2j (gauges), plus old 2j - 1 (counters). */
  private compact(): void {
    const n = this.count;
    // The new count and interval first: the loop runs once per compaction, and V8 compiles it on
    // the fly (on-stack replacement); code after it would have no type feedback yet and throw
    // that compiled code away.
    this.count = (n + 1) / 2;
    this.interval *= 2;
    this.nextAt = this.count * this.interval;
    mergePairs(this.data, this.stride, this.counterColumns, n);
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
    // One array per series (no column copied, then mapped into a second one).
    const rate = (c: number): number[] => {
      const out = new Array<number>(n);
      for (let i = 0; i < n; i++) out[i] = d[i * stride + c]! * perS;
      return out;
    };
    return {
      sample_ms: this.interval,
      adaptive: this.adaptive,
      times_ms: column(TIME),
      workers: this.probes.map((p, i) => {
        const b = this.base[i]!;
        const g = p.groups.length;
        const groups = p.groups.map((name, k) => ({ name, used_pages: column(b + WORKER_FIXED + k), cached_pages: column(b + WORKER_FIXED + g + k) }));
        // Per sample, the groups' pages added up in group order.
        const sum = (first: number) => {
          const out = new Array<number>(n);
          for (let i = 0; i < n; i++) {
            let v = 0;
            for (let k = 0; k < g; k++) v += d[i * stride + first + k]!;
            out[i] = v;
          }
          return out;
        };
        const passes = column(b + PASSES);
        const mean = (c: number): (number | null)[] => {
          const out = new Array<number | null>(n);
          for (let i = 0; i < n; i++) out[i] = passes[i] === 0 ? null : d[i * stride + c]! / passes[i]!;
          return out;
        };
        return {
          label: p.label ?? `${workerPrefix[p.role]}${p.id}`,
          role: p.role,
          id: p.id,
          running: column(b + RUNNING),
          waiting: column(b + WAITING),
          kv_used_pages: sum(b + WORKER_FIXED),
          kv_cached_pages: sum(b + WORKER_FIXED + g),
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

/** Row 2j takes in row 2j - 1's counts (columns `cc`), then moves to row j (every row up to j was read). */
function mergePairs(d: Float64Array, stride: number, cc: Int32Array, n: number): void {
  for (let j = 1; 2 * j < n; j++) {
    const to = j * stride;
    const from = 2 * j * stride;
    const prev = from - stride;
    for (const c of cc) d[from + c]! += d[prev + c]!;
    d.copyWithin(to, from, from + stride);
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
      for (const g of w.groups)
        cols.push({ name: `${p}.kv_used_pages.${g.name}`, values: g.used_pages }, { name: `${p}.kv_cached_pages.${g.name}`, values: g.cached_pages });
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
        ...(w.groups.length > 1
          ? { groups: Object.fromEntries(w.groups.map((g) => [g.name, { used_pages: g.used_pages[i], cached_pages: g.cached_pages[i] }])) }
          : {}),
        passes: w.passes[i],
        batch_tokens: w.batch_tokens[i],
        step_ms: w.step_ms[i],
      };
    }
    return { time_ms: t, deployment, workers };
  });
}
