import * as nodeModule from "node:module";
import { sweepThreadsToPrestart } from "./sweep/prestart.js";
import { pointWorkerEntry } from "./sweep/worker-entry.js";

// Node's compile cache for the modules loaded below (main.js and its chunks: nearly all of the
// CLI): their compiled bytecode is kept on disk (NODE_COMPILE_CACHE, else node-compile-cache in
// the system's temporary folder) and reused by the next run, which then skips parsing and
// compiling them: about 40-55 ms (9-13%) less wall time for `kvsim replay` on the bundled example
// (docs/design/performance.md §9). It changes no result; NODE_DISABLE_COMPILE_CACHE=1 turns it off,
// and a folder that cannot be written only leaves the cache off. Read off the namespace: a Node
// without it (before 22.1, which the packed CLI's bin refuses anyway) runs on without the cache
// instead of failing to link.
(nodeModule as { enableCompileCache?: () => unknown }).enableCompileCache?.();

const argv = process.argv.slice(2);
// A local grid sweep on several cores starts its worker threads now, so they load while this
// thread loads the CLI's modules (see @kvsim/sweep-threads); no other command loads the pool's code.
const threads = sweepThreadsToPrestart(argv);
const pool = threads > 0 ? import("@kvsim/sweep-threads") : undefined;
void pool?.then(
  (m) => {
    m.prestartThreads(threads, pointWorkerEntry());
  },
  () => undefined, // the sweep reports a broken install when it starts its own pool
);
const { runCli } = await import("./main.js");
try {
  process.exitCode = await runCli(argv);
} finally {
  await pool?.then(
    (m) => m.discardPrestartedThreads(),
    () => undefined,
  );
}
