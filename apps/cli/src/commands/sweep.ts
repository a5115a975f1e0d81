import type { RegisterCommand } from "./index.js";
import { collectSet } from "../spec-input.js";
import { sweepCommand, type SweepOptions } from "../sweep/run.js";

export const registerSweep: RegisterCommand = (program, ctx) => {
  program
    .command("sweep")
    .description(
      "Run a grid of settings over a base spec on all cores (or on a BullMQ queue) and report one row per point; or search for the highest rate (--find max-rate) or the fewest workers (--find min-workers) meeting an SLA.",
    )
    .option("--spec <file>", "base spec, YAML or JSON, or - for standard input (default: the bundled P/D example)")
    .option("--set <path=value>", "override a base spec field (repeatable)", collectSet)
    .option("--grid <file>", "grid file: spec paths and their values (lists, {from, to, step}, {values, zip})")
    .option("--out <file>", "write the rows as JSON lines")
    .option("--csv <file>", "write the rows as CSV")
    .option("--html <file>", "write a self-contained HTML page: latency against the swept variables, goodput against GPUs, a search's SLA frontier")
    .option("--jobs <n>", "points run at once, in worker threads (default: every core)")
    .option("--format <format>", "table or json", "table")
    .option("--find <search>", "max-rate or min-workers")
    .option("--sla <terms>", "SLA over report metrics, e.g. p90_ttft_ms<=2000,p99_itl_ms<=50")
    .option("--tolerance <fraction>", "max-rate: relative width of the final bracket (default 0.01)")
    .option("--max-workers <n>", "min-workers: most workers per pool tried (default 16)")
    .option("--queue <url>", "run the points on a BullMQ queue in Redis, e.g. redis://127.0.0.1:6379/0")
    .option("--sweep-id <id>", "with --queue: restart the sweep of this id (its done points are not run again), or with --cancel: the sweep to cancel")
    .option(
      "--cancel",
      "with --queue and --sweep-id: cancel that queued sweep (its points no worker took and its finished ones are removed; workers skip the rest)",
    )
    .option("--queue-name <name>", "with --queue: the queue's name (default kvsim-sweep)")
    .option("--queue-prefix <prefix>", "with --queue: the Redis key prefix (default kvsim)")
    .option("--force", "overwrite existing output files", false)
    .option("-q, --quiet", "no progress bar (it is drawn on stderr only when stderr is a terminal)", false)
    .action(ctx.run((opts: SweepOptions) => sweepCommand(ctx.io, opts)));
};
