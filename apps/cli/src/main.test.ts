import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { runCli } from "./main.js";
import { captureIo } from "./test-io.js";

async function kvsim(...argv: string[]) {
  const io = captureIo();
  const code = await runCli(argv, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

describe("kvsim", () => {
  it("prints its version and the Node it runs on, and exits 0", async () => {
    const r = await kvsim("--version");
    const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    expect(r).toEqual({ code: 0, stdout: `kvsim ${version} (node ${process.version.slice(1)})\n`, stderr: "" });
  });
  it("refuses an unknown option with exit 2: the error and one hint line, not the whole help", async () => {
    expect(await kvsim("--bogus")).toEqual({ code: 2, stdout: "", stderr: "error: unknown option '--bogus'\nhint: `kvsim --help` lists the commands\n" });
    expect(await kvsim("replay", "--bogus")).toEqual({
      code: 2,
      stdout: "",
      stderr: "error: unknown option '--bogus'\nhint: `kvsim replay --help` shows its usage\n",
    });
    expect(await kvsim("bogus")).toEqual({ code: 2, stdout: "", stderr: "error: unknown command 'bogus'\nhint: `kvsim --help` lists the commands\n" });
  });
  it("names the command of a nested usage error in its hint", async () => {
    const r = await kvsim("dynamo", "handoff-timing", "--profile", "x.json");
    expect(r).toEqual({
      code: 2,
      stdout: "",
      stderr: "error: required option '--prompt-tokens <N>' not specified\nhint: `kvsim dynamo handoff-timing --help` shows its usage\n",
    });
  });
  it("bare kvsim, and a group without its subcommand, are usage errors (exit 2) naming the commands", async () => {
    const bare = await kvsim();
    expect(bare.code).toBe(2);
    expect(bare.stdout).toBe("");
    expect(bare.stderr).toMatch(/^error: kvsim needs a command: transfer, validate, .*replay.*\nhint: `kvsim --help` lists the commands\n$/);
    expect(await kvsim("profile")).toEqual({
      code: 2,
      stdout: "",
      stderr: "error: kvsim profile needs a command: from-hf, show\nhint: `kvsim profile --help` shows its usage\n",
    });
  });
  it("--help and `kvsim help` print the help on stdout and exit 0", async () => {
    for (const argv of [["--help"], ["help"]]) {
      const r = await kvsim(...argv);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^Usage: kvsim \[options\] \[command\]/);
      expect(r.stderr).toBe("");
    }
  });
});
