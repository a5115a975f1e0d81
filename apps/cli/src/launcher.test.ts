import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

/**
 * bin/kvsim, the repository's launcher of the built CLI: from any folder, through a symbolic link
 * on the PATH too, it prints only kvsim's output (no package-manager banner), so JSON parses.
 * It runs the built dist/cli.js, which `npm test` builds before the tests.
 */
const launcher = fileURLToPath(new URL("../../../bin/kvsim", import.meta.url));
const elsewhere = mkdtempSync(join(tmpdir(), "kvsim-launcher-"));
afterAll(() => {
  rmSync(elsewhere, { recursive: true, force: true });
});

describe("bin/kvsim", () => {
  it("replays the bundled example from another folder with only the JSON report on stdout", () => {
    const r = spawnSync("sh", [launcher, "replay", "--format", "json"], { cwd: elsewhere, encoding: "utf8" });
    expect(r.status).toBe(0);
    // The bundled P/D example's digest (README); it changed when kv_aware became Dynamo's KV router (#42).
    expect((JSON.parse(r.stdout) as { digest: string }).digest).toBe("4a66dec626e852fd0e6ecac76192cc69ff582ac400311172604c144660208ebc");
  });
  it("works through a symbolic link, and passes kvsim's exit code through", () => {
    const link = join(elsewhere, "kvsim");
    symlinkSync(launcher, link);
    const version = spawnSync(link, ["--version"], { cwd: elsewhere, encoding: "utf8" });
    expect(version.status).toBe(0);
    expect(version.stdout).toMatch(/^kvsim \d+\.\d+\.\d+ \(node \d+\.\d+\.\d+\)\n$/);
    const bare = spawnSync(link, [], { cwd: elsewhere, encoding: "utf8" });
    expect([bare.status, bare.stdout]).toEqual([2, ""]);
  });
});
