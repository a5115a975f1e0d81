/** One evaluation of a search: the value (or worker counts) tried, whether it met the SLA, and the phase. */
export interface Probe<C> {
  readonly candidate: C;
  readonly meets: boolean;
  readonly phase: "start" | "bracket" | "bisect" | "level";
}

/** What a search asks of its host: evaluate one candidate (a replay) and say whether it meets the SLA. */
export type Evaluate<C> = (candidate: C) => Promise<{ readonly meets: boolean; readonly goodput?: number | undefined }>;

/** The default relative tolerance of the max-rate search: the answer is within 1% of the lowest failing rate found. */
export const DEFAULT_RATE_TOLERANCE = 0.01;
/** Doublings (or halvings) tried while bracketing a rate before giving up. */
export const MAX_RATE_DOUBLINGS = 20;

/** Rounds to 4 significant digits, so the rates tried read as typed (23.44, not 23.4375). */
export const roundRate = (x: number): number => Number(x.toPrecision(4));

export interface MaxRateResult {
  /** The highest rate tried that met the SLA; null when none did. */
  readonly answer: number | null;
  /** The lowest rate tried above the answer that did not; null when every rate tried met it. */
  readonly failing: number | null;
  readonly probes: readonly Probe<number>[];
}

/**
 * The highest rate at which the SLA holds, assuming it holds below a rate where it holds.
 * Bracketing: from `start`, double while the SLA holds (or halve while it does not), up to
 * MAX_RATE_DOUBLINGS times. Bisection: the midpoint of the bracket (rounded to 4 significant
 * digits) until failing / answer - 1 <= tolerance, or no rounded midpoint lies strictly inside.
 * Sequential, so the path and the answer do not depend on how many points run at once.
 */
export async function findMaxRate(
  start: number,
  evaluate: Evaluate<number>,
  options: { tolerance?: number; onProbe?: (p: Probe<number>) => void } = {},
): Promise<MaxRateResult> {
  if (!(start > 0) || !Number.isFinite(start)) throw new RangeError(`a rate search starts from a positive rate, got ${start}`);
  const tolerance = options.tolerance ?? DEFAULT_RATE_TOLERANCE;
  if (!(tolerance > 0)) throw new RangeError(`the tolerance must be greater than 0, got ${tolerance}`);
  const probes: Probe<number>[] = [];
  const probe = async (x: number, phase: Probe<number>["phase"]) => {
    const { meets } = await evaluate(x);
    const p = { candidate: x, meets, phase };
    probes.push(p);
    options.onProbe?.(p);
    return meets;
  };
  const x0 = roundRate(start);
  let lo: number | undefined;
  let hi: number | undefined;
  if (await probe(x0, "start")) {
    lo = x0;
    for (let i = 0; i < MAX_RATE_DOUBLINGS && hi === undefined; i++) {
      const x = roundRate(lo * 2);
      if (await probe(x, "bracket")) lo = x;
      else hi = x;
    }
    if (hi === undefined) return { answer: lo, failing: null, probes };
  } else {
    hi = x0;
    for (let i = 0; i < MAX_RATE_DOUBLINGS && lo === undefined; i++) {
      const x = roundRate(hi / 2);
      if (await probe(x, "bracket")) lo = x;
      else hi = x;
    }
    if (lo === undefined) return { answer: null, failing: hi, probes };
  }
  while ((hi - lo) / lo > tolerance) {
    const mid = roundRate((lo + hi) / 2);
    if (mid <= lo || mid >= hi) break;
    if (await probe(mid, "bisect")) lo = mid;
    else hi = mid;
  }
  return { answer: lo, failing: hi, probes };
}

/** Worker counts of a candidate: aggregated `{ workers }`, P/D `{ prefill, decode }`. */
export type WorkerCounts = { readonly workers: number } | { readonly prefill: number; readonly decode: number };

export interface MinWorkersResult {
  readonly answer: WorkerCounts | null;
  /** GPUs of the answer: workers x TP (P/D: prefill x its TP + decode x its TP). */
  readonly gpus: number | null;
  readonly probes: readonly Probe<WorkerCounts>[];
}

/**
 * The fewest aggregated workers meeting the SLA, assuming more workers never hurt: double from 1
 * until one count meets it (at most `maxWorkers`), then bisect between the last count that did not
 * and the first that did.
 */
export async function findMinAggregatedWorkers(
  evaluate: Evaluate<WorkerCounts>,
  options: { maxWorkers: number; tp?: number; onProbe?: (p: Probe<WorkerCounts>) => void },
): Promise<MinWorkersResult> {
  const probes: Probe<WorkerCounts>[] = [];
  const probe = async (workers: number, phase: Probe<WorkerCounts>["phase"]) => {
    const { meets } = await evaluate({ workers });
    const p = { candidate: { workers }, meets, phase };
    probes.push(p);
    options.onProbe?.(p);
    return meets;
  };
  let lo = 0; // the highest count known to fail (0: none tried)
  let hi: number | undefined;
  for (let w = 1; hi === undefined; w = Math.min(w * 2, options.maxWorkers)) {
    if (await probe(w, w === 1 ? "start" : "bracket")) hi = w;
    else lo = w;
    if (hi === undefined && w >= options.maxWorkers) return { answer: null, gpus: null, probes };
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await probe(mid, "bisect")) hi = mid;
    else lo = mid;
  }
  return { answer: { workers: hi }, gpus: hi * (options.tp ?? 1), probes };
}

/**
 * The prefill/decode pair with the fewest GPUs (prefill x `tpPrefill` + decode x `tpDecode`) that
 * meets the SLA, ties by the higher goodput, then by fewer prefill workers. Pairs are tried by
 * level of GPUs, lowest first, every pair of a level at once (so a pool runs them in parallel);
 * the first level with a pair that meets the SLA holds the answer. Each pool has 1 to
 * `maxWorkers` workers.
 */
export async function findMinPdWorkers(
  evaluate: Evaluate<WorkerCounts>,
  options: { maxWorkers: number; tpPrefill?: number; tpDecode?: number; onProbe?: (p: Probe<WorkerCounts>) => void },
): Promise<MinWorkersResult> {
  const tpP = options.tpPrefill ?? 1;
  const tpD = options.tpDecode ?? 1;
  const levels = new Map<number, { prefill: number; decode: number }[]>();
  for (let p = 1; p <= options.maxWorkers; p++) {
    for (let d = 1; d <= options.maxWorkers; d++) {
      const gpus = p * tpP + d * tpD;
      const level = levels.get(gpus) ?? [];
      level.push({ prefill: p, decode: d });
      levels.set(gpus, level);
    }
  }
  const probes: Probe<WorkerCounts>[] = [];
  for (const gpus of [...levels.keys()].sort((a, b) => a - b)) {
    const pairs = levels.get(gpus)!;
    const results = await Promise.all(pairs.map(async (pair) => ({ pair, ...(await evaluate(pair)) })));
    for (const r of results) {
      const p = { candidate: r.pair, meets: r.meets, phase: "level" as const };
      probes.push(p);
      options.onProbe?.(p);
    }
    const meeting = results.filter((r) => r.meets);
    if (meeting.length > 0) {
      meeting.sort((a, b) => (b.goodput ?? 0) - (a.goodput ?? 0) || a.pair.prefill - b.pair.prefill);
      return { answer: meeting[0]!.pair, gpus, probes };
    }
  }
  return { answer: null, gpus: null, probes };
}
