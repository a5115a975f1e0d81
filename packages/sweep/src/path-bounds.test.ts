import { specPathTooLong } from "./overrides.js";
import { InputError, parseDocumentText } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { MAX_SPEC_PATH_CHARS, MAX_SPEC_PATH_KEYS, parseGrid, parseSetFlag, parseSpecPath } from "./index.js";

/** Issue 38: a --set path of 60,000 keys took 2.1 GB and up to 87 s; a grid key of 100,000 ran on past 90 s. */
function message(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof InputError) return e.message;
    throw e;
  }
  throw new Error("expected an InputError");
}

const keys = (n: number) => Array.from({ length: n }, () => "a").join(".");

describe("spec path bounds", () => {
  it("a path of MAX_SPEC_PATH_KEYS keys parses; one more key, or more than MAX_SPEC_PATH_CHARS characters, does not", () => {
    expect(parseSpecPath(keys(MAX_SPEC_PATH_KEYS))).toHaveLength(64);
    expect(specPathTooLong(keys(MAX_SPEC_PATH_KEYS))).toBeUndefined();
    expect(parseSpecPath(keys(MAX_SPEC_PATH_KEYS + 1))).toBeUndefined();
    // An index is a key too: 63 names and one [0] are 64 keys.
    expect(parseSpecPath(`${keys(63)}[0]`)).toHaveLength(64);
    expect(specPathTooLong(`${keys(63)}[0][1]`)).toBe("has 65 keys; a spec path has at most 64 (the deepest spec field is six keys deep)");
    expect(parseSpecPath("a".repeat(MAX_SPEC_PATH_CHARS))).toEqual(["a".repeat(1024)]);
    expect(specPathTooLong("a".repeat(MAX_SPEC_PATH_CHARS + 1))).toBe("is 1025 characters long; a spec path has at most 1024");
  });

  it("a --set path of 60,000 keys is refused at once, its text cut short in the message", () => {
    const started = performance.now();
    const text = message(() => parseSetFlag(`${keys(60_000)}=1`, "/work"));
    // 60,000 keys joined by 59,999 dots: 119,999 characters, and "=1": a 120,001-character flag.
    expect(text).toBe(`--set ${"a.".repeat(30)}... (120001 characters): the path is 119999 characters long; a spec path has at most 1024`);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it("a grid key of 100,000 keys is refused at once, located", () => {
    const started = performance.now();
    const file = JSON.stringify({ [keys(100_000)]: [1, 2] });
    const text = message(() => parseGrid(parseDocumentText(file, "/g/grid.json")));
    expect(text).toMatch(/^\/g\/grid\.json:1:2: a\.a\.a.*\.\.\. \(199999 characters\): is 199999 characters long; a spec path has at most 1024$/);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
