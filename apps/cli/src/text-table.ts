/**
 * The CLI's one column table: each column padded to its widest cell, columns two spaces apart,
 * trailing blanks trimmed. `align` gives each column's alignment as a string of "l" and "r"
 * ("llrr"), or the number of left-aligned columns before the right-aligned ones (numbers).
 */
export function tableLines(rows: readonly (readonly string[])[], align: string | number = 1): string[] {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  const left = (i: number) => (typeof align === "number" ? i < align : align[i] !== "r");
  return rows.map((r) =>
    r
      .map((c, i) => (left(i) ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join("  ")
      .trimEnd(),
  );
}

/** {@link tableLines} joined into one block of text (no final newline). */
export const textTable = (rows: readonly (readonly string[])[], align: string | number = 1): string => tableLines(rows, align).join("\n");
