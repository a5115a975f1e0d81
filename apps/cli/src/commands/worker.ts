import { hostname } from "node:os";
import type { SweepRow } from "@kvsim/sweep";
import { numberOption, UsageError, type CliIo } from "../io.js";
import { defaultJobs, poolExecutor } from "../sweep/executor.js";
import { localJobs } from "../sweep/jobs.js";
import type { RegisterCommand } from "./index.js";

interface WorkerFlags {
  readonly queue: string;
  readonly jobs?: string;
  readonly queueName?: string;
  readonly queuePrefix?: string;
  readonly lockMs: string;
  readonly stalledMs: string;
}

/** Resolves on SIGINT or SIGTERM (a worker runs until told to stop). */
function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    const stop = (signal: string) => () => {
      resolve(signal);
    };
    process.once("SIGINT", stop("SIGINT"));
    process.once("SIGTERM", stop("SIGTERM"));
  });
}

const describeRow = (row: SweepRow | undefined): string =>
  row === undefined
    ? ""
    : row.status === "ok"
      ? `ok, digest ${row.digest?.slice(0, 12) ?? "?"}, ${Math.round(row.wall_time_ms)} ms`
      : `${row.status}: ${row.reason ?? ""}`;

/**
 * `kvsim worker --queue <url>`: takes sweep points from a BullMQ queue and runs them in worker
 * threads (the event loop stays free to renew each point's lock), until SIGINT or SIGTERM. One
 * line on stderr per point started and done.
 */
export async function workerCommand(io: CliIo, flags: WorkerFlags, stop: Promise<string> = untilSignal()): Promise<number> {
  // No more threads than cores, nor than the address-space limit holds (see localJobs).
  const jobs = localJobs(
    flags.jobs === undefined ? defaultJobs() : numberOption("--jobs", flags.jobs, { integer: true, min: 1 }),
    undefined,
    undefined,
    undefined,
    true,
  ).jobs;
  const lockDurationMs = numberOption("--lock-ms", flags.lockMs, { integer: true, min: 100 });
  const stalledIntervalMs = numberOption("--stalled-ms", flags.stalledMs, { integer: true, min: 100 });
  const { startWorker, checkQueueUrl, QueueError } = await import("@kvsim/sweep-queue");
  // A malformed --queue is refused before any thread starts.
  try {
    checkQueueUrl(flags.queue);
  } catch (e) {
    if (e instanceof QueueError) throw new UsageError(e.message);
    throw e;
  }
  // Points run in worker threads even with --jobs 1, so a long point never blocks lock renewal.
  const executor = poolExecutor(jobs);
  const name = `${hostname()}:${process.pid}`;
  let worker;
  try {
    worker = await startWorker(
      {
        url: flags.queue,
        ...(flags.queueName === undefined ? {} : { queueName: flags.queueName }),
        ...(flags.queuePrefix === undefined ? {} : { prefix: flags.queuePrefix }),
      },
      (task) => executor.run(task),
      {
        concurrency: jobs,
        lockDurationMs,
        stalledIntervalMs,
        onPoint: (e) => {
          const what = e.kind === "started" ? ` (attempt ${e.attempt})` : e.kind === "skipped" ? `: ${e.reason ?? ""}` : ` (${describeRow(e.row)})`;
          io.err(`worker ${name}: point ${e.jobId} ${e.kind}${what}\n`);
        },
      },
    );
  } catch (e) {
    await executor.close();
    if (e instanceof QueueError) throw new UsageError(e.message);
    throw e;
  }
  io.err(`worker ${name}: taking points from ${flags.queue} with ${jobs} thread${jobs === 1 ? "" : "s"}\n`);
  const signal = await stop;
  io.err(`worker ${name}: ${signal}, finishing the points in hand\n`);
  await worker.close();
  await executor.close();
  return 0;
}

export const registerWorker: RegisterCommand = (program, ctx) => {
  program
    .command("worker")
    .description(
      "Take sweep points from a BullMQ queue (see kvsim sweep --queue) and run them, until SIGINT or SIGTERM. Start as many as you like, on any machine that sees the same traces.",
    )
    .requiredOption("--queue <url>", "the queue's Redis, e.g. redis://127.0.0.1:6379/0")
    .option("--jobs <n>", "points run at once, each in a worker thread (default: every core)")
    .option("--queue-name <name>", "the queue's name (default kvsim-sweep)")
    .option("--queue-prefix <prefix>", "the Redis key prefix (default kvsim)")
    // The queue package's DEFAULT_LOCK_MS and DEFAULT_STALLED_MS (it loads only when a worker starts).
    .option("--lock-ms <ms>", "how long a point's lock lasts without renewal (renewed at half); a dead worker's point is retried after it", "10000")
    .option("--stalled-ms <ms>", "how often to look for points whose worker died", "5000")
    .action(ctx.run((flags: WorkerFlags) => workerCommand(ctx.io, flags)));
};
