/**
 * Cheap scans of JSON text, run before or after a parser: nesting that would overflow a recursive
 * parser or validator, and object keys that appear twice (JSON.parse keeps the last silently).
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const COLON = 0x3a;

/** Offset just past the string that opens at `start` (a `"`), or text.length when unterminated. */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === QUOTE) return i + 1;
  }
  return text.length;
}

/**
 * Offset of the first `[` or `{` (outside strings) that opens a level deeper than `max`, or
 * undefined. Works on malformed text too, so it can guard a recursive parser.
 */
export function deepNestingOffset(text: string, max: number): number | undefined {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) i = stringEnd(text, i) - 1;
    else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > max) return i;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return undefined;
}

/** A key found twice in one object: its name, the offset of the second and of the first. */
export interface DuplicateKey {
  readonly key: string;
  readonly offset: number;
  readonly firstOffset: number;
}

/**
 * The first key that appears twice in the same object of well-formed JSON text (check with
 * JSON.parse first), or undefined. A string is a key when the next non-blank character is `:`.
 */
export function duplicateKey(text: string): DuplicateKey | undefined {
  const found = scanJsonText(text, Number.POSITIVE_INFINITY);
  return found?.kind === "duplicate" ? { key: found.key, offset: found.offset, firstOffset: found.firstOffset } : undefined;
}

/** What one pass over well-formed JSON text finds first: nesting past a depth, or a key twice. */
export type JsonTextProblem = ({ readonly kind: "duplicate" } & DuplicateKey) | { readonly kind: "deep"; readonly offset: number };

/**
 * One pass over well-formed JSON text (check with JSON.parse first) for the first container
 * nested deeper than `maxDepth` or the first key repeated in its object; undefined when neither.
 */
export function scanJsonText(text: string, maxDepth: number): JsonTextProblem | undefined {
  // One entry per open container: the keys seen so far in an object, or undefined in an array.
  const stack: (Map<string, number> | undefined)[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (stack.length >= maxDepth) return { kind: "deep", offset: i };
      stack.push(c === OPEN_BRACE ? new Map() : undefined);
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) stack.pop();
    else if (c === QUOTE) {
      const end = stringEnd(text, i);
      const keys = stack[stack.length - 1];
      if (keys !== undefined) {
        let j = end;
        while (j < text.length && (text.charCodeAt(j) === 0x20 || text.charCodeAt(j) === 0x09 || text.charCodeAt(j) === 0x0a || text.charCodeAt(j) === 0x0d))
          j++;
        if (text.charCodeAt(j) === COLON) {
          const raw = text.slice(i, end);
          const key = raw.includes("\\") ? (JSON.parse(raw) as string) : raw.slice(1, -1);
          const first = keys.get(key);
          if (first !== undefined) return { kind: "duplicate", key, offset: i, firstOffset: first };
          keys.set(key, i);
        }
      }
      i = end - 1;
    }
  }
  return undefined;
}

/**
 * The path to the first value nested deeper than `max` levels of arrays and objects, or undefined.
 * Iterative, so it cannot itself overflow the stack.
 */
export function deepValuePath(value: unknown, max: number): PropertyKey[] | undefined {
  const stack: { readonly v: unknown; readonly path: readonly PropertyKey[] }[] = [{ v: value, path: [] }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { v, path } = item;
    if (v === null || typeof v !== "object") continue;
    if (path.length >= max) return [...path];
    if (Array.isArray(v)) v.forEach((x: unknown, i) => stack.push({ v: x, path: [...path, i] }));
    else for (const [k, x] of Object.entries(v)) stack.push({ v: x, path: [...path, k] });
  }
  return undefined;
}
