import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

/*
 * How many points a local sweep runs at once. A module of its own, with no other import: cli.ts
 * reads it before the CLI's modules load (see prestart.ts).
 */

/**
 * Address space a worker thread takes (its V8 isolate's reservations with a 64 MiB code range,
 * measured at about 160 MiB, and the heap a point grows: some 370 MiB in all on the bundled P/D
 * grid) and what the main thread keeps besides.
 */
const THREAD_ADDRESS_SPACE = 512 * 2 ** 20;
const MAIN_ADDRESS_SPACE = 1.5 * 2 ** 30;

/** This process's address-space limit in bytes (`ulimit -v`), from /proc/self/limits; Infinity when none or unknown. */
export function addressSpaceLimit(limits?: string): number {
  let text = limits;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/self/limits", "utf8");
    } catch {
      return Number.POSITIVE_INFINITY;
    }
  }
  const m = /^Max address space\s+(\S+)/m.exec(text);
  const v = m === null ? Number.NaN : Number(m[1]);
  return Number.isFinite(v) && v > 0 ? v : Number.POSITIVE_INFINITY;
}

/** Worker threads that fit an address-space limit beside the main thread (V8 aborts the whole process when one cannot reserve its memory). */
export const threadsThatFit = (limit: number): number =>
  Number.isFinite(limit) ? Math.max(0, Math.floor((limit - MAIN_ADDRESS_SPACE) / THREAD_ADDRESS_SPACE)) : Number.POSITIVE_INFINITY;

/**
 * How many points a local sweep (or a worker) runs at once: the --jobs asked, but no more than
 * the points there are, the cores, and what the address-space limit leaves room for (each job
 * past the first is a worker thread). `why` says what capped it, when something did.
 */
export function localJobs(
  asked: number,
  points = Number.POSITIVE_INFINITY,
  cores = availableParallelism(),
  limit = addressSpaceLimit(),
  /** Every job in a worker thread (`kvsim worker`), none in the main thread. */
  allThreads = false,
): { jobs: number; why?: string } {
  const fit = threadsThatFit(limit);
  const caps: [number, string][] = [
    [points, `the grid's ${points} point${points === 1 ? "" : "s"}`],
    [cores, `${cores} core${cores === 1 ? "" : "s"}`],
    [allThreads ? fit : 1 + fit, `the address-space limit (ulimit -v), room for ${fit} worker thread${fit === 1 ? "" : "s"}`],
  ];
  let jobs = asked;
  let why: string | undefined;
  for (const [cap, reason] of caps) {
    if (cap < jobs) {
      jobs = Math.max(1, cap);
      why = reason;
    }
  }
  return why === undefined ? { jobs } : { jobs, why };
}
