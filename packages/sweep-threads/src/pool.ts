import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Piscina } from "piscina";
import type { SweepRow } from "@kvsim/sweep";
import { TASKS_PER_THREAD, WORKER_LOADED, type WorkerTask } from "./protocol.js";

/** A worker threads' entry module: a file URL or path (see `pointWorker`). */
export type WorkerEntry = string | URL;

const hrefOf = (entry: WorkerEntry): string => (entry instanceof URL ? entry.href : entry.startsWith("file:") ? entry : pathToFileURL(entry).href);

/**
 * How a thread loads `entry`. An entry in TypeScript (tests running from sources) runs under tsx's
 * loader, resolved from the entry's own directory, with the `@kvsim/source` export condition, so
 * the threads run the same sources as the tests.
 */
function threadLoad(entry: WorkerEntry): { filename: string; execArgv: string[] } {
  const filename = hrefOf(entry);
  if (!filename.endsWith(".ts")) return { filename, execArgv: [] };
  const tsx = createRequire(fileURLToPath(filename)).resolve("tsx");
  return { filename, execArgv: ["--import", pathToFileURL(tsx).href, "--conditions=@kvsim/source"] };
}

/** A pool of worker threads running points (piscina), counting the threads that have loaded. */
export class PointPool {
  readonly pool: Piscina<WorkerTask, SweepRow | null>;
  /** The entry module's URL. */
  readonly entry: string;
  /** Threads that have loaded their module and can take points. */
  loaded = 0;
  private readonly listeners: (() => void)[] = [];

  constructor(
    entry: WorkerEntry,
    readonly threads: number,
    readonly tasksPerThread: number,
  ) {
    const { filename, execArgv } = threadLoad(entry);
    this.entry = filename;
    // A 64 MiB code range instead of V8's default reservation of several hundred: a point's code
    // needs a few MiB, and each thread then reserves about 160 MiB of address space, not 600.
    this.pool = new Piscina<WorkerTask, SweepRow | null>({
      filename,
      execArgv,
      minThreads: threads,
      maxThreads: threads,
      concurrentTasksPerWorker: tasksPerThread,
      idleTimeout: 1000,
      resourceLimits: { codeRangeSizeMb: 64 },
    });
    this.pool.on("message", (m: unknown) => {
      if (m !== WORKER_LOADED) return;
      this.loaded = Math.min(threads, this.loaded + 1);
      for (const l of this.listeners) l();
    });
    // A thread that fails to start rejects the points handed to it (none before it has loaded);
    // the pool's own error event carries nothing more.
    this.pool.on("error", () => undefined);
  }

  /** Calls `listener` each time a thread has loaded. */
  onLoaded(listener: () => void): void {
    this.listeners.push(listener);
  }

  run(task: WorkerTask): Promise<SweepRow | null> {
    return this.pool.run(task);
  }

  destroy(): Promise<void> {
    return this.pool.destroy();
  }
}

let early: PointPool | undefined;
let claimed = false;

/** Starts a local sweep's threads early (`prestartThreads`); nothing once a sweep has asked for its pool. */
export function prestartPool(threads: number, entry: WorkerEntry): void {
  if (claimed || early !== undefined || threads < 1) return;
  early = new PointPool(entry, threads, TASKS_PER_THREAD);
}

/** The pool started early, if it has `threads` threads on `entry`; another one is destroyed. */
export function takePrestartedPool(threads: number, entry: WorkerEntry): PointPool | undefined {
  claimed = true;
  const pool = early;
  early = undefined;
  if (pool === undefined || (pool.threads === threads && pool.entry === hrefOf(entry))) return pool;
  void pool.destroy();
  return undefined;
}

/** Destroys a pool started early that no sweep took. */
export async function discardPrestartedPool(): Promise<void> {
  claimed = true;
  const pool = early;
  early = undefined;
  await pool?.destroy();
}
