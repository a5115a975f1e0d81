import { createHash } from "node:crypto";
import { createReadStream, statSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { InputError, type TraceFormat } from "@kvsim/profile-schema";
import type { PointHost, TraceRef } from "@kvsim/sweep";
import { fsErrorWords, regularFileSize } from "../io.js";
import { openTrace } from "../lines.js";

/** SHA-256 (hex) of a trace's content, streamed. Throws InputError naming the file when it is no regular file or cannot be read. */
async function sha256File(path: string): Promise<string> {
  regularFileSize(path, "the trace");
  const hash = createHash("sha256");
  try {
    for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  } catch (e) {
    throw new InputError(path, [{ path: "", message: `cannot read the trace: ${fsErrorWords(e)}` }]);
  }
  return hash.digest("hex");
}

/** Hashes already checked in this thread, by path, size and modification time. */
const checked = new Map<string, string>();

const stampOf = (path: string): string => {
  const st = statSync(path, { throwIfNoEntry: false });
  return st === undefined ? path : `${path}\0${st.size}\0${st.mtimeMs}`;
};

/** A trace's hash, taken once per thread while the file keeps its size and modification time. */
export async function checkedHash(path: string): Promise<string> {
  const key = stampOf(path);
  const known = checked.get(key);
  if (known !== undefined) return known;
  const hash = await sha256File(path);
  checked.set(key, hash);
  return hash;
}

/** A hash this thread has taken, with the file's stamp then (handed to a worker thread of a local sweep). */
export interface KnownHash {
  readonly key: string;
  readonly sha256: string;
}

/** What this thread knows of a trace's hash, while the file keeps its stamp. */
export function knownHash(path: string): KnownHash | undefined {
  const key = stampOf(path);
  const sha256 = checked.get(key);
  return sha256 === undefined ? undefined : { key, sha256 };
}

/**
 * Takes another thread's hash of a trace (same machine, same file): the stamp of the file as that
 * thread saw it is part of the key, so a file changed since is hashed again here.
 */
export function rememberHash(known: KnownHash): void {
  checked.set(known.key, known.sha256);
}

/**
 * The host of a point in this process: reads the trace from disk (as `kvsim replay` does: a
 * regular file, lines bounded by the format's limit) after checking that its content has the
 * task's hash, so a worker on another machine that sees another file refuses the point.
 */
export const fileHost: PointHost = {
  async traceLines(trace: TraceRef, format: TraceFormat) {
    const actual = await checkedHash(trace.path);
    if (actual !== trace.sha256) {
      throw new InputError(trace.path, [
        { path: "", message: `the trace here differs from the sweep's (sha256 ${actual.slice(0, 12)}... here, ${trace.sha256.slice(0, 12)}... expected)` },
      ]);
    }
    const file = openTrace(trace.path, format);
    return {
      lines: file.lines,
      close: () => {
        file.close();
      },
    };
  },
  now: () => performance.now(),
};
