import { describe, expect, it } from "vitest";
import { tableLines, textTable } from "./text-table.js";

describe("the CLI's column table", () => {
  it("pads each column to its widest cell, left then right aligned, two spaces apart, trailing blanks trimmed", () => {
    // Widths: "metric" 6, "12.5" 4. Row 2: "p90" padded to 6, then "3" padded left to 4.
    expect(
      textTable([
        ["metric", "12.5"],
        ["p90", "3"],
      ]),
    ).toBe("metric  12.5\np90        3");
  });

  it("takes a per-column alignment string; a last empty left-aligned cell leaves no trailing blanks", () => {
    expect(
      tableLines(
        [
          ["a", "bb", "c"],
          ["ccc", "d", ""],
        ],
        "lrl",
      ),
    ).toEqual(["a    bb  c", "ccc   d"]);
  });
});
