import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * Each package's `src/index.ts` exports what its README documents and nothing else (issue 37):
 * every exported name appears in the README. The packages listed in PENDING are still being
 * brought to it; a package leaves the list once its README covers its exports (and the test
 * fails if a listed package already complies, so the list only shrinks).
 */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PENDING = new Set<string>([]);

/** The names an index.ts exports (`export { a, type B, c as d } from ...` and `export const/function/class/type/interface`). */
function exportedNames(source: string): string[] {
  const names = new Set<string>();
  for (const m of source.matchAll(/export\s*(?:type\s*)?\{([^}]*)\}/g)) {
    for (const part of m[1]!.split(",")) {
      const name = part
        .trim()
        .replace(/^type\s+/, "")
        .split(/\s+as\s+/)
        .pop()!
        .trim();
      if (name !== "") names.add(name);
    }
  }
  for (const m of source.matchAll(/export\s+(?:const|function|class|type|interface|enum)\s+(\w+)/g)) names.add(m[1]!);
  return [...names];
}

const packages = readdirSync(join(ROOT, "packages")).filter((p) => existsSync(join(ROOT, "packages", p, "src", "index.ts")));

describe("package READMEs document every export", () => {
  it.each(packages)("%s", (pkg) => {
    const index = readFileSync(join(ROOT, "packages", pkg, "src", "index.ts"), "utf8");
    const readmePath = join(ROOT, "packages", pkg, "README.md");
    const readme = existsSync(readmePath) ? readFileSync(readmePath, "utf8") : "";
    const missing = exportedNames(index).filter((n) => !new RegExp(`\\b${n}\\b`).test(readme));
    if (PENDING.has(pkg)) {
      expect(missing.length, `${pkg} now documents every export: remove it from PENDING`).toBeGreaterThan(0);
      return;
    }
    expect(missing, `exported by packages/${pkg}/src/index.ts but not named in its README`).toEqual([]);
  });
});
