import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

/**
 * bin/kvsim.cjs, the packed CLI's entry point: it refuses a Node older than its "engines" with one
 * line before the bundled CLI loads. Other Node versions are faked with a preload that rewrites
 * process.versions.node (the real older Node is run by pack.test.ts where the machine has one).
 */
const cliDir = fileURLToPath(new URL("../", import.meta.url));
const entry = join(cliDir, "bin", "kvsim.cjs");
const { version, engines } = JSON.parse(readFileSync(join(cliDir, "package.json"), "utf8")) as { version: string; engines: { node: string } };
const tmp = mkdtempSync(join(tmpdir(), "kvsim-node-check-"));
const fake = join(tmp, "fake-node-version.cjs");
writeFileSync(fake, 'Object.defineProperty(process.versions, "node", { value: process.env.FAKE_NODE });\n');
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

const runAs = (nodeVersion: string) => {
  const r = spawnSync(process.execPath, ["--require", fake, entry, "--version"], { encoding: "utf8", env: { ...process.env, FAKE_NODE: nodeVersion } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};

describe("the packed CLI's Node check", () => {
  it("declares the supported Node lines: 22 from 22.12, and 24 on", () => {
    expect(engines.node).toBe("^22.12.0 || >=24.0.0");
  });
  it.each(["18.20.8", "20.20.2", "22.11.0", "23.11.1"])("refuses Node %s with one line on stderr and exit 1", (v) => {
    expect(runAs(v)).toEqual({ status: 1, stdout: "", stderr: `kvsim needs Node 22 (22.12 or later) or Node 24 or later; this is Node ${v}\n` });
  });
  it.each(["22.12.0", "22.22.1", "24.0.0", "26.1.0"])("runs the CLI on Node %s", (v) => {
    expect(runAs(v)).toEqual({ status: 0, stdout: `kvsim ${version} (node ${v})\n`, stderr: "" });
  });
});
