import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Piscina } from "piscina";
import type { SweepRow } from "@kvsim/sweep";
import { TASKS_PER_THREAD, WORKER_LOADED, type WorkerTask } from "./worker-protocol.js";

/**
 * The worker thread's entry: dist/point-worker.js beside the built CLI. Run from source (tests),
 * this file is a .ts module, and the thread gets tsx's loader and the source export condition so
 * it runs the same TypeScript sources as the tests.
 */
function workerEntry(): { filename: string; execArgv: string[] } {
  const here = import.meta.url;
  if (!here.endsWith(".ts")) return { filename: new URL("./point-worker.js", here).href, execArgv: [] };
  const tsx = createRequire(here).resolve("tsx");
  return { filename: new URL("./point-worker.ts", here).href, execArgv: ["--import", pathToFileURL(tsx).href, "--conditions=@kvsim/source"] };
}

/** A pool of worker threads running points (piscina), counting the threads that have loaded. */
export class PointPool {
  readonly pool: Piscina<WorkerTask, SweepRow | null>;
  /** Threads that have loaded their module and can take points. */
  loaded = 0;
  private readonly listeners: (() => void)[] = [];

  constructor(
    readonly threads: number,
    readonly tasksPerThread: number,
  ) {
    const { filename, execArgv } = workerEntry();
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

/**
 * Starts a local sweep's worker threads before the CLI has even loaded its own modules (cli.ts
 * calls it for `kvsim sweep --grid ...` on several cores), so the threads load while the main
 * thread does. Does nothing once a sweep has asked for its pool.
 */
export function prestartPool(threads: number): void {
  if (claimed || early !== undefined || threads < 1) return;
  early = new PointPool(threads, TASKS_PER_THREAD);
}

/** The pool started early, if it has `threads` threads; one of another size is destroyed. */
export function takePrestartedPool(threads: number): PointPool | undefined {
  claimed = true;
  const pool = early;
  early = undefined;
  if (pool === undefined || pool.threads === threads) return pool;
  void pool.destroy();
  return undefined;
}

/** Destroys a pool started early that no sweep took (the command failed before it ran points). */
export async function discardPrestartedPool(): Promise<void> {
  claimed = true;
  const pool = early;
  early = undefined;
  await pool?.destroy();
}
