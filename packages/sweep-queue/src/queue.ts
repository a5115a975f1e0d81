import { createHash } from "node:crypto";
import { Job, Queue, QueueEvents, Worker } from "bullmq";
import { Redis } from "ioredis";
import { badRow, type PointTask, type SweepRow } from "@kvsim/sweep";

/** Where the queue lives: a Redis URL (`redis://host:port/db`), the queue's name and its key prefix. */
export interface QueueTarget {
  readonly url: string;
  /** Default `kvsim-sweep`. */
  readonly queueName?: string;
  /** Prefix of every Redis key (default `kvsim`); tests use their own. */
  readonly prefix?: string;
}

export const DEFAULT_QUEUE_NAME = "kvsim-sweep";
export const DEFAULT_PREFIX = "kvsim";
/** Completed and failed jobs are kept this long, so a restarted sweep finds its points. */
export const KEEP_RESULTS_S = 7 * 24 * 3600;
/** How often a waiting sweep re-reads the state of its pending points, besides the queue's events. */
const RECONCILE_MS = 2000;
/**
 * A point's lock (BullMQ renews it at half, from the worker's event loop, which the points'
 * worker threads leave free). Points take seconds: a dead worker's point should be back on the
 * queue within seconds too, not after BullMQ's 30 s lock and 30 s stalled check.
 */
export const DEFAULT_LOCK_MS = 10_000;
/** How often a worker looks for points whose worker died (their lock expired). */
export const DEFAULT_STALLED_MS = 5_000;

/** The Redis key that marks a sweep cancelled (workers skip its points). */
const cancelKey = (t: QueueTarget, sweepId: string) => `${names(t).prefix}:${names(t).name}:cancelled:${sweepId}`;
const sweepOfJob = (jobId: string): string => jobId.split(".", 1)[0]!;

/** A bad queue URL or an unreachable Redis. */
export class QueueError extends Error {
  override readonly name = "QueueError";
}

/** A sweep id: letters, digits, `_` and `-`, at most 64. */
export const SWEEP_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Checks a queue URL: `redis://` or `rediss://`, a host, an optional port and database number. */
export function checkQueueUrl(url: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new QueueError(`--queue must be a URL such as redis://127.0.0.1:6379/0, got "${url}"`);
  }
  if (u.protocol !== "redis:" && u.protocol !== "rediss:") throw new QueueError(`--queue must be a redis:// or rediss:// URL, got "${url}"`);
  if (u.hostname === "") throw new QueueError(`--queue names no host: "${url}"`);
  if (u.pathname !== "" && u.pathname !== "/" && !/^\/\d+$/.test(u.pathname))
    throw new QueueError(`--queue's path must be a database number, such as /0, got "${u.pathname}"`);
}

/** Connects once and pings, so an unreachable Redis is an error now rather than a silent wait. */
export async function pingRedis(url: string, timeoutMs = 3000): Promise<void> {
  checkQueueUrl(url);
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  let cause: string | undefined;
  client.on("error", (e: Error) => {
    cause ??= e.message;
  });
  try {
    await client.connect();
    await client.ping();
  } catch (e) {
    throw new QueueError(`cannot reach Redis at ${url}: ${cause ?? (e instanceof Error ? e.message : String(e))}`);
  } finally {
    client.disconnect();
  }
}

const names = (t: QueueTarget) => ({ name: t.queueName ?? DEFAULT_QUEUE_NAME, prefix: t.prefix ?? DEFAULT_PREFIX });

/**
 * A point's job id: the sweep id, the point and a hash of everything the point runs (its settings,
 * spec and trace hash). A restarted sweep with the same id finds the points it already ran; a
 * point whose inputs changed gets a new job.
 */
export function jobIdFor(sweepId: string, task: PointTask): string {
  const hash = createHash("sha256")
    .update(JSON.stringify([task.settings, task.spec, task.trace, task.percentiles ?? []]))
    .digest("hex")
    .slice(0, 16);
  return `${sweepId}.${task.point}.${hash}`;
}

/** The data of one job: the sweep it belongs to and the point's task. */
export interface PointJob {
  readonly sweepId: string;
  readonly task: PointTask;
}

const asRow = (value: unknown): SweepRow => (typeof value === "string" ? (JSON.parse(value) as SweepRow) : (value as SweepRow));

/**
 * The sweep's side of the queue: puts points on it and collects their rows. Each point is one
 * job with a deterministic id, so adding it again (a restarted sweep) adds nothing and its row
 * is read back; a job that failed (its workers died more often than the stall limit) is retried.
 */
export class SweepQueue {
  private readonly pending = new Map<string, { resolve: (row: SweepRow) => void; task: PointTask }>();
  private reconciling = false;
  private readonly resumed = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  /** Points this sweep found already done (a restart), and points it added. */
  readonly counts = { reused: 0, added: 0 };

  private constructor(
    private readonly queue: Queue,
    private readonly events: QueueEvents,
    private readonly target: QueueTarget,
    private readonly redis: Redis,
  ) {
    events.on("completed", ({ jobId, returnvalue }) => {
      this.settle(jobId, asRow(returnvalue));
    });
    events.on("failed", ({ jobId, failedReason }) => {
      const p = this.pending.get(jobId);
      if (p !== undefined) this.settle(jobId, badRow(p.task.point, p.task.settings, "failed", `the queue gave up on the point: ${failedReason}`, 0));
    });
    this.timer = setInterval(() => void this.reconcile(), RECONCILE_MS);
  }

  /** Opens the queue (after a ping, so an unreachable Redis fails at once). */
  static async open(target: QueueTarget): Promise<SweepQueue> {
    await pingRedis(target.url);
    const { name, prefix } = names(target);
    const connection = { url: target.url, maxRetriesPerRequest: null };
    const queue = new Queue(name, { connection, prefix });
    const events = new QueueEvents(name, { connection, prefix });
    await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
    return new SweepQueue(queue, events, target, new Redis(target.url, { maxRetriesPerRequest: null }));
  }

  private settle(jobId: string, row: SweepRow): void {
    const p = this.pending.get(jobId);
    if (p === undefined) return;
    this.pending.delete(jobId);
    p.resolve(row);
  }

  /** Reads the state of the job, settling it when it is done, retrying it when it failed. */
  private async check(jobId: string): Promise<void> {
    const job = await Job.fromId<PointJob, SweepRow>(this.queue, jobId);
    if (job === undefined) {
      // Removed from the queue: by kvsim sweep --cancel, while this sweep waited for it.
      const p = this.pending.get(jobId);
      if (p !== undefined && (await this.redis.exists(cancelKey(this.target, sweepOfJob(jobId)))) === 1) {
        this.settle(
          jobId,
          badRow(p.task.point, p.task.settings, "failed", `the sweep was cancelled (kvsim sweep --cancel --sweep-id ${sweepOfJob(jobId)})`, 0),
        );
      }
      return;
    }
    const state = await job.getState();
    if (state === "completed") this.settle(jobId, asRow(job.returnvalue));
    else if (state === "failed") await job.retry("failed");
  }

  private async reconcile(): Promise<void> {
    if (this.reconciling) return;
    this.reconciling = true;
    try {
      for (const jobId of [...this.pending.keys()]) await this.check(jobId);
    } catch {
      // A dropped connection: BullMQ reconnects; the next round tries again.
    } finally {
      this.reconciling = false;
    }
  }

  /** Runs one point on the queue: adds its job (unless it exists) and resolves with its row. */
  async run(sweepId: string, task: PointTask): Promise<SweepRow> {
    // Running a sweep id again takes back an earlier cancel of it.
    if (!this.resumed.has(sweepId)) {
      this.resumed.add(sweepId);
      await this.redis.del(cancelKey(this.target, sweepId));
    }
    const jobId = jobIdFor(sweepId, task);
    const row = new Promise<SweepRow>((resolve) => this.pending.set(jobId, { resolve, task }));
    const existing = await Job.fromId(this.queue, jobId);
    if (existing === undefined) {
      this.counts.added++;
      await this.queue.add("point", { sweepId, task } satisfies PointJob, {
        jobId,
        removeOnComplete: { age: KEEP_RESULTS_S },
        removeOnFail: { age: KEEP_RESULTS_S },
      });
    } else {
      this.counts.reused++;
    }
    await this.check(jobId);
    return row;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.events.close();
    await this.queue.close();
    this.redis.disconnect();
  }
}

/** What `cancelSweep` did: points removed before any worker took them, finished points removed, points running (their workers discard them). */
export interface CancelOutcome {
  readonly waiting: number;
  readonly finished: number;
  readonly running: number;
}

/**
 * Cancels a sweep on the queue: marks it cancelled (workers skip any of its points they take;
 * a sweep waiting for them ends with those points failed), removes its points that no worker
 * took yet, and its finished ones (so a restart with the same id runs them again). A point
 * running now cannot be removed (its worker holds the lock): its worker finishes it, and it is
 * counted in `running`.
 */
export async function cancelSweep(target: QueueTarget, sweepId: string): Promise<CancelOutcome> {
  await pingRedis(target.url);
  const { name, prefix } = names(target);
  const queue = new Queue(name, { connection: { url: target.url, maxRetriesPerRequest: null }, prefix });
  const redis = new Redis(target.url, { maxRetriesPerRequest: null });
  try {
    await redis.set(cancelKey(target, sweepId), "1", "EX", KEEP_RESULTS_S);
    const ofSweep = (jobs: readonly { id?: string | undefined }[]) =>
      jobs.map((j) => j.id).filter((id): id is string => id !== undefined && sweepOfJob(id) === sweepId);
    const remove = async (ids: readonly string[]) => {
      let n = 0;
      for (const id of ids) n += await queue.remove(id);
      return n;
    };
    const waiting = await remove(ofSweep(await queue.getJobs(["waiting", "wait", "delayed", "prioritized", "waiting-children"])));
    const finished = await remove(ofSweep(await queue.getJobs(["completed", "failed"])));
    const running = ofSweep(await queue.getJobs(["active"])).length;
    return { waiting, finished, running };
  } finally {
    redis.disconnect();
    await queue.close();
  }
}

/** Removes a queue and every job of it from Redis (tests; clearing old sweeps). */
export async function removeQueue(target: QueueTarget): Promise<void> {
  await pingRedis(target.url);
  const { name, prefix } = names(target);
  const queue = new Queue(name, { connection: { url: target.url, maxRetriesPerRequest: null }, prefix });
  try {
    await queue.obliterate({ force: true });
  } finally {
    await queue.close();
  }
}

export interface WorkerOptions {
  /** Points this worker runs at once. */
  readonly concurrency: number;
  /** How long a point's lock lasts without renewal (BullMQ renews it at half). Default DEFAULT_LOCK_MS (10,000 ms). */
  readonly lockDurationMs?: number;
  /** How often this worker looks for points whose worker died. Default DEFAULT_STALLED_MS (5,000 ms). */
  readonly stalledIntervalMs?: number;
  /** How often a point may stall (its worker died) before it fails. Default 3. */
  readonly maxStalledCount?: number;
  /** Called when a point starts, ends, or is skipped (its sweep was cancelled). */
  readonly onPoint?: (event: {
    readonly kind: "started" | "done" | "skipped";
    readonly jobId: string;
    readonly attempt: number;
    readonly row?: SweepRow;
    readonly reason?: string;
  }) => void;
}

/**
 * Takes points from the queue and runs them with `run` (which never throws for a bad point; its
 * row says so). A worker killed mid-point leaves its job locked until the lock expires; another
 * worker's stalled-job check then puts it back on the queue, and only one completion counts.
 */
export async function startWorker(
  target: QueueTarget,
  run: (task: PointTask) => Promise<SweepRow>,
  options: WorkerOptions,
): Promise<{ close(): Promise<void> }> {
  await pingRedis(target.url);
  const { name, prefix } = names(target);
  const client = new Redis(target.url, { maxRetriesPerRequest: null });
  const isCancelledBy = async (sweepId: string) => (await client.exists(cancelKey(target, sweepId))) === 1;
  const worker = new Worker<PointJob, SweepRow>(
    name,
    async (job) => {
      const sweepId = job.data.sweepId;
      if (await isCancelledBy(sweepId)) {
        const reason = `sweep ${sweepId} was cancelled (kvsim sweep --cancel)`;
        options.onPoint?.({ kind: "skipped", jobId: job.id ?? "?", attempt: job.attemptsStarted, reason });
        return badRow(job.data.task.point, job.data.task.settings, "failed", `skipped: ${reason}`, 0);
      }
      options.onPoint?.({ kind: "started", jobId: job.id ?? "?", attempt: job.attemptsStarted });
      const row = await run(job.data.task);
      options.onPoint?.({ kind: "done", jobId: job.id ?? "?", attempt: job.attemptsStarted, row });
      return row;
    },
    {
      connection: { url: target.url, maxRetriesPerRequest: null },
      prefix,
      concurrency: options.concurrency,
      lockDuration: options.lockDurationMs ?? DEFAULT_LOCK_MS,
      stalledInterval: options.stalledIntervalMs ?? DEFAULT_STALLED_MS,
      maxStalledCount: options.maxStalledCount ?? 3,
    },
  );
  await worker.waitUntilReady();
  return {
    close: async () => {
      await worker.close();
      client.disconnect();
    },
  };
}
