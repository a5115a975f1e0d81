import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkedHash, knownHash, rememberHash } from "./host.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-host-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});
const sha = (text: string) => createHash("sha256").update(text).digest("hex");

describe("a trace's hash, shared between the threads of a local sweep", () => {
  it("is taken once per file stamp (size, modification time) and handed on with it", async () => {
    const file = join(dir, "trace.jsonl");
    writeFileSync(file, "one\n");
    expect(knownHash(file)).toBeUndefined();
    expect(await checkedHash(file)).toBe(sha("one\n"));
    const known = knownHash(file)!;
    expect(known.sha256).toBe(sha("one\n"));
    // A thread handed a hash with the file's current stamp takes it without reading the file.
    rememberHash({ key: known.key, sha256: "taken-on-trust" });
    expect(await checkedHash(file)).toBe("taken-on-trust");
    // A file whose stamp changed (here its size) is hashed again.
    writeFileSync(file, "two lines\n");
    expect(await checkedHash(file)).toBe(sha("two lines\n"));
  });
});
