import { describeBytes, InputError, MAX_DOCUMENT_BYTES, parseDocumentText, type LocatedDocument } from "@kvsim/profile-schema";
import { parseSetFlag, type SpecOverride } from "@kvsim/sweep";
import { readText, UsageError, type CliIo } from "./io.js";

/** A CliIo that may bring its own standard input (tests pass a stream; the binary reads process.stdin). */
export interface StdinIo extends CliIo {
  readonly stdin?: NodeJS.ReadableStream;
}

/** How `--spec -` is named in messages; relative paths in it resolve against the working folder. */
const STDIN_SPEC = "<stdin>";

/** `--set` is repeatable: commander collects every value in order. */
export const collectSet = (value: string, previous: readonly string[] = []): string[] => [...previous, value];

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads standard input whole, as readText reads a file: at most MAX_DOCUMENT_BYTES (16 MiB; more
 * is refused as soon as it arrives, without reading the rest: `- < /dev/zero` ends at once) and
 * UTF-8 only. `limit` is for tests.
 */
async function readStdin(io: StdinIo, limit = MAX_DOCUMENT_BYTES): Promise<string> {
  const input = io.stdin ?? process.stdin;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of input) {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : (chunk as Buffer);
    size += bytes.length;
    if (size > limit) {
      if (input === process.stdin) process.stdin.destroy();
      throw new InputError(STDIN_SPEC, [
        { path: "", message: `cannot read standard input: it is more than the ${describeBytes(limit)} kvsim reads for a profile, spec or engine-args file` },
      ]);
    }
    chunks.push(bytes);
  }
  try {
    return utf8.decode(Buffer.concat(chunks, size));
  } catch {
    throw new InputError(STDIN_SPEC, [{ path: "", message: "cannot read standard input: it is not UTF-8 text" }]);
  }
}

/** The text each document read by readDocument was parsed from (a run record hashes it). */
const texts = new WeakMap<LocatedDocument, string>();

/** The text `doc` was read from, when readDocument read it. */
export const documentText = (doc: LocatedDocument): string | undefined => texts.get(doc);

/** Reads a spec or profile document from a file, or from standard input when `file` is `-`. */
export async function readDocument(io: StdinIo, file: string): Promise<LocatedDocument> {
  if (file === "-") {
    if (io.stdin === undefined && process.stdin.isTTY)
      throw new UsageError("--spec - reads the spec from standard input, but it is a terminal; pipe a spec in");
    const text = await readStdin(io);
    const doc = parseDocumentText(text, STDIN_SPEC, "yaml");
    texts.set(doc, text);
    return doc;
  }
  const text = readText(file);
  const doc = parseDocumentText(text, file);
  texts.set(doc, text);
  return doc;
}

/** The `--set` flags, parsed (each an InputError naming its flag when malformed). */
export const parseSetFlags = (flags: readonly string[] | undefined): SpecOverride[] => (flags ?? []).map((f) => parseSetFlag(f));
