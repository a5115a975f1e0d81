import { isAbsolute, resolve } from "node:path";
import {
  formatIssue,
  formatPath,
  InputError,
  parseDocumentText,
  resolveSpecPaths,
  SpecSchema,
  zodIssues,
  type InputIssue,
  type LocatedDocument,
  type Spec,
} from "@kvsim/profile-schema";

/** One key of a spec path: an object key, or an array index written `[n]`. */
export type PathKey = string | number;

/**
 * One change to a spec: a path (`engine.max_num_seqs`, `prefill.engine.num_gpu_blocks`,
 * `topology.decode.workers`) and its new value. `null` removes the key. `source` names where the
 * change came from in messages: `--set engine.max_num_seqs=0`, or `grid.yaml:3`.
 */
export interface SpecOverride {
  readonly path: readonly PathKey[];
  readonly value: unknown;
  readonly source: string;
}

/** One problem and the input it is in: a spec file, or the flag or grid line that set the field. */
export interface SourcedIssue {
  readonly file: string;
  readonly issue: InputIssue;
}

/**
 * Invalid input found in more than one place (a spec file and the `--set` flags applied to it).
 * `file` and `issues` are the first source's; `sources` has every issue with its own source, and
 * the message lists them all, one per line.
 */
export class SpecInputError extends InputError {
  readonly sources: readonly SourcedIssue[];

  constructor(sources: readonly SourcedIssue[]) {
    const first = sources[0]?.file ?? "<spec>";
    super(
      first,
      sources.filter((s) => s.file === first).map((s) => s.issue),
    );
    this.sources = sources;
    this.message = sources.map((s) => formatIssue(s.file, s.issue)).join("\n");
  }
}

const KEY = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/** The most keys a spec path may have (the deepest spec field is six keys deep) and its longest text. */
export const MAX_SPEC_PATH_KEYS = 64;
export const MAX_SPEC_PATH_CHARS = 1024;

/** Why `text` is too long to be a spec path, or undefined when it is not (checked in one pass, before any parsing). */
export function specPathTooLong(text: string): string | undefined {
  if (text.length > MAX_SPEC_PATH_CHARS) return `is ${text.length} characters long; a spec path has at most ${MAX_SPEC_PATH_CHARS}`;
  let keys = 1;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 0x2e || text.charCodeAt(i) === 0x5b) keys++;
  if (keys > MAX_SPEC_PATH_KEYS) return `has ${keys} keys; a spec path has at most ${MAX_SPEC_PATH_KEYS} (the deepest spec field is six keys deep)`;
  return undefined;
}

/** A path or flag as messages show it: cut to 80 characters, so a megabyte of it is not printed back. */
export const shownText = (text: string): string => (text.length > 80 ? `${text.slice(0, 60)}... (${text.length} characters)` : text);

/** Parses `a.b[2].c` into its keys; undefined when it is not such a path (or too long to be one, see specPathTooLong). */
export function parseSpecPath(text: string): PathKey[] | undefined {
  if (specPathTooLong(text) !== undefined) return undefined;
  const keys: PathKey[] = [];
  for (const part of text.split(".")) {
    const m = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    if (m === null) return undefined;
    const [, name = "", indices = ""] = m;
    if (name === "" || !KEY.test(name)) return undefined;
    keys.push(name);
    for (const idx of indices.matchAll(/\[(\d+)\]/g)) keys.push(Number(idx[1]));
  }
  return keys;
}

/** Spec fields that hold file paths: relative values given outside the spec file are resolved where they were given. */
const PATH_FIELDS: readonly (readonly string[])[] = [["profile"], ["prefill", "profile"], ["decode", "profile"], ["workload", "trace"]];

/**
 * Parses one `--set <path>=<value>` flag. The value is YAML (`64`, `true`, `[1, 2]`,
 * `{ workers: 2 }`, `null` to remove the key); a relative path given for `profile`,
 * `prefill.profile`, `decode.profile` or `workload.trace` is resolved against `baseDir` (the
 * working folder for a flag). Throws InputError naming the flag.
 */
export function parseSetFlag(flag: string, baseDir: string = process.cwd()): SpecOverride {
  const source = `--set ${shownText(flag)}`;
  const eq = flag.indexOf("=");
  if (eq < 0) throw new InputError(source, [{ path: "", message: "expected <path>=<value>, e.g. engine.max_num_seqs=128" }]);
  const pathText = flag.slice(0, eq).trim();
  const long = specPathTooLong(pathText);
  if (long !== undefined) throw new InputError(source, [{ path: "", message: `the path ${long}` }]);
  const path = parseSpecPath(pathText);
  if (path === undefined)
    throw new InputError(source, [{ path: "", message: `"${pathText}" is not a spec path (keys joined by dots, e.g. prefill.engine.num_gpu_blocks)` }]);
  const text = flag.slice(eq + 1);
  if (text.trim() === "") throw new InputError(source, [{ path: pathText, message: "needs a value after '=' (null removes the key)" }]);
  const doc = parseDocumentText(text, source, "yaml");
  if (doc.issues.length > 0)
    throw new InputError(
      source,
      doc.issues.map((i) => ({ ...i, path: pathText })),
    );
  return { path, value: resolvePathValues(path, doc.value, baseDir), source };
}

/** Resolves relative file paths inside `value` (set at `path`) against `baseDir`. */
export function resolvePathValues(path: readonly PathKey[], value: unknown, baseDir: string): unknown {
  let out = value;
  for (const field of PATH_FIELDS) {
    if (field.length < path.length || !path.every((k, i) => k === field[i])) continue;
    const rest = field.slice(path.length);
    const current = getAt(out, rest);
    if (typeof current === "string" && current.trim() !== "" && !isAbsolute(current)) out = setAt(out, rest, resolve(baseDir, current));
  }
  return out;
}

function getAt(value: unknown, path: readonly PathKey[]): unknown {
  let v = value;
  for (const k of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PathKey, unknown>)[k];
  }
  return v;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Returns a copy of `root` with `value` at `path` (`null` removes the key). Missing mappings on the
 * way are created; a scalar on the way is an error naming the key. `root` is not changed.
 */
export function setAt(root: unknown, path: readonly PathKey[], value: unknown): unknown {
  const [head, ...rest] = path;
  if (head === undefined) return value;
  if (typeof head === "number") {
    if (!Array.isArray(root)) throw new Error(`[${head}] indexes something that is not a list`);
    if (head > root.length) throw new Error(`index [${head}] is beyond the end of the list (${root.length} items)`);
    const copy: unknown[] = [...(root as unknown[])];
    if (value === null && rest.length === 0) copy.splice(head, 1);
    else copy[head] = setAt(copy[head], rest, value);
    return copy;
  }
  if (root !== undefined && !isRecord(root)) throw new Error(`${head} is set inside something that is not a mapping`);
  const copy: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(root ?? {})) define(copy, k, v);
  if (value === null && rest.length === 0) Reflect.deleteProperty(copy, head);
  else define(copy, head, setAt(copy[head], rest, value));
  return copy;
}

/** defineProperty, so a `__proto__` key stays a plain (and refused) key. */
function define(o: Record<string, unknown>, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

/**
 * A spec's `router` written as a policy name (`router: kv_aware`) becomes `{ policy: kv_aware }`
 * when a path goes inside it (`router.overlap_score_weight`), so router settings can be set and
 * swept like any nested field.
 */
export function routerAsMapping(root: unknown, path: readonly PathKey[]): unknown {
  if (path.length < 2 || path[0] !== "router" || !isRecord(root) || typeof root.router !== "string") return root;
  const copy: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(root)) define(copy, k, v);
  define(copy, "router", { policy: root.router });
  return copy;
}

/** Applies overrides in order; a path that cannot be set is an InputError naming its source. */
export function applyOverrides(value: unknown, overrides: readonly SpecOverride[]): unknown {
  let out = value;
  for (const o of overrides) {
    try {
      out = setAt(routerAsMapping(out, o.path), o.path, o.value);
    } catch (e) {
      throw new InputError(o.source, [{ path: formatPath(o.path), message: e instanceof Error ? e.message : String(e) }]);
    }
  }
  return out;
}

const isPrefix = (prefix: readonly PropertyKey[], path: readonly PropertyKey[]): boolean =>
  prefix.length <= path.length && prefix.every((k, i) => k === path[i]);

/**
 * Applies `overrides` to a spec document and validates the result like a spec file. Each problem
 * is named by where it came from: a field an override set is blamed on that override (`--set
 * engine.max_num_seqs=0: engine.max_num_seqs: must be greater than 0`); any other on the spec file
 * with its line. Relative paths are resolved against the spec file's folder. Throws InputError
 * (a SpecInputError when the problems come from several sources).
 */
export function specWithOverrides(doc: LocatedDocument, overrides: readonly SpecOverride[] = []): Spec {
  const value = applyOverrides(doc.value, overrides);
  const result = SpecSchema.safeParse(value, { reportInput: true });
  const taken = new Set(doc.issues.map((i) => i.path));
  if (result.success && doc.issues.length === 0) return resolveSpecPaths(result.data, doc.file);
  const sources: SourcedIssue[] = doc.issues.map((issue) => ({ file: doc.file, issue }));
  if (!result.success) {
    for (const issue of zodIssues(result.error, undefined, { schema: SpecSchema, root: value })) {
      if (taken.has(issue.path)) continue;
      const keys = issue.path === "" ? [] : (parseSpecPath(issue.path) ?? []);
      // The last override that set this field (or a mapping above it) owns the problem.
      const owner = [...overrides].reverse().find((o) => isPrefix(o.path, keys));
      if (owner !== undefined) {
        sources.push({ file: owner.source, issue });
        continue;
      }
      // A problem of a mapping that an override changed below it: say which override.
      const below = overrides.filter((o) => isPrefix(keys, o.path)).map((o) => o.source);
      const located = { ...issue, ...(doc.locate(keys) ?? {}) };
      sources.push({ file: doc.file, issue: below.length === 0 ? located : { ...located, message: `${issue.message} (with ${below.join(", ")})` } });
    }
  }
  const files = new Set(sources.map((s) => s.file));
  if (files.size === 1)
    throw new InputError(
      sources[0]!.file,
      sources.map((s) => s.issue),
    );
  throw new SpecInputError(sources);
}
