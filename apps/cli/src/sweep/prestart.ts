import { availableParallelism } from "node:os";
import { addressSpaceLimit, localJobs } from "./jobs.js";

/**
 * How many worker threads to start before the CLI loads, from the raw arguments: `kvsim sweep`
 * with a grid, run locally (no --queue, no --find: a search starts its threads when a second
 * point waits) with more than one job: --jobs minus one (the main thread runs points too), or
 * every core but one; never more than the cores or the address-space limit allow. Anything
 * else, or a --jobs the CLI will refuse: 0. A guess that is wrong
 * costs only a pool nobody takes, destroyed when the command ends; the command itself decides
 * the sweep from its parsed options.
 */
export function sweepThreadsToPrestart(argv: readonly string[], cores = availableParallelism(), limit = addressSpaceLimit()): number {
  if (argv[0] !== "sweep") return 0;
  const has = (flag: string) => argv.some((a) => a === flag || a.startsWith(`${flag}=`));
  if (!has("--grid") || has("--queue") || has("--find") || has("--help") || argv.includes("-h")) return 0;
  let jobs = cores;
  const i = argv.findIndex((a) => a === "--jobs" || a.startsWith("--jobs="));
  if (i >= 0) {
    const text = argv[i] === "--jobs" ? argv[i + 1] : argv[i]!.slice("--jobs=".length);
    if (text === undefined || !/^[1-9]\d{0,3}$/.test(text)) return 0;
    jobs = Number(text);
  }
  // No more than the cores and the address-space limit allow (see localJobs; the grid's size is not known yet).
  return localJobs(jobs, Number.POSITIVE_INFINITY, cores, limit).jobs - 1;
}
