import { describe, expect, it } from "vitest";
import { InputError } from "./errors.js";
import { parseProfile } from "./parse.js";

function issuesOf(text: string, file: string): string[] {
  try {
    parseProfile(text, file);
  } catch (e) {
    if (e instanceof InputError) return e.issues.map((i) => `${i.line ?? "-"}:${i.column ?? "-"} ${i.path}: ${i.message}`);
    throw e;
  }
  throw new Error("expected the profile to be refused");
}

describe("located document errors", () => {
  it("names a non-finite number as it is, not as JSON's null", () => {
    // 1e400 overflows a double to Infinity; the key starts on line 2, column 3.
    const text = '{"schema_version": 1, "model": "m", "vllm_version": "0.32.0", "tensor_parallel_size": 1,\n  "kv_bytes_per_token": 1e400}';
    const [issue] = issuesOf(text, "p.json");
    expect(issue).toMatch(/^2:3 kv_bytes_per_token: .*\(got Infinity\)$/);
  });

  it("refuses an empty file and a file of blanks", () => {
    expect(issuesOf("", "p.json")).toEqual(["-:- : the file is empty"]);
    expect(issuesOf(" \n\t\n", "p.yaml")).toEqual(["-:- : the file is empty"]);
  });
});
