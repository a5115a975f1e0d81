import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { stringify as csvStringify } from "csv-stringify/sync";
import { formatIssue, InputError, parseDocumentText, parseProfile, type LocatedDocument, type Spec } from "@kvsim/profile-schema";
import {
  applyOverrides,
  badRow,
  checkGridPaths,
  expandGrid,
  gpuCount,
  parseGrid,
  parseSla,
  parseSpecPath,
  pointTask,
  rowsTable,
  runSweep,
  SearchSetupError,
  SlaSyntaxError,
  slaPercentiles,
  SpecInputError,
  DEFAULT_RATE_TOLERANCE,
  type Grid,
  type GridPoint,
  type PointExecutor,
  type PointTask,
  type SearchOutcome,
  type SlaTerm,
  type SpecOverride,
  type SweepRow,
  type TraceRef,
} from "@kvsim/sweep";
import { renderSweepHtml, type ChartAssets } from "@kvsim/report-html";
import { chartAssets } from "../html-assets.js";
import { checkOutputs, InvalidInputs, numberOption, readText, regularFileSize, UsageError, writeOutputs } from "../io.js";
import { checkSpec, fromInputError, printWarnings, SpecCheckCache, type CheckedSpec } from "../spec-check.js";
import { defaultSpecPath } from "../replay/examples.js";
import { parseSetFlags, readDocument, type StdinIo } from "../spec-input.js";
import { defaultJobs, localExecutor } from "./executor.js";
import { checkedHash } from "./host.js";
import { localJobs } from "./jobs.js";
import { createSweepProgress } from "./progress.js";
import { formatSearchTable, formatSweepTable } from "./table.js";

export interface SweepOptions {
  readonly spec?: string;
  readonly set?: readonly string[];
  readonly grid?: string;
  readonly out?: string;
  readonly csv?: string;
  readonly html?: string;
  readonly jobs?: string;
  readonly format: string;
  readonly force: boolean;
  /** No progress bar. */
  readonly quiet?: boolean;
  readonly find?: string;
  readonly sla?: string;
  readonly tolerance?: string;
  readonly maxWorkers?: string;
  readonly queue?: string;
  readonly sweepId?: string;
  readonly queueName?: string;
  readonly queuePrefix?: string;
  /** `--cancel --sweep-id <id> --queue <url>`: cancel a queued sweep instead of running one. */
  readonly cancel?: boolean;
}

/**
 * Turns a point's settings into runnable tasks. Each point's spec goes through the same checks as
 * `kvsim replay` (profiles, the P/D gate, what the ranks refuse); trace hashes are taken once per file.
 */
class TaskBuilder {
  private readonly traces = new Map<string, Promise<string>>();
  /** Profiles and rank checks shared by the points: each profile file is read once per sweep. */
  private readonly cache = new SpecCheckCache();

  constructor(
    private readonly doc: LocatedDocument,
    private readonly base: readonly SpecOverride[],
    private readonly percentiles: readonly number[],
  ) {}

  /** The checked spec of a point (InputError when its settings make it invalid). */
  check(overrides: readonly SpecOverride[]): CheckedSpec {
    return checkSpec(this.doc, [...this.base, ...overrides], this.cache);
  }

  /** The spec of a point (InputError or InvalidInputs when it is invalid). */
  spec(overrides: readonly SpecOverride[]): Spec {
    const checked = this.check(overrides);
    if (checked.problems.length > 0) throw new InvalidInputs(checked.problems);
    return checked.spec;
  }

  /** The task of a point, or its refused row when its spec, a profile or its trace is bad. */
  async task(point: number, settings: Readonly<Record<string, unknown>>, overrides: readonly SpecOverride[]): Promise<PointTask | SweepRow> {
    try {
      const { spec, profiles, problems } = this.check(overrides);
      if (problems.length > 0) return badRow(point, settings, "refused", problems.map((p) => formatIssue(p.file, p.issue)).join("; "), 0);
      let trace: TraceRef | null = null;
      const path = spec.workload.trace;
      if (path !== undefined) {
        let hash = this.traces.get(path);
        if (hash === undefined) {
          // Through this thread's hash cache: the points run here and the worker threads (handed it) need not hash the file again.
          hash = checkedHash(path);
          this.traces.set(path, hash);
        }
        trace = { path, sha256: await hash };
      }
      return pointTask(point, settings, spec, profiles, trace, this.percentiles);
    } catch (e) {
      if (e instanceof InputError) return badRow(point, settings, "refused", e.message, 0);
      throw e;
    }
  }
}

function parseOptions(opts: SweepOptions) {
  if (opts.format !== "table" && opts.format !== "json") throw new UsageError(`--format must be table or json, got "${opts.format}"`);
  if (opts.find !== undefined && opts.find !== "max-rate" && opts.find !== "min-workers")
    throw new UsageError(`--find must be max-rate or min-workers, got "${opts.find}"`);
  if (opts.find === undefined && opts.grid === undefined) throw new UsageError("kvsim sweep needs --grid <file> (or --find max-rate|min-workers with --sla)");
  if (opts.find !== undefined && opts.sla === undefined) throw new UsageError(`--find ${opts.find} needs --sla, e.g. --sla p90_ttft_ms<=2000,p99_itl_ms<=50`);
  if (opts.find === undefined && opts.tolerance !== undefined) throw new UsageError("--tolerance applies to --find max-rate");
  if (opts.find === undefined && opts.maxWorkers !== undefined) throw new UsageError("--max-workers applies to --find min-workers");
  if (opts.queue === undefined && (opts.sweepId !== undefined || opts.queueName !== undefined || opts.queuePrefix !== undefined)) {
    throw new UsageError("--sweep-id, --queue-name and --queue-prefix apply to --queue");
  }
  let sla: SlaTerm[] | undefined;
  try {
    sla = opts.sla === undefined ? undefined : parseSla(opts.sla);
  } catch (e) {
    if (e instanceof SlaSyntaxError) throw new UsageError(`--sla: ${e.message}`);
    throw e;
  }
  const jobs = opts.jobs === undefined ? defaultJobs() : numberOption("--jobs", opts.jobs, { integer: true, min: 1 });
  const tolerance = opts.tolerance === undefined ? DEFAULT_RATE_TOLERANCE : numberOption("--tolerance", opts.tolerance, { exclusiveMin: 0 });
  if (tolerance >= 1) throw new UsageError(`--tolerance is relative (0.01 is 1%) and must be below 1, got ${tolerance}`);
  const maxWorkers = opts.maxWorkers === undefined ? 16 : numberOption("--max-workers", opts.maxWorkers, { integer: true, min: 1 });
  if (maxWorkers > 1024) throw new UsageError(`--max-workers must be at most 1024, got ${maxWorkers}`);
  return { sla, jobs, tolerance, maxWorkers };
}

/** The flags a cancel takes: where the queue is and which sweep; nothing that runs points. */
const CANCEL_ALONE = ["spec", "set", "grid", "out", "csv", "html", "jobs", "find", "sla", "tolerance", "maxWorkers"] as const;

/**
 * `kvsim sweep --cancel --sweep-id <id> --queue <url>`: removes the sweep's points from the queue
 * (those no worker took, and the finished ones), and marks it cancelled so workers skip any of its
 * points they take; the points running now finish on their workers.
 */
async function cancelCommand(io: StdinIo, opts: SweepOptions): Promise<number> {
  if (opts.sweepId === undefined || opts.queue === undefined)
    throw new UsageError("--cancel needs --sweep-id <id> and --queue <url> (the sweep's id and queue, as kvsim sweep --queue printed them)");
  const extra = CANCEL_ALONE.filter((k) => opts[k] !== undefined).map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
  if (extra.length > 0) throw new UsageError(`--cancel runs nothing: drop ${extra.join(", ")}`);
  const { cancelSweep, checkQueueUrl, QueueError, SWEEP_ID } = await import("@kvsim/sweep-queue");
  if (!SWEEP_ID.test(opts.sweepId)) throw new UsageError(`--sweep-id must be 1 to 64 letters, digits, _ or -, got "${opts.sweepId}"`);
  let outcome;
  try {
    checkQueueUrl(opts.queue);
    outcome = await cancelSweep(
      {
        url: opts.queue,
        ...(opts.queueName === undefined ? {} : { queueName: opts.queueName }),
        ...(opts.queuePrefix === undefined ? {} : { prefix: opts.queuePrefix }),
      },
      opts.sweepId,
    );
  } catch (e) {
    if (e instanceof QueueError) throw new UsageError(e.message);
    throw e;
  }
  const points = (n: number) => `${n} point${n === 1 ? "" : "s"}`;
  if (opts.format === "json") {
    io.out(
      `${JSON.stringify({ sweep_id: opts.sweepId, cancelled: true, removed_waiting: outcome.waiting, removed_finished: outcome.finished, running: outcome.running }, null, 2)}\n`,
    );
  } else {
    io.out(
      `sweep ${opts.sweepId} cancelled on ${opts.queue}: ${points(outcome.waiting)} no worker had taken and ${points(outcome.finished)} finished removed; ${points(outcome.running)} running (their workers finish them); workers skip any other point of it (running --sweep-id ${opts.sweepId} again takes the cancel back)\n`,
    );
  }
  return 0;
}

/** Opens the executor: the queue, a pool of worker threads, or this thread for --jobs 1 (kvsim sweep and kvsim plan). */
export async function openExecutor(
  io: StdinIo,
  opts: Pick<SweepOptions, "queue" | "sweepId" | "queueName" | "queuePrefix" | "jobs" | "find">,
  asked: number,
  points?: number,
): Promise<{ executor: PointExecutor; sweepId?: string; describe: string }> {
  if (opts.queue === undefined) {
    // No more jobs than points, cores and the address-space limit allow: each job past the
    // first is a worker thread, which costs its memory even when it has nothing to run.
    const { jobs, why } = localJobs(asked, points);
    const capped = why !== undefined && opts.jobs !== undefined ? `; --jobs ${asked} capped by ${why}` : "";
    // A grid starts its worker threads now, so they load while the inputs are read; a search
    // starts them when a second point waits (a single max-rate search probes one rate at a time).
    return { executor: localExecutor(jobs, { eager: opts.find === undefined }), describe: `${jobs} job${jobs === 1 ? "" : "s"}${capped}` };
  }
  // BullMQ loads only for --queue: nothing else needs Redis.
  const { SweepQueue, checkQueueUrl, QueueError, SWEEP_ID } = await import("@kvsim/sweep-queue");
  const sweepId = opts.sweepId ?? randomBytes(6).toString("hex");
  if (!SWEEP_ID.test(sweepId)) throw new UsageError(`--sweep-id must be 1 to 64 letters, digits, _ or -, got "${sweepId}"`);
  let queue;
  try {
    checkQueueUrl(opts.queue);
    queue = await SweepQueue.open({
      url: opts.queue,
      ...(opts.queueName === undefined ? {} : { queueName: opts.queueName }),
      ...(opts.queuePrefix === undefined ? {} : { prefix: opts.queuePrefix }),
    });
  } catch (e) {
    if (e instanceof QueueError) throw new UsageError(e.message);
    throw e;
  }
  const where = `--queue ${opts.queue}${opts.queueName === undefined ? "" : ` --queue-name ${opts.queueName}`}${opts.queuePrefix === undefined ? "" : ` --queue-prefix ${opts.queuePrefix}`}`;
  io.err(`sweep ${sweepId} on ${opts.queue} (restart it with --sweep-id ${sweepId}); start workers with: kvsim worker ${where}\n`);
  return {
    executor: {
      parallelism: Number.POSITIVE_INFINITY,
      run: (task) => queue.run(sweepId, task),
      close: async () => {
        io.err(`sweep ${sweepId}: ${queue.counts.added} points added to the queue, ${queue.counts.reused} found there from before\n`);
        await queue.close();
      },
    },
    sweepId,
    describe: `queue ${opts.queue}, sweep ${sweepId}`,
  };
}

/**
 * `kvsim sweep`: runs every point of a grid over a base spec (in this thread, a pool of worker
 * threads, or on a BullMQ queue), or searches for the highest rate or the fewest workers meeting
 * an SLA. Output files are checked before anything runs and written whole after it.
 */
export async function sweepCommand(io: StdinIo, opts: SweepOptions): Promise<number> {
  if (opts.cancel === true) return cancelCommand(io, opts);
  const { sla, jobs, tolerance, maxWorkers } = parseOptions(opts);
  checkOutputs(
    [
      { flag: "--out", path: opts.out },
      { flag: "--csv", path: opts.csv },
      { flag: "--html", path: opts.html },
    ],
    opts.force,
  );
  // The charting library is read before any point runs: a broken install fails first.
  const assets = opts.html === undefined ? undefined : chartAssets();
  // The grid first (a small file): a local grid sweep starts no more threads than it has points.
  const grid = opts.grid === undefined ? undefined : parseGrid(parseDocumentText(readText(opts.grid), opts.grid));
  // The local executor opens next: its worker threads load while the spec and its inputs are read.
  const local = opts.queue === undefined ? await openExecutor(io, opts, jobs, opts.find === undefined ? grid?.size : undefined) : undefined;
  try {
    return await sweepWith(io, opts, { sla, jobs, tolerance, maxWorkers, assets, local, grid });
  } finally {
    await local?.executor.close();
  }
}

async function sweepWith(
  io: StdinIo,
  opts: SweepOptions,
  {
    sla,
    jobs,
    tolerance,
    maxWorkers,
    assets,
    local,
    grid,
  }: ReturnType<typeof parseOptions> & { assets: ChartAssets | undefined; local: Awaited<ReturnType<typeof openExecutor>> | undefined; grid: Grid | undefined },
): Promise<number> {
  const sets = parseSetFlags(opts.set);
  const doc = await readDocument(io, opts.spec ?? defaultSpecPath());
  const builder = new TaskBuilder(doc, sets, sla === undefined ? [] : slaPercentiles(sla));
  try {
    builder.spec([]); // the base spec must be valid on its own, as for kvsim replay
    printWarnings(io, builder.check([]).warnings); // a deprecated key, once for the base spec
  } catch (e) {
    if (e instanceof SpecInputError) throw new InvalidInputs(fromInputError(e));
    throw e;
  }
  if (grid !== undefined) checkGridPaths(grid, applyOverrides(doc.value, sets));
  // The base spec must be valid on its own, its trace readable, as for kvsim replay: a missing
  // trace refuses the sweep (exit 2) rather than every point of it (exit 0).
  const baseTrace = builder.spec([]).workload.trace;
  if (baseTrace !== undefined) regularFileSize(baseTrace, "the trace");
  const points: GridPoint[] = grid === undefined ? [{ index: 0, settings: {}, overrides: [] }] : expandGrid(grid);

  const started = performance.now();
  const { executor, sweepId, describe } = local ?? (await openExecutor(io, opts, jobs));
  let rows: SweepRow[];
  let searches: SearchOutcome[] | undefined;
  const progress =
    opts.find === undefined
      ? createSweepProgress(io, points.length, "sweep", opts.quiet === true)
      : createSweepProgress(io, 0, `search (${opts.find})`, opts.quiet === true);
  try {
    ({ rows, searches } = await runSweep({
      points,
      task: (point, settings, overrides) => builder.task(point, settings, overrides),
      executor,
      ...(sla === undefined ? {} : { sla }),
      ...(opts.find === undefined ? {} : { find: opts.find as "max-rate" | "min-workers", spec: (overrides) => builder.spec(overrides) }),
      tolerance,
      maxWorkers,
      profileTp,
      progress,
    }));
  } catch (e) {
    if (e instanceof SearchSetupError) throw new UsageError(e.message);
    throw e;
  } finally {
    progress.stop();
    // The local executor is closed by the caller, which opened it.
    if (local === undefined) await executor.close();
  }
  const wallMs = performance.now() - started;

  const outputs: { path: string; text: string; flag: string }[] = [];
  if (opts.out !== undefined) outputs.push({ path: opts.out, text: rows.map((r) => `${JSON.stringify(r)}\n`).join(""), flag: "--out" });
  if (opts.csv !== undefined) {
    const t = rowsTable(rows);
    outputs.push({ path: opts.csv, text: csvStringify([t.columns, ...t.cells.map((r) => r.map((c) => c ?? ""))]), flag: "--csv" });
  }
  if (opts.html !== undefined && assets !== undefined) {
    outputs.push({ path: opts.html, text: sweepHtml(assets, rows, builder, { sla, find: opts.find, searches, describe, wallMs }), flag: "--html" });
  }
  writeOutputs(outputs, opts.force);
  const summary = {
    points: rows.length,
    ok: rows.filter((r) => r.status === "ok").length,
    refused: rows.filter((r) => r.status === "refused").length,
    failed: rows.filter((r) => r.status === "failed").length,
  };
  if (opts.format === "json") {
    const out = {
      ...(sweepId === undefined ? {} : { sweep_id: sweepId }),
      ...summary,
      wall_time_ms: wallMs,
      ...(sla === undefined ? {} : { sla: sla.map((t) => `${t.metric}${t.op}${t.value}`) }),
      ...(searches === undefined ? {} : { find: opts.find, searches: searches.map(({ rows: r, ...s }) => ({ ...s, rows: r })) }),
      rows,
    };
    io.out(`${JSON.stringify(out, null, 2)}\n`);
  } else {
    io.out(
      searches === undefined
        ? formatSweepTable(rows, { describe, wallMs, sla })
        : formatSearchTable(rows, searches, { describe, wallMs, sla: sla!, find: opts.find! }),
    );
  }
  return 0;
}

/** The sweep's HTML page: each row's GPUs come from its spec (workers x TP of each pool). */
function sweepHtml(
  assets: ChartAssets,
  rows: readonly SweepRow[],
  builder: TaskBuilder,
  run: { sla: readonly SlaTerm[] | undefined; find: string | undefined; searches: readonly SearchOutcome[] | undefined; describe: string; wallMs: number },
): string {
  const axes = [...new Set(rows.flatMap((r) => Object.keys(r.settings)))];
  const gpus = rows.map((r) => {
    try {
      const spec = builder.spec(Object.entries(r.settings).map(([k, v]) => ({ path: parseSpecPath(k) ?? k.split("."), value: v, source: `--html (${k})` })));
      return gpuCount(spec, profileTp);
    } catch {
      // A refused point's settings may not make a spec: no GPU count.
      return null;
    }
  });
  const counts = `${rows.length} points (${run.describe}) in ${(run.wallMs / 1000).toFixed(1)} s`;
  return renderSweepHtml({
    assets,
    title: run.find === undefined ? "kvsim sweep" : `kvsim sweep --find ${run.find}`,
    subtitle: [counts],
    rows,
    axes,
    gpus,
    ...(run.sla === undefined ? {} : { sla: run.sla.map((t) => ({ metric: t.metric, op: t.op, value: t.value })) }),
    ...(run.find === "max-rate" || run.find === "min-workers" ? { find: run.find } : {}),
    ...(run.searches === undefined
      ? {}
      : {
          searches: run.searches.map((s) => ({
            variable: s.variable,
            answer: s.answer,
            failing: s.failing ?? null,
            gpus: s.gpus ?? null,
            settings: s.settings,
            rows: s.rows,
          })),
        }),
  });
}

/** TP of a profile given by path, each file read once. */
const tpCache = new Map<string, number>();
function profileTp(ref: string): number {
  let tp = tpCache.get(ref);
  if (tp === undefined) {
    tp = parseProfile(readText(ref), ref).tensor_parallel_size;
    tpCache.set(ref, tp);
  }
  return tp;
}
