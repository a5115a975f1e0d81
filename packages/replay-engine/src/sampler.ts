// The time series sampled during a replay: rows of one growing array, decode runs in flight, and
// the halving of the rows when adaptive sampling reaches its limit (the series' shape is in timeseries.ts).
import { type TierProbe, type WorkerProbe, type TimeSeries, DEFAULT_START_MS, MAX_ADAPTIVE_SAMPLES, MAX_SERIES_VALUES, TooManySamples } from "./timeseries.js";

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
  /** The offload tiers' bytes (gauges, one column each after the workers'), when the spec has tiers. */
  private readonly tiers: TierProbe | undefined;
  /** Row offset of the first tier column. */
  private readonly tierBase: number;
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

  constructor(probes: readonly WorkerProbe[], sampleMs: number | undefined, tiers?: TierProbe) {
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
    this.tiers = tiers;
    this.tierBase = col;
    col += tiers?.names.length ?? 0;
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
    // The tiers as they are now (inside a decode run: with every block the run fills, not corrected).
    if (this.tiers !== undefined) this.tiers.read(d, row + this.tierBase);
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
      ...(this.tiers === undefined ? {} : { offload: this.tiers.names.map((name, k) => ({ name, used_bytes: column(this.tierBase + k) })) }),
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
