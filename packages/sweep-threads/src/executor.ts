import type { PointExecutor, PointTask, SweepRow } from "@kvsim/sweep";
import type { PointPool, WorkerEntry } from "./pool.js";
import { CLAIM_FREE, CLAIM_MAIN, CLAIM_WORKER, TASKS_PER_THREAD } from "./protocol.js";

/**
 * The pool's module, loaded when a pool first starts: piscina is a few dozen CommonJS files, which
 * a sweep in one thread never needs.
 */
const poolModule = () => import("./pool.js");

/**
 * Starts `threads` worker threads on `entry` now, before the program has loaded its own modules
 * (the CLI does for `kvsim sweep --grid ...` on several cores), so they load while the main thread
 * does. The first `threadExecutor` with the same entry, `jobs - 1` threads and this thread running
 * points too takes them; threads of another shape are destroyed then. Does nothing once a sweep
 * has asked for its threads; a pool that cannot load fails when the sweep starts its own.
 */
export function prestartThreads(threads: number, entry: WorkerEntry): void {
  void poolModule().then(
    (m) => {
      m.prestartPool(threads, entry);
    },
    () => undefined,
  );
}

/** Destroys threads started early that no sweep took (the program ended before it ran points). */
export async function discardPrestartedThreads(): Promise<void> {
  await (await poolModule()).discardPrestartedPool();
}

/**
 * Up to `jobs` points at once, every one in a worker thread, one at a time per thread, handed to
 * the threads as they come (a queue worker runs its points so: its event loop stays free to renew
 * the points' locks).
 */
export function threadPoolExecutor(options: { readonly jobs: number; readonly worker: WorkerEntry }): PointExecutor {
  const { jobs, worker } = options;
  const pool = poolModule().then((m) => new m.PointPool(worker, jobs, 1));
  // A pool that cannot start fails each point run on it (and close has nothing to destroy).
  pool.catch(() => undefined);
  return {
    parallelism: jobs,
    run: async (task) => (await (await pool).run({ task }))!,
    close: async () => {
      await (await pool.catch(() => undefined))?.destroy();
    },
  };
}

interface Pending {
  readonly task: PointTask;
  readonly claim: Int32Array;
  readonly resolve: (row: SweepRow) => void;
  readonly reject: (e: unknown) => void;
  /** Answered (by whichever thread finished it first). */
  settled: boolean;
  /** Also run by this thread while a worker thread runs it (the sweep's tail). */
  copied: boolean;
}

export interface ThreadExecutorOptions {
  /** Points run at once. */
  readonly jobs: number;
  /** The worker threads' entry module, which exports `pointWorker(host)` as its default. */
  readonly worker: WorkerEntry;
  /**
   * Runs points in this thread too, one at a time (`inlineExecutor(host)` from `@kvsim/sweep`):
   * `jobs - 1` worker threads then. Without it, every point runs in one of `jobs` worker threads.
   */
  readonly inline?: PointExecutor;
  /** Start the threads now (a grid: they load while the caller reads its inputs), not when a point first waits for one. */
  readonly eager?: boolean;
  /**
   * What this thread knows of a task that saves a worker thread work (a trace's hash already
   * taken, say), handed with the task (structured clone) to `pointWorker`'s `onHint`.
   */
  readonly hint?: (task: PointTask) => unknown;
}

export interface ThreadExecutor extends PointExecutor {
  /**
   * Who answered the points: this thread (taken back and copied ones included) or worker threads
   * (each point is answered once); how many this thread took back before a worker started them,
   * and how many it ran again while a worker ran them (the tail).
   */
  readonly counts: { inline: number; worker: number; takenBack: number; copied: number };
  /** Resolves when a worker thread has loaded (starting the threads if they have not started). */
  workerLoaded(): Promise<void>;
}

/**
 * Up to `jobs` points at once: with `inline`, one in this thread and the others in `jobs - 1`
 * worker threads that share one queue with it.
 *
 * * This thread is otherwise idle during a local sweep, so it runs points too, from the first
 *   moment; each worker thread pays its own loading and JIT warm-up.
 * * The threads start when `eager` (a grid: they load while the caller reads its inputs), or
 *   else when a point first waits for a thread (so a search that probes one point at a time
 *   never starts one). A worker thread gets points only once it has loaded.
 * * A worker thread is handed its next point while it runs one; until it starts that point, this
 *   thread, when idle, may take it back (a shared flag decides who runs it). So no point waits on
 *   a thread that is still loading or busy while another thread is idle, and a sweep too small to
 *   pay for the threads runs as fast as in this thread alone.
 * * At the tail, when nothing is left to take, this thread runs a point a worker thread is still
 *   running (a worker's first points run cold, several times slower than this thread's warm
 *   ones), and the first answer counts: the rows are the same either way, and the sweep never
 *   waits on a slow last point in another thread.
 *
 * The same `runPoint` runs everywhere, so the rows do not depend on where a point ran (as long as
 * the worker entry's host reads what `inline`'s does).
 */
export function threadExecutor(options: ThreadExecutorOptions): ThreadExecutor {
  const { jobs, worker, inline, hint } = options;
  const counts = { inline: 0, worker: 0, takenBack: 0, copied: 0 };
  if (jobs === 1 && inline !== undefined) {
    return { ...inline, counts, run: (task) => (counts.inline++, inline.run(task)), workerLoaded: () => Promise.resolve() };
  }
  const threads = inline === undefined ? jobs : jobs - 1;
  const loadedWaiters: (() => void)[] = [];
  let pool: PointPool | undefined;
  let inlineBusy = false;
  let inPool = 0;
  const waiting: Pending[] = [];
  /** Handed to the pool, not yet answered: the ones still free may be taken back. */
  const handed: Pending[] = [];

  /** The pool starting (its module loading); it takes points once it is set and a thread has loaded. */
  let starting: Promise<PointPool> | undefined;
  const start = (): Promise<PointPool> => {
    starting ??= poolModule().then((m) => {
      // A grid's threads may have started before the caller loaded (prestartThreads).
      const p = (inline === undefined ? undefined : m.takePrestartedPool(threads, worker)) ?? new m.PointPool(worker, threads, TASKS_PER_THREAD);
      pool = p;
      p.onLoaded(() => {
        for (const w of loadedWaiters.splice(0)) w();
        pump();
      });
      return p;
    });
    return starting;
  };

  const answer = (p: Pending, row: SweepRow, by: "inline" | "worker") => {
    if (p.settled) return;
    p.settled = true;
    counts[by]++;
    p.resolve(row);
  };
  const fail = (p: Pending, e: unknown) => {
    if (p.settled) return;
    p.settled = true;
    p.reject(e);
  };

  const runInline = (here: PointExecutor, p: Pending) => {
    inlineBusy = true;
    here
      .run(p.task)
      .then(
        (row) => {
          answer(p, row, "inline");
        },
        (e: unknown) => {
          fail(p, e);
        },
      )
      .finally(() => {
        inlineBusy = false;
        pump();
        // Taking back or copying waits until the sweep has queued its next points (they come a
        // few promise turns after an answer): only a thread with nothing queued does either.
        setImmediate(pumpIdle);
      });
  };

  /** The point handed last to the pool that no worker thread has started, taken back. */
  const takeBack = (): Pending | undefined => {
    for (let i = handed.length - 1; i >= 0; i--) {
      const p = handed[i]!;
      if (Atomics.compareExchange(p.claim, 0, CLAIM_FREE, CLAIM_MAIN) === CLAIM_FREE) {
        handed.splice(i, 1);
        counts.takenBack++;
        return p;
      }
    }
    return undefined;
  };

  const toPool = (p: Pending) => {
    inPool++;
    handed.push(p);
    const done = () => {
      inPool--;
      const i = handed.indexOf(p);
      if (i >= 0) handed.splice(i, 1);
    };
    const known = hint?.(p.task);
    pool!.run({ task: p.task, claim: p.claim, ...(known === undefined ? {} : { hint: known }) }).then(
      (row) => {
        done();
        // null: this thread took the point back and answers it.
        if (row !== null) answer(p, row, "worker");
        pump();
        setImmediate(pumpIdle);
      },
      (e: unknown) => {
        done();
        // A point taken back or copied is answered here.
        if (Atomics.load(p.claim, 0) !== CLAIM_MAIN && !p.copied) fail(p, e);
        pump();
      },
    );
  };

  /** This thread idle with nothing queued: take back a point no worker has started, else copy one a worker runs. */
  function pumpIdle(): void {
    if (inline === undefined || inlineBusy || waiting.length > 0) return;
    const back = takeBack();
    if (back !== undefined) {
      runInline(inline, back);
      return;
    }
    const running = handed.find((p) => !p.settled && !p.copied && Atomics.load(p.claim, 0) === CLAIM_WORKER);
    if (running === undefined) return;
    running.copied = true;
    counts.copied++;
    runInline(inline, running);
  }

  function pump(): void {
    for (;;) {
      if (inline !== undefined && !inlineBusy && waiting.length > 0) {
        runInline(inline, waiting.shift()!);
        continue;
      }
      if (waiting.length > 0 && pool !== undefined && inPool < pool.loaded * TASKS_PER_THREAD) {
        toPool(waiting.shift()!);
        continue;
      }
      break;
    }
    // Without this thread, threads that cannot start fail the points waiting for them.
    if (waiting.length > 0)
      void start().catch((e: unknown) => {
        if (inline === undefined) for (const p of waiting.splice(0)) fail(p, e);
      });
  }

  if (options.eager === true) void start().catch(() => undefined); // the points then all run in this thread
  return {
    counts,
    async workerLoaded() {
      const p = await start();
      if (p.loaded > 0) return;
      await new Promise<void>((resolve) => loadedWaiters.push(resolve));
    },
    parallelism: jobs,
    // One in this thread, TASKS_PER_THREAD per worker thread, and one waiting for whichever frees first.
    queueDepth: (inline === undefined ? 0 : 1) + threads * TASKS_PER_THREAD + 1,
    run(task) {
      return new Promise<SweepRow>((resolve, reject) => {
        waiting.push({ task, claim: new Int32Array(new SharedArrayBuffer(4)), resolve, reject, settled: false, copied: false });
        pump();
      });
    },
    close: async () => {
      await (await starting?.catch(() => undefined))?.destroy();
      await inline?.close();
    },
  };
}
