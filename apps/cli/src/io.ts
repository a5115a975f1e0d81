import { randomBytes } from "node:crypto";
import {
  accessSync,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readlinkSync,
  readSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
  type Stats,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { describeBytes, formatIssue, InputError, MAX_DOCUMENT_BYTES, type InputIssue } from "@kvsim/profile-schema";

/** Bad usage (a missing option, a conflicting flag). Exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The run itself failed (input was valid). Exit code 1. */
export class RunError extends Error {
  override readonly name = "RunError";
}

/** One problem and the file it is in (a spec check can find problems in several files). */
export interface Problem {
  readonly file: string;
  readonly issue: InputIssue;
}

/** Invalid input found in several files at once (a spec, its profiles, its trace). Exit code 2. */
export class InvalidInputs extends Error {
  override readonly name = "InvalidInputs";
  constructor(readonly problems: readonly Problem[]) {
    super(problems.map((p) => formatIssue(p.file, p.issue)).join("\n"));
  }
}

export const EXIT_OK = 0;
export const EXIT_RUN_FAILED = 1;
export const EXIT_BAD_INPUT = 2;

/** What a file system entry is, in words, when it is not a regular file. */
function entryKind(st: Stats): string {
  if (st.isDirectory()) return "a directory";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  if (st.isFIFO()) return "a FIFO (named pipe)";
  if (st.isSocket()) return "a socket";
  return "not a regular file";
}

/** An fs error code in words. */
export function fsErrorWords(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EISDIR") return "is a directory";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  if (code === "ENOTDIR") return "a folder on its path is a file";
  if (code === "ELOOP") return "too many symbolic links";
  return e instanceof Error ? e.message : String(e);
}

/**
 * The size of `file` when it is a regular file (after symbolic links); anything else (a device
 * such as /dev/zero, a FIFO, a directory) is refused before it is opened, as is a missing file.
 * `what` names it in the message: "the file", "the trace".
 */
export function regularFileSize(file: string, what = "the file", shown = file): number {
  let st: Stats;
  try {
    st = statSync(file);
  } catch (e) {
    throw new InputError(shown, [{ path: "", message: `cannot read ${what}: ${fsErrorWords(e)}` }]);
  }
  if (!st.isFile()) throw new InputError(shown, [{ path: "", message: `cannot read ${what}: it is ${entryKind(st)}, not a regular file` }]);
  return st.size;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads a UTF-8 text file of at most MAX_DOCUMENT_BYTES (16 MiB): a profile, a spec, engine args.
 * Refused, naming the file: a missing or unreadable file, anything but a regular file, a larger
 * file (the limit is stated) and bytes that are not UTF-8.
 */
export function readText(file: string): string {
  const tooLarge = (size: string) =>
    new InputError(file, [
      {
        path: "",
        message: `cannot read the file: it is ${size}, more than the ${describeBytes(MAX_DOCUMENT_BYTES)} kvsim reads for a profile, spec or engine-args file`,
      },
    ]);
  const size = regularFileSize(file);
  if (size > MAX_DOCUMENT_BYTES) throw tooLarge(`${size} bytes`);
  let fd: number;
  try {
    // Non-blocking, so that a FIFO swapped in after the check cannot hang the open.
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw new InputError(file, [{ path: "", message: `cannot read the file: ${fsErrorWords(e)}` }]);
  }
  let bytes: Buffer;
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new InputError(file, [{ path: "", message: `cannot read the file: it is ${entryKind(st)}, not a regular file` }]);
    // Read at most one byte past the cap, whatever the size said (a file may grow as it is read).
    let buf = Buffer.allocUnsafe(Math.min(size, MAX_DOCUMENT_BYTES) + 1);
    let n = 0;
    for (;;) {
      if (n === buf.length) {
        if (n > MAX_DOCUMENT_BYTES) break;
        const bigger = Buffer.allocUnsafe(MAX_DOCUMENT_BYTES + 1);
        buf.copy(bigger, 0, 0, n);
        buf = bigger;
      }
      const got = readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
    }
    if (n > MAX_DOCUMENT_BYTES) throw tooLarge(`more than ${MAX_DOCUMENT_BYTES} bytes`);
    bytes = buf.subarray(0, n);
  } catch (e) {
    if (e instanceof InputError) throw e;
    throw new InputError(file, [{ path: "", message: `cannot read the file: ${fsErrorWords(e)}` }]);
  } finally {
    closeSync(fd);
  }
  try {
    return utf8.decode(bytes);
  } catch {
    throw new InputError(file, [{ path: "", message: "cannot read the file: it is not UTF-8 text" }]);
  }
}

/** Where an output goes once checked: the regular file to replace (symbolic links followed). */
interface OutputTarget {
  readonly shown: string;
  readonly path: string;
}

/**
 * Checks that `file` may be written, before any work: a non-empty path to a regular file, new or
 * (with `force`) existing, in a folder that exists and can be written. A directory, a device, a
 * FIFO or a socket is refused whatever `force` says (kvsim replaces files through a temporary
 * sibling and a rename, which must never land on a device). `flag` names the option in messages.
 */
function outputTarget(file: string, force: boolean, flag: string): OutputTarget {
  const named = flag === "" ? file : `${flag} ${file}`;
  if (file === "") throw new UsageError(`${flag === "" ? "an output path" : flag} is empty; name a file`);
  let path = resolve(file);
  let st: Stats | undefined;
  try {
    st = statSync(path);
    path = realpathSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw new UsageError(`cannot write ${named}: ${fsErrorWords(e)}`);
    // A dangling symbolic link: write to where it points, as a new file.
    try {
      if (lstatSync(path).isSymbolicLink()) path = resolve(dirname(path), readlinkSync(path));
    } catch {
      // Not there at all: a new file.
    }
  }
  if (st !== undefined) {
    if (!st.isFile()) throw new UsageError(`cannot write ${named}: it is ${entryKind(st)}; kvsim writes its outputs to regular files only`);
    if (!force) throw new UsageError(`${file} already exists; pass --force to overwrite it`);
  }
  const dir = dirname(path);
  let dirStat: Stats;
  try {
    dirStat = statSync(dir);
  } catch {
    throw new UsageError(`cannot write ${named}: the folder ${dir} does not exist`);
  }
  if (!dirStat.isDirectory()) throw new UsageError(`cannot write ${named}: ${dir} is not a folder`);
  try {
    accessSync(dir, constants.W_OK);
    if (st !== undefined) accessSync(path, constants.W_OK);
  } catch {
    throw new UsageError(`cannot write ${named}: permission denied`);
  }
  return { shown: file, path };
}

/**
 * Checks every output of a command before it does any work (see outputTarget), and that no two of
 * them are the same file. Throws a UsageError (exit 2) naming the flag and the path.
 */
export function checkOutputs(outputs: readonly { readonly flag: string; readonly path: string | undefined }[], force: boolean): void {
  const seen = new Map<string, string>();
  for (const o of outputs) {
    if (o.path === undefined) continue;
    const target = outputTarget(o.path, force, o.flag);
    const other = seen.get(target.path);
    if (other !== undefined) throw new UsageError(`${other} and ${o.flag} name the same file (${o.path}); give each its own`);
    seen.set(target.path, o.flag);
  }
}

/**
 * Writes several files all or nothing: each goes to a temporary sibling first; only when every one
 * is written are they renamed into place. A failure removes the temporary files and leaves every
 * target as it was. Targets are checked again as in checkOutputs.
 */
export function writeOutputs(files: readonly { readonly path: string; readonly text: string; readonly flag?: string }[], force: boolean): void {
  const targets = files.map((f) => ({ ...f, target: outputTarget(f.path, force, f.flag ?? "") }));
  const written: string[] = [];
  try {
    for (const f of targets) {
      const tmp = join(dirname(f.target.path), `.${basename(f.target.path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
      written.push(tmp);
      try {
        writeFileSync(tmp, f.text, { flag: "wx" });
      } catch (e) {
        throw new RunError(`cannot write ${f.path}: ${fsErrorWords(e)}; no output file was changed`);
      }
    }
    targets.forEach((f, i) => {
      renameSync(written[i]!, f.target.path);
      written[i] = "";
    });
  } finally {
    for (const tmp of written) {
      if (tmp === "") continue;
      try {
        unlinkSync(tmp);
      } catch {
        // Already gone.
      }
    }
  }
}

/** One output written through writeOutputs (a temporary sibling, then a rename). */
export function writeTextAtomic(file: string, text: string, force: boolean): void {
  writeOutputs([{ path: file, text }], force);
}

/** Checks before a run that an output file may be written, so bad flags fail before any work. */
export function assertWritable(file: string | undefined, force: boolean, flag = ""): void {
  checkOutputs([{ flag, path: file }], force);
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
  if (e instanceof InputError || e instanceof InvalidInputs) {
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
export function numberOption(
  name: string,
  raw: string,
  opts: { integer?: boolean; min?: number; exclusiveMin?: number; max?: number; maxText?: string } = {},
): number {
  const v = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(v)) throw new UsageError(`${name} must be a finite number, got "${raw}"`);
  if (opts.integer === true && !Number.isSafeInteger(v)) throw new UsageError(`${name} must be an integer, got "${raw}"`);
  if (opts.min !== undefined && v < opts.min) throw new UsageError(`${name} must be at least ${opts.min}, got ${raw}`);
  if (opts.exclusiveMin !== undefined && v <= opts.exclusiveMin) throw new UsageError(`${name} must be greater than ${opts.exclusiveMin}, got ${raw}`);
  if (opts.max !== undefined && v > opts.max) throw new UsageError(`${name} must be at most ${opts.maxText ?? String(opts.max)}, got ${raw}`);
  return v;
}
