import { sweepThreadsToPrestart } from "./sweep/prestart.js";
import { pointWorkerEntry } from "./sweep/worker-entry.js";

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
