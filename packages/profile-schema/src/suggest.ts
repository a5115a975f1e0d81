import type { z } from "zod";

/**
 * Optimal string alignment distance (Levenshtein with adjacent transpositions), as commander
 * measures a misspelled flag against the known ones.
 */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** Words longer than this are not compared (a misspelling is a short key, not a pasted paragraph). */
const MAX_WORD = 64;

/**
 * The known words closest to `word` for a "did you mean": within 2 edits and sharing over 40 % of
 * the word (commander's rule for flags), ignoring case; the closest ones, sorted. Empty when none
 * is close.
 */
export function suggestSimilar(word: string, candidates: readonly string[]): string[] {
  if (word.length > MAX_WORD) return [];
  const w = word.toLowerCase();
  let best = 3;
  let found: string[] = [];
  for (const c of new Set(candidates)) {
    if (c.length > MAX_WORD || c === word) continue;
    const dist = editDistance(w, c.toLowerCase());
    const length = Math.max(w.length, c.length);
    if (dist > 2 || (length - dist) / length <= 0.4) continue;
    if (dist < best) [best, found] = [dist, [c]];
    else if (dist === best) found.push(c);
  }
  return found.sort();
}

type Schema = z.core.$ZodType;
interface Def {
  readonly type: string;
  readonly innerType?: Schema;
  readonly in?: Schema;
  readonly getter?: () => Schema;
  readonly options?: readonly Schema[];
  readonly shape?: Readonly<Record<string, Schema>>;
  readonly element?: Schema;
  readonly valueType?: Schema;
  readonly values?: readonly unknown[];
}
const defOf = (s: Schema): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

/** The concrete schemas `s` stands for at `value`: wrappers opened, union options that fit the value. */
function concrete(s: Schema, value: unknown, depth = 0): Schema[] {
  if (depth > 32) return [];
  const def = defOf(s);
  if (def.innerType !== undefined) return concrete(def.innerType, value, depth + 1);
  if (def.type === "pipe" && def.in !== undefined) return concrete(def.in, value, depth + 1);
  if (def.type === "lazy" && def.getter !== undefined) return concrete(def.getter(), value, depth + 1);
  if (def.type === "union" && def.options !== undefined) {
    const all = def.options.flatMap((o) => concrete(o, value, depth + 1));
    const objects = all.filter((o) => defOf(o).type === "object");
    // Among object options, the ones whose literal fields (a discriminator) the value matches.
    const fitting = objects.filter((o) => literalsMatch(o, value));
    return fitting.length > 0 ? fitting : all;
  }
  return [s];
}

function literalsMatch(o: Schema, value: unknown): boolean {
  if (value === null || typeof value !== "object") return false;
  for (const [k, field] of Object.entries(defOf(o).shape ?? {})) {
    const f = defOf(field);
    if (f.type === "literal" && f.values !== undefined && !f.values.includes((value as Record<string, unknown>)[k])) return false;
  }
  return true;
}

/**
 * The keys an object at `path` of `root` may have under `schema` (the union options that fit the
 * value there), for suggesting the key a misspelled one meant. Empty when the path leads nowhere.
 */
export function knownKeysAt(schema: Schema, root: unknown, path: readonly PropertyKey[]): string[] {
  let schemas = concrete(schema, root);
  let value = root;
  for (const key of path) {
    value = value !== null && typeof value === "object" ? (value as Record<PropertyKey, unknown>)[key] : undefined;
    schemas = schemas.flatMap((s) => {
      const def = defOf(s);
      const next = def.type === "object" ? def.shape?.[String(key)] : def.type === "array" ? def.element : def.type === "record" ? def.valueType : undefined;
      return next === undefined ? [] : concrete(next, value);
    });
  }
  return schemas.flatMap((s) => Object.keys(defOf(s).shape ?? {}));
}
