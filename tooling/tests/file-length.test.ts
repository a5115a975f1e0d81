// Issue 37's rule for a codebase a newcomer can read: no source file over 500 lines and no class
// over 400, except where the file says why on a line starting `// Long file:`. Every .ts file
// under packages/*/src and apps/*/src counts, tests included (a newcomer reads those too; a test
// file that grows past the limit splits by what it tests, like any other).
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const MAX_FILE_LINES = 500;
const MAX_CLASS_LINES = 400;
const REASON = /^\s*\/\/ Long file: \S/m;

/**
 * Files over a limit today that are being split (issue 37) and have no `// Long file:` line yet;
 * the list empties when that work lands, and a file only ever leaves it.
 */
const BEING_SPLIT: readonly string[] = [];

function sources(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) files.push(relative(root, p));
    }
  };
  for (const top of ["packages", "apps"])
    for (const e of readdirSync(join(root, top), { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const src = join(root, top, e.name, "src");
      try {
        walk(src);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
    }
  return files.sort();
}

/** Lines as an editor counts them (a final newline ends the last line, it does not start one). */
const lineCount = (text: string): number => text.split("\n").length - (text.endsWith("\n") ? 1 : 0);

/** Classes longer than the limit: "Name (N lines)". */
function longClasses(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.end).line;
      if (last - first + 1 > MAX_CLASS_LINES) out.push(`class ${node.name?.text ?? "(anonymous)"} (${last - first + 1} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** What is over a limit in each file without a `// Long file:` line. */
function offenders(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const file of sources()) {
    const text = readFileSync(join(root, file), "utf8");
    if (REASON.test(text)) continue;
    const lines = lineCount(text);
    const over = [...(lines > MAX_FILE_LINES ? [`${lines} lines`] : []), ...longClasses(file, text)];
    if (over.length > 0) found.set(file, over);
  }
  return found;
}

describe("source files a newcomer can read", () => {
  const found = offenders();

  it(`are at most ${MAX_FILE_LINES} lines with classes of at most ${MAX_CLASS_LINES}, or say why in a "// Long file:" line`, () => {
    const unexplained = [...found].filter(([file]) => !BEING_SPLIT.includes(file)).map(([file, over]) => `${file}: ${over.join(", ")}`);
    expect(unexplained).toEqual([]);
  });

  it("list a file as being split only while it is over a limit", () => {
    expect(BEING_SPLIT.filter((file) => !found.has(file))).toEqual([]);
  });

  it("are found where the rule looks (the walk is not empty)", () => {
    expect(sources()).toEqual(expect.arrayContaining(["apps/cli/src/cli.ts", "packages/sweep/src/index.ts"]));
  });
});
