import { describe, expect, it } from "vitest";
import { InputError, itemsPast, MAX_JSON_ITEMS, MAX_YAML_ITEMS, parseDocumentText } from "./index.js";

/** Issue 38: a 10 MB list inside the 16 MiB cap exhausted the heap as a spec, profile or grid. */
function refusal(text: string, file: string): string {
  try {
    parseDocumentText(text, file);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    return e.message;
  }
  throw new Error("expected an InputError");
}

describe("documents with more values than any spec, profile or grid has", () => {
  it("counts commas (and in YAML line breaks) in one pass, and says where the limit was passed", () => {
    expect(itemsPast("a,b\nc", 2, true)).toBeUndefined();
    // The third separator (the comma at offset 5) passes a limit of 2.
    expect(itemsPast("a,b\nc,d", 2, true)).toBe(5);
    expect(itemsPast("a,b\nc,d", 2, false)).toBeUndefined();
  });

  it("YAML: exactly MAX_YAML_ITEMS lines and commas parse; one more is refused before the parser runs, located", () => {
    // One scalar holding 99,999 commas, then its line break: 100,000 separators.
    const at = `a: "${",".repeat(MAX_YAML_ITEMS - 1)}"\n`;
    expect(parseDocumentText(at, "g.yaml").value).toEqual({ a: ",".repeat(MAX_YAML_ITEMS - 1) });
    // One comma more: the 100,001st separator is the line break at column 4 + 100,000 + 1 + 1.
    expect(refusal(`a: "${",".repeat(MAX_YAML_ITEMS)}"\n`, "g.yaml")).toMatch(/^g\.yaml:1:100006: has more than 100,000 lines and commas; /);
  });

  it("JSON: exactly MAX_JSON_ITEMS commas parse; one more is refused", () => {
    // The commas of one string count too (the pass does not parse): cheap to test at the bound.
    const doc = (n: number) => `{"a": "${",".repeat(n)}"}`;
    expect((parseDocumentText(doc(MAX_JSON_ITEMS), "p.json").value as { a: string }).a).toHaveLength(MAX_JSON_ITEMS);
    // {"a": " is 7 characters: the 1,000,001st comma is at offset 7 + 1,000,000, column 1,000,008.
    expect(refusal(doc(MAX_JSON_ITEMS + 1), "p.json")).toMatch(/^p\.json:1:1000008: has more than 1,000,000 values \(commas\); /);
  });
});
