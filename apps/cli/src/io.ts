import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, basename } from "node:path";
import { InputError } from "@kvsim/profile-schema";

/** Bad usage (a missing option, a conflicting flag). Exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The run itself failed (input was valid). Exit code 1. */
export class RunError extends Error {
  override readonly name = "RunError";
}

export const EXIT_OK = 0;
export const EXIT_RUN_FAILED = 1;
export const EXIT_BAD_INPUT = 2;

/** Reads a UTF-8 text file; a missing or unreadable file is bad input naming the file. */
export function readText(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "is a directory" : code === "EACCES" ? "permission denied" : String(e);
    throw new InputError(file, [{ path: "", message: `cannot read the file: ${why}` }]);
  }
}

/**
 * Writes a file atomically (a temporary sibling, then rename), so a failed run never leaves a
 * half-written file. Refuses to overwrite an existing file unless `force`.
 */
export function writeTextAtomic(file: string, text: string, force: boolean): void {
  if (!force && existsSync(file)) {
    throw new UsageError(`${file} already exists; pass --force to overwrite it`);
  }
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

/** Checks before a run that an output file may be written, so bad flags fail before any work. */
export function assertWritable(file: string | undefined, force: boolean): void {
  if (file !== undefined && !force && existsSync(file)) {
    throw new UsageError(`${file} already exists; pass --force to overwrite it`);
  }
}

/** Where a command writes. Tests pass their own; the binary passes the process streams. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** True when stderr is a terminal (progress bars draw only then). */
  readonly stderrIsTTY: boolean;
}

export const processIo: CliIo = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  stderrIsTTY: process.stderr.isTTY,
};

/** Maps an error to its message and exit code. Internal errors keep their stack. */
export function reportError(io: CliIo, e: unknown): number {
  if (e instanceof InputError) {
    io.err(`error: invalid input\n${e.message}\n`);
    return EXIT_BAD_INPUT;
  }
  if (e instanceof UsageError) {
    io.err(`error: ${e.message}\n`);
    return EXIT_BAD_INPUT;
  }
  if (e instanceof RunError) {
    io.err(`error: ${e.message}\n`);
    return EXIT_RUN_FAILED;
  }
  io.err(`internal error (please report it): ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  return EXIT_RUN_FAILED;
}

/** What a command module gets: the output streams and a wrapper for its actions. */
export interface CommandContext {
  readonly io: CliIo;
  /** Wraps an action: its returned number (default 0) or thrown error becomes the exit code. */
  run<A extends unknown[]>(fn: (...args: A) => number | undefined | Promise<number | undefined>): (...args: A) => Promise<void>;
}

/** Parses a numeric option, refusing anything but a finite number (and an integer when asked). */
export function numberOption(name: string, raw: string, opts: { integer?: boolean; min?: number; exclusiveMin?: number } = {}): number {
  const v = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(v)) throw new UsageError(`${name} must be a finite number, got "${raw}"`);
  if (opts.integer === true && !Number.isSafeInteger(v)) throw new UsageError(`${name} must be an integer, got "${raw}"`);
  if (opts.min !== undefined && v < opts.min) throw new UsageError(`${name} must be at least ${opts.min}, got ${raw}`);
  if (opts.exclusiveMin !== undefined && v <= opts.exclusiveMin) throw new UsageError(`${name} must be greater than ${opts.exclusiveMin}, got ${raw}`);
  return v;
}
