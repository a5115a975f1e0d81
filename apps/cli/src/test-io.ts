import type { CliIo } from "./io.js";

/** CLI output captured in memory, for in-process tests of `runCli`. */
export function captureIo(options: { stderrIsTTY?: boolean } = {}): CliIo & { stdout: string; stderr: string } {
  const io = {
    stdout: "",
    stderr: "",
    stderrIsTTY: options.stderrIsTTY ?? false,
    out(t: string) {
      io.stdout += t;
    },
    err(t: string) {
      io.stderr += t;
    },
  };
  return io;
}
