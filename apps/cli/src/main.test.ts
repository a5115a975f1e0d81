import { describe, expect, it } from "vitest";
import { runCli } from "./main.js";
import type { CliIo } from "./io.js";

export function captureIo(): CliIo & { stdout: string; stderr: string } {
  const io = {
    stdout: "",
    stderr: "",
    stderrIsTTY: false,
    out(t: string) {
      io.stdout += t;
    },
    err(t: string) {
      io.stderr += t;
    },
  };
  return io;
}

describe("kvsim", () => {
  it("prints its version and exits 0", async () => {
    const io = captureIo();
    expect(await runCli(["--version"], io)).toBe(0);
    expect(io.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
  it("refuses an unknown option with exit 2", async () => {
    const io = captureIo();
    expect(await runCli(["--bogus"], io)).toBe(2);
    expect(io.stderr).toContain("unknown option '--bogus'");
  });
});
