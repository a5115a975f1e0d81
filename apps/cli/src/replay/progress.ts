import { SingleBar } from "cli-progress";
import type { CliIo } from "../io.js";
import { progressStream } from "../progress-stream.js";

/** A progress display: `update` as the replay advances, `read` as trace records are read, `stop` before printing results. */
export interface Progress {
  /** Whether anything is drawn (the replay asks for progress after every request only then). */
  readonly active: boolean;
  update(fraction: number, terminal: number, nowMs: number): void;
  /** Trace requests read so far (the trace is parsed as the replay goes). */
  read(requests: number, fraction: number): void;
  stop(): void;
}

const NONE: Progress = { active: false, update: () => undefined, read: () => undefined, stop: () => undefined };

/**
 * The done share of a trace replay: the share of the file read times the share of the requests
 * read so far that finished. A trace small enough to be read at once then shows finished over
 * total requests, instead of jumping to 100% when its bytes are in.
 */
export function traceFraction(bytesRead: number, size: number, read: number, terminal: number): number {
  if (size <= 0 || read <= 0) return 0;
  return Math.min(1, bytesRead / size) * Math.min(1, terminal / read);
}

/** What one progress line shows. */
export interface ProgressState {
  /** Done share of the run, 0 to 1: requests finished of a synthetic workload, bytes read of a trace. */
  readonly fraction: number;
  /** Requests finished (completed, rejected or failed). */
  readonly terminal: number;
  /** The total when known (a synthetic workload); a trace shows the share of it read. */
  readonly totalRequests: number | undefined;
  /** A trace's requests read so far (undefined for a synthetic workload). */
  readonly read?: number;
  readonly virtualMs: number;
  readonly elapsedMs: number;
}

/** 75 s as 1:15, an hour and more as 1:02:05. */
export function clock(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const two = (n: number) => String(n).padStart(2, "0");
  return s >= 3600 ? `${Math.floor(s / 3600)}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}` : `${Math.floor(s / 60)}:${two(s % 60)}`;
}

const int = (v: number) => v.toLocaleString("en-US", { maximumFractionDigits: 0 });

/**
 * One progress line fitting `columns`: the requests done (of the total, or the share of the trace
 * read), the virtual time, the elapsed time and the ETA. The bar takes what the text leaves (5 to
 * 40 cells); on a narrow terminal the virtual time, then the elapsed time, are dropped so the line
 * is never cut. The ETA extrapolates the elapsed time by the done share (`--` before any is done).
 */
export function progressLine(s: ProgressState, columns: number): string {
  const f = Math.min(1, Math.max(0, Number.isFinite(s.fraction) ? s.fraction : 0));
  const done =
    s.totalRequests !== undefined
      ? `${int(s.terminal)}/${int(s.totalRequests)} requests`
      : s.read === undefined
        ? `${Math.floor(f * 100)}% of trace, ${int(s.terminal)} requests`
        : s.read === 0
          ? "starting: reading the trace"
          : `${Math.floor(f * 100)}%, ${int(s.read)} requests read, ${int(s.terminal)} done`;
  const eta = f > 0 && f < 1 ? clock((s.elapsedMs * (1 - f)) / f) : f >= 1 ? "0:00" : "--";
  const virtual = `${(s.virtualMs / 1000).toFixed(1)} s virtual`;
  const elapsed = `elapsed ${clock(s.elapsedMs)}`;
  const variants = [[done, virtual, elapsed], [done, elapsed], [done]].map((parts) => ` ${[...parts, `ETA ${eta}`].join(" | ")}`);
  const text = variants.find((t) => "replay []".length + 5 + t.length < columns) ?? variants.at(-1)!;
  const width = Math.max(5, Math.min(40, columns - 1 - "replay []".length - text.length));
  const full = Math.round(f * width);
  return `replay [${"#".repeat(full)}${"-".repeat(width - full)}]${text}`;
}

/**
 * A progress bar on stderr, drawn only when stderr is a terminal (never in pipes, files or tests)
 * and `quiet` is off. It writes through `io.err`, so the CLI's injected output is the only sink.
 * `totalRequests`: the synthetic workload's size, when known.
 */
export function createProgress(io: CliIo, opts: { readonly quiet?: boolean; readonly totalRequests?: number; readonly trace?: boolean } = {}): Progress {
  if (!io.stderrIsTTY || opts.quiet === true) return NONE;
  const stream = progressStream(io);
  let state: ProgressState = {
    fraction: 0,
    terminal: 0,
    totalRequests: opts.totalRequests,
    virtualMs: 0,
    elapsedMs: 0,
    ...(opts.trace === true ? { read: 0 } : {}),
  };
  const started = Date.now();
  const bar = new SingleBar({
    stream,
    format: () => progressLine({ ...state, elapsedMs: Date.now() - started }, stream.columns),
    hideCursor: true,
    clearOnComplete: true,
    linewrap: false,
    fps: 10,
  });
  bar.start(1000, 0);
  return {
    active: true,
    update(fraction, terminal, nowMs) {
      state = { ...state, fraction, terminal, virtualMs: nowMs };
      bar.update(Math.round(Math.min(1, Math.max(0, fraction)) * 1000));
    },
    read(requests, fraction) {
      state = { ...state, read: requests, fraction };
      bar.update(Math.round(Math.min(1, Math.max(0, fraction)) * 1000));
    },
    stop() {
      bar.stop();
    },
  };
}
