import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The installable CLI: the build bundles the workspace packages (tsup `noExternal`), so
 * `npm pack` of apps/cli gives a tarball that installs alone, from the npm registry, and runs.
 */

const cliDir = fileURLToPath(new URL("../", import.meta.url));
const root = fileURLToPath(new URL("../../../", import.meta.url));
interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}
const manifest = (dir: string): Manifest => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as Manifest;

/** pnpm-workspace.yaml's catalog (`zod: 4.6.7`), which `catalog:` versions refer to. */
function catalog(): Map<string, string> {
  const text = readFileSync(join(root, "pnpm-workspace.yaml"), "utf8");
  const block = /^catalog:\n((?:[ \t]+.*\n)+)/m.exec(text)?.[1] ?? "";
  return new Map([...block.matchAll(/^\s+"?([^":\s]+)"?:\s*"?([^"\s]+)"?/gm)].map((m) => [m[1]!, m[2]!]));
}

const made: string[] = [];
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
});

describe("the packed CLI", () => {
  it("depends on every npm package the bundled workspace packages use, at their versions, and on no workspace package", () => {
    const cli = manifest(cliDir);
    const versions = catalog();
    const deps = cli.dependencies ?? {};
    // npm cannot install workspace: or catalog: versions, nor @kvsim packages (never published).
    for (const [name, version] of Object.entries(deps)) {
      expect({ name, version, workspace: name.startsWith("@kvsim/") }).toEqual({
        name,
        version: expect.stringMatching(/^\d+\.\d+\.\d+$/) as string,
        workspace: false,
      });
    }
    // Every @kvsim package the CLI uses, and those they use in turn, is bundled: its own
    // dependencies must be the CLI's.
    const seen = new Set<string>();
    const visit = (name: string) => {
      if (seen.has(name)) return;
      seen.add(name);
      const pkg = manifest(join(root, "packages", name.slice("@kvsim/".length)));
      for (const [dep, range] of Object.entries(pkg.dependencies ?? {})) {
        if (dep.startsWith("@kvsim/")) visit(dep);
        else expect({ [dep]: deps[dep] }, `${name} uses ${dep}`).toEqual({ [dep]: range === "catalog:" ? versions.get(dep) : range });
      }
    };
    for (const dep of Object.keys(cli.devDependencies ?? {})) if (dep.startsWith("@kvsim/")) visit(dep);
    expect(seen.size).toBeGreaterThan(0);
  });

  it("npm pack gives a tarball that installs with npm install -g (no monorepo) and replays from another folder", () => {
    expect(existsSync(join(cliDir, "dist", "cli.js")), "the CLI is built first (npm test builds it)").toBe(true);
    const tmp = mkdtempSync(join(tmpdir(), "kvsim-pack-"));
    made.push(tmp);
    const run = (cmd: string, args: string[], cwd: string) => {
      const r = spawnSync(cmd, args, { cwd, encoding: "utf8", env: { ...process.env, npm_config_update_notifier: "false" } });
      expect(r.status, `${cmd} ${args.join(" ")}\n${r.stderr}`).toBe(0);
      return r.stdout;
    };
    const { version } = manifest(cliDir);
    run("npm", ["pack", "--silent", "--pack-destination", tmp], cliDir);
    const tarball = join(tmp, `kvsim-${version}.tgz`);
    expect(existsSync(tarball)).toBe(true);
    const prefix = join(tmp, "prefix");
    // From the registry, as a user would (the npm cache makes later runs quick).
    run("npm", ["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error", tarball], tmp);
    const elsewhere = join(tmp, "elsewhere");
    mkdirSync(elsewhere);
    const report = JSON.parse(run(join(prefix, "bin", "kvsim"), ["replay", "--format", "json"], elsewhere)) as { digest: string; completed_requests: number };
    // The bundled P/D example's digest (README), from the installed copy's own examples folder.
    expect([report.completed_requests, report.digest]).toEqual([48, "4a66dec626e852fd0e6ecac76192cc69ff582ac400311172604c144660208ebc"]);
    expect(run(join(prefix, "bin", "kvsim"), ["--version"], elsewhere)).toBe(`kvsim ${version} (node ${process.version.slice(1)})\n`);
    // It declares the Node lines it supports, and refuses an older Node in one line: the
    // machine's own Node where the bootstrap replaced it (Node 20 on the CI machine), else a
    // Node 20 faked by a preload (node-check.test.ts tests the rule itself).
    const installed = join(prefix, "lib", "node_modules", "kvsim");
    expect((JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as { engines?: unknown }).engines).toEqual({ node: "^22.12.0 || >=24.0.0" });
    const machine = process.env.KVSIM_MACHINE_NODE;
    const machineVersion = process.env.KVSIM_MACHINE_NODE_VERSION ?? "";
    const [major = 0, minor = 0] = machineVersion.split(".").map(Number);
    const older = machine !== undefined && machine !== "" && (major < 22 || (major === 22 && minor < 12) || major === 23);
    const fake = join(tmp, "node-20.cjs");
    writeFileSync(fake, 'Object.defineProperty(process.versions, "node", { value: "20.20.2" });\n');
    const refused = older
      ? spawnSync(machine, [join(prefix, "bin", "kvsim"), "--version"], { cwd: elsewhere, encoding: "utf8" })
      : spawnSync(process.execPath, ["--require", fake, join(prefix, "bin", "kvsim"), "--version"], { cwd: elsewhere, encoding: "utf8" });
    expect([refused.status, refused.stdout, refused.stderr]).toEqual([
      1,
      "",
      `kvsim needs Node 22 (22.12 or later) or Node 24 or later; this is Node ${older ? machineVersion : "20.20.2"}\n`,
    ]);
  }, 240_000);
});
