import { createReadStream } from "node:fs";
import { describeBytes, InputError, MAX_CSV_LINE_BYTES, MAX_JSONL_LINE_BYTES, type TraceFormat } from "@kvsim/profile-schema";
import { fsErrorWords, regularFileSize } from "./io.js";

/** One line of input: its text, or the fact that it was longer than the limit (its text dropped). */
export type Line = { readonly text: string; readonly tooLong?: undefined } | { readonly tooLong: true; readonly bytes: number };

const NEWLINE = 0x0a;

/**
 * Splits a byte stream into lines at `\n` only. A `\r` stays in its line (JSON counts it as
 * blank space, and trace readers drop a trailing one), so a lone CR never splits a request.
 * A line longer than `maxBytes` is never held whole: its bytes are dropped as they arrive and it
 * comes out as `{ tooLong }`. A last line without `\n` counts.
 */
export async function* splitLines(source: AsyncIterable<Uint8Array | string>, maxBytes: number): AsyncGenerator<Line> {
  let parts: Buffer[] = [];
  let held = 0;
  let dropped = 0;
  for await (const chunk of source) {
    const buf = typeof chunk === "string" ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let start = 0;
    while (start <= buf.length) {
      const nl = buf.indexOf(NEWLINE, start);
      const end = nl === -1 ? buf.length : nl;
      const piece = end - start;
      if (dropped > 0 || held + piece > maxBytes) {
        dropped += held + piece;
        held = 0;
        parts = [];
      } else if (piece > 0) {
        parts.push(buf.subarray(start, end));
        held += piece;
      }
      if (nl === -1) break;
      if (dropped > 0) yield { tooLong: true, bytes: dropped };
      else yield { text: parts.length === 1 ? parts[0]!.toString("utf8") : Buffer.concat(parts, held).toString("utf8") };
      parts = [];
      held = 0;
      dropped = 0;
      start = nl + 1;
    }
  }
  if (dropped > 0) yield { tooLong: true, bytes: dropped };
  else if (held > 0) yield { text: Buffer.concat(parts, held).toString("utf8") };
}

const FORMAT_LINE: Readonly<Record<TraceFormat, string>> = { mooncake: "a Mooncake JSONL line", kvsim: "a kvsim JSONL line", azure: "an Azure CSV row" };

/** The longest line a trace format allows. */
const traceLineLimit = (format: TraceFormat): number => (format === "azure" ? MAX_CSV_LINE_BYTES : MAX_JSONL_LINE_BYTES);

/** An open trace: its lines (for readTrace), its size, and how many bytes were read so far. */
export interface TraceFile {
  readonly lines: AsyncGenerator<string>;
  readonly size: number;
  bytesRead(): number;
  close(): void;
}

/**
 * Opens a trace for streaming: refused up front when it is not a regular file (a device, a FIFO,
 * a directory); then each line is checked against the format's length limit as it is read, and a
 * read error names the file. `shown` names it in messages.
 */
export function openTrace(path: string, format: TraceFormat, shown = path): TraceFile {
  const size = regularFileSize(path, "the trace", shown);
  const stream = createReadStream(path);
  const limit = traceLineLimit(format);
  async function* lines(): AsyncGenerator<string> {
    let n = 0;
    try {
      for await (const line of splitLines(stream, limit)) {
        n++;
        if (line.tooLong === true) {
          throw new InputError(shown, [
            { path: "", message: `the line is longer than ${describeBytes(limit)}, the longest ${FORMAT_LINE[format]} may be`, line: n },
          ]);
        }
        yield line.text;
      }
    } catch (e) {
      if (e instanceof InputError) throw e;
      throw new InputError(shown, [{ path: "", message: `cannot read the trace: ${fsErrorWords(e)}` }]);
    }
  }
  return {
    lines: lines(),
    size,
    bytesRead: () => stream.bytesRead,
    close: () => stream.destroy(),
  };
}
