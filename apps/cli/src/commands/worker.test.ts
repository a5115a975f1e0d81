import { describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

describe("kvsim worker", () => {
  it("refuses a malformed --queue with exit 2, naming it, and writes nothing on stdout", async () => {
    const io = captureIo();
    expect(await runCli(["worker", "--queue", "not a url"], io)).toBe(2);
    expect(io.stderr).toMatch(/^error: .*not a url/);
    expect(io.stdout).toBe("");
  });
});
