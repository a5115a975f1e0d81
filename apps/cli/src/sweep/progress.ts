import { SingleBar } from "cli-progress";
import type { CliIo } from "../io.js";
import { progressStream } from "../progress-stream.js";

/** Progress over points: `done` after each row; `stop` before printing results. */
export interface SweepProgress {
  done(failed: boolean): void;
  /** A search does not know its total in advance: it grows as it goes. */
  setTotal(total: number): void;
  stop(): void;
}

const NONE: SweepProgress = { done: () => undefined, setTotal: () => undefined, stop: () => undefined };

/** One bar over points on stderr (done, failed, elapsed, ETA), drawn only when stderr is a terminal and not `quiet`. */
export function createSweepProgress(io: CliIo, total: number, label = "sweep", quiet = false): SweepProgress {
  if (!io.stderrIsTTY || quiet) return NONE;
  const bar = new SingleBar({
    stream: progressStream(io),
    format: `${label} [{bar}] {value}/{total} points | {failed} refused or failed | elapsed {duration_formatted} | ETA {eta_formatted}`,
    hideCursor: true,
    clearOnComplete: true,
    etaBuffer: 20,
    fps: 5,
  });
  let failed = 0;
  let value = 0;
  bar.start(total, 0, { failed });
  return {
    done(bad) {
      if (bad) failed++;
      bar.update(++value, { failed });
    },
    setTotal(t) {
      bar.setTotal(t);
    },
    stop() {
      bar.stop();
    },
  };
}
