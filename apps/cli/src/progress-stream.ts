import type { CliIo } from "./io.js";

/**
 * The stream a cli-progress bar draws on: stderr's width, written through `io.err` so the CLI's
 * injected output stays the only sink (tests capture it). Only for a terminal stderr.
 */
export function progressStream(io: CliIo): NodeJS.WritableStream & { readonly columns: number } {
  const stream = {
    isTTY: true,
    get columns(): number {
      return process.stderr.columns || 80;
    },
    write(text: string): boolean {
      io.err(text);
      return true;
    },
  };
  return stream as unknown as NodeJS.WritableStream & { readonly columns: number };
}
