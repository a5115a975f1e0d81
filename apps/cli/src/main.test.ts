import { describe, expect, it } from "vitest";
import { runCli } from "./main.js";
import { captureIo } from "./test-io.js";


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
