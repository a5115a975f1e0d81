// Every pending changeset names packages of this workspace with a valid bump, so
// `pnpm version-packages` (changeset version) cannot fail on a misnamed package at release time.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const name = (dir: string): string => (JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8")) as { name: string }).name;
const workspace = new Set([
  ...readdirSync(join(root, "packages")).map((p) => name(join("packages", p))),
  ...readdirSync(join(root, "apps")).map((a) => name(join("apps", a))),
]);
const pending = readdirSync(join(root, ".changeset")).filter((f) => f.endsWith(".md") && f !== "README.md");

describe("pending changesets", () => {
  it.each(pending.length > 0 ? pending : ["(none pending)"])("%s names workspace packages with a patch, minor or major bump", (file) => {
    if (file === "(none pending)") return;
    const text = readFileSync(join(root, ".changeset", file), "utf8");
    const front = /^---\n([\s\S]*?)\n---\n/.exec(text);
    expect(front, `${file} starts with a front matter block`).not.toBeNull();
    const entries = front![1]!.split("\n").filter((l) => l.trim() !== "");
    expect(entries.length).toBeGreaterThan(0);
    for (const line of entries) {
      const m = /^"([^"]+)":\s*(patch|minor|major)\s*$/.exec(line);
      expect(m, `${file}: ${line}`).not.toBeNull();
      expect(workspace.has(m![1]!), `${file}: ${m![1]} is a package of this workspace`).toBe(true);
    }
  });
});
