import { describe, expect, it } from "vitest";
import { InputError } from "./errors.js";
import { SpecSchema } from "./spec.js";
import { parseDocumentText, validateDocument } from "./document.js";
import { editDistance, knownKeysAt, suggestSimilar } from "./suggest.js";

describe("suggestSimilar", () => {
  it("measures edits with adjacent swaps as one", () => {
    // seqs -> seq: one deletion; topolgoy -> topology: one swap (go/og); abc -> xyz: 3 substitutions.
    expect([editDistance("max_num_seq", "max_num_seqs"), editDistance("topolgoy", "topology"), editDistance("abc", "xyz")]).toEqual([1, 1, 3]);
  });

  it("offers the closest keys within 2 edits, ignoring case, and nothing for a word far from all", () => {
    const keys = ["max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size"];
    expect(suggestSimilar("max_num_seq", keys)).toEqual(["max_num_seqs"]);
    expect(suggestSimilar("Block_Size", keys)).toEqual(["block_size"]);
    // "blocks" vs "block_size": 5 edits, too far.
    expect(suggestSimilar("blocks", keys)).toEqual([]);
    // A 3-letter word 2 edits away keeps only 1/3 of itself, under the 40 % commander asks.
    expect(suggestSimilar("abc", ["xbz"])).toEqual([]);
  });
});

describe("knownKeysAt", () => {
  it("follows the union option the value picks (timing of type linear)", () => {
    const root = { timing: { type: "linear", step_m: 1 } };
    const keys = knownKeysAt(SpecSchema, root, ["timing"]);
    expect(keys).toContain("step_ms");
    // The fixed timing's keys are not offered for a linear one.
    expect(keys).not.toContain("prefill_ms");
  });

  it("a misspelled spec key is told the one it likely meant, at its line", () => {
    const text =
      "version: 1\nprofile: ./p.json\ntopolgy: { kind: aggregated, workers: 1 }\ntiming: { type: fixed, prefill_ms: 1, decode_ms: 1 }\nworkload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }\n";
    let error: unknown;
    try {
      validateDocument(SpecSchema, parseDocumentText(text, "s.yaml"));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InputError);
    const issue = (error as InputError).issues.find((i) => i.path === "topolgy");
    expect(issue).toMatchObject({ message: "unknown key (did you mean topology?)", line: 3 });
  });
});
