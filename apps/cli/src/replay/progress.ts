import { SingleBar } from "cli-progress";
import type { CliIo } from "../io.js";

/** A progress display: `update` as the replay advances, `stop` before printing results. */
export interface Progress {
  update(fraction: number, terminal: number, nowMs: number): void;
  stop(): void;
}

const NONE: Progress = { update: () => undefined, stop: () => undefined };

/**
 * A progress bar on stderr, drawn only when stderr is a terminal (never in pipes, files or tests).
 * It writes through `io.err`, so the CLI's injected output is the only sink.
 */
export function createProgress(io: CliIo): Progress {
  if (!io.stderrIsTTY) return NONE;
  const stream = {
    isTTY: true,
    columns: process.stderr.columns,
    write(text: string): boolean {
      io.err(text);
      return true;
    },
  };
  const bar = new SingleBar({
    stream: stream as unknown as NodeJS.WritableStream,
    format: "replay [{bar}] {percentage}% | {terminal} requests done | {virtual} s virtual",
    hideCursor: true,
    clearOnComplete: true,
    fps: 10,
  });
  bar.start(1000, 0, { terminal: 0, virtual: "0.0" });
  return {
    update(fraction, terminal, nowMs) {
      bar.update(Math.round(Math.min(1, Math.max(0, fraction)) * 1000), { terminal, virtual: (nowMs / 1000).toFixed(1) });
    },
    stop() {
      bar.stop();
    },
  };
}
