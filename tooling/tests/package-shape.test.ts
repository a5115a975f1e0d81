// What a consumer of each published package gets: `pnpm pack` of every package under packages/,
// then publint (manifest, exports and files agree) and Are the Types Wrong (the types resolve for
// TypeScript's module resolutions an ESM-only package supports) on the tarball, and knip over the
// repository (no unused files, exports or dependencies). The packages are ESM only, so the
// CommonJS resolutions (node10, node16 from CommonJS) are out of scope, as attw's esm-only
// profile has it.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { checkPackage, createPackageFromTarballData } from "@arethetypeswrong/core";
import { publint } from "publint";
import { formatMessage } from "publint/utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../", import.meta.url));
const pnpm = join(root, "tooling/scripts/pnpm.sh");
const packages = readdirSync(join(root, "packages")).sort();
const out = mkdtempSync(join(tmpdir(), "kvsim-shape-"));
const tarballs = new Map<string, Buffer>();

beforeAll(async () => {
  // Two at a time: pnpm pack is mostly process start-up.
  const queue = [...packages];
  const worker = async () => {
    for (let p = queue.shift(); p !== undefined; p = queue.shift()) {
      const dest = join(out, p);
      await run("bash", [pnpm, "pack", "--pack-destination", dest], { cwd: join(root, "packages", p) });
      const [file] = readdirSync(dest);
      tarballs.set(p, readFileSync(join(dest, file!)));
    }
  };
  await Promise.all([worker(), worker()]);
}, 180_000);

afterAll(() => rmSync(out, { recursive: true, force: true }));

const IGNORED_RESOLUTIONS = new Set(["node10", "node16-cjs"]);

describe.each(packages)("the packed @kvsim/%s", (name) => {
  it("passes publint with no errors, warnings or suggestions", async () => {
    const tarball = tarballs.get(name)!;
    const pkg = JSON.parse(readFileSync(join(root, "packages", name, "package.json"), "utf8")) as Record<string, unknown>;
    const { messages } = await publint({
      pack: { tarball: tarball.buffer.slice(tarball.byteOffset, tarball.byteOffset + tarball.byteLength) as ArrayBuffer },
      level: "suggestion",
    });
    expect(messages.map((m) => `${m.type}: ${formatMessage(m, pkg) ?? m.code}`)).toEqual([]);
  });

  it("has types that resolve for ESM consumers (node16, bundler)", async () => {
    const result = await checkPackage(createPackageFromTarballData(new Uint8Array(tarballs.get(name)!)));
    expect(result.types).not.toBe(false);
    const problems = "problems" in result ? result.problems : [];
    const relevant = problems.filter((p) => !("resolutionKind" in p) || !IGNORED_RESOLUTIONS.has(p.resolutionKind as string));
    expect(
      relevant.map((p) => `${p.kind}${"entrypoint" in p ? ` at ${String(p.entrypoint)}` : ""}${"resolutionKind" in p ? ` (${String(p.resolutionKind)})` : ""}`),
    ).toEqual([]);
  });
});

describe("the repository", () => {
  it("has no unused files, exports, types or dependencies (knip)", async () => {
    const knip = join(root, "node_modules/knip/bin/knip.js");
    const result = await run(process.execPath, [knip, "--no-progress", "--no-config-hints"], { cwd: root, maxBuffer: 16 << 20 }).then(
      (r) => r.stdout,
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ""}${e.stderr ?? ""}`,
    );
    expect(result.trim()).toBe("");
  }, 120_000);
});
