import { findNodeAtLocation, getNodePath, getNodeValue, parseTree, printParseErrorCode, type Node as JsonNode, type ParseError } from "jsonc-parser";
import { isMap, isSeq, LineCounter, parseDocument as parseYamlDocument, visit, type Document, type Node as YamlNode } from "yaml";
import type { z } from "zod";
import { formatPath, InputError, type InputIssue } from "./errors.js";
import { deepNestingOffset, deepValuePath } from "./json-text.js";
import { MAX_JSON_ITEMS, MAX_NESTING_DEPTH, MAX_YAML_ITEMS } from "./limits.js";
import { knownKeysAt, suggestSimilar } from "./suggest.js";

export type DocumentFormat = "json" | "yaml";

/** A parsed JSON or YAML document that can say where a field path sits in its text. */
export interface LocatedDocument {
  readonly file: string;
  readonly value: unknown;
  /** Line and column (1-based) of the deepest existing node on `path`. */
  locate(path: readonly PropertyKey[]): { line: number; column: number } | undefined;
  /**
   * Problems found while reading that a schema cannot see: an integer literal beyond 2^53 that a
   * double cannot hold exactly (`9007199254740993` would silently become `9007199254740992`).
   */
  readonly issues: readonly InputIssue[];
}

const TWO_POW_53 = 2n ** 53n;

/** The issue for an integer literal a double cannot hold exactly, or undefined when it fits. */
function imprecise(literal: bigint, path: readonly PropertyKey[]): InputIssue | undefined {
  const abs = literal < 0n ? -literal : literal;
  if (abs <= TWO_POW_53) return undefined;
  const asDouble = Number(literal);
  // Beyond 1.8e308 the double is infinite; a 400-digit literal is no number kvsim can use.
  if (Number.isFinite(asDouble) && BigInt(asDouble) === literal) return undefined;
  const digits = abs.toString().length;
  const shown = digits > 30 ? `a ${digits}-digit integer` : String(literal);
  return { path: formatPath(path), message: `must be at most 2^53 = 9007199254740992 (got ${shown}, too large to hold exactly)` };
}

/** The refusal of a document that nests deeper than MAX_NESTING_DEPTH. */
const tooDeep = (at: { line: number; column: number } | undefined): InputIssue => ({
  path: "",
  message: `nests arrays and objects more than ${MAX_NESTING_DEPTH} levels deep; no kvsim document needs more than a few`,
  ...(at ?? {}),
});

/** Picks the format from a file name: `.json` is JSON, anything else YAML (YAML also reads JSON). */
function formatForFile(file: string): DocumentFormat {
  return file.toLowerCase().endsWith(".json") ? "json" : "yaml";
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
  return starts;
}

function positionOf(starts: readonly number[], offset: number): { line: number; column: number } {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid]! <= offset) lo = mid;
    else hi = mid - 1;
  }
  return { line: lo + 1, column: offset - starts[lo]! + 1 };
}

/**
 * The offset at which `text` passes `max` commas (and, with `lines`, line breaks too), or undefined.
 * One pass over the characters, before a parser builds a node for each value.
 */
export function itemsPast(text: string, max: number, lines: boolean): number | undefined {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2c || (lines && c === 0x0a)) {
      if (++n > max) return i;
    }
  }
  return undefined;
}

const tooManyItems = (what: string, max: number, at: { line: number; column: number } | undefined): InputIssue => ({
  path: "",
  message: `has more than ${max.toLocaleString("en-US")} ${what}; a spec, profile or grid has a few hundred, and kvsim stops here rather than spend gigabytes parsing it${what === "lines and commas" ? " (a larger table parses far cheaper as JSON)" : ""}`,
  ...(at ?? {}),
});

function parseJson(text: string, file: string): LocatedDocument {
  const starts = lineStarts(text);
  const many = itemsPast(text, MAX_JSON_ITEMS, false);
  if (many !== undefined) throw new InputError(file, [tooManyItems("values (commas)", MAX_JSON_ITEMS, positionOf(starts, many))]);
  // jsonc-parser recurses once per level: refuse deep nesting before it can overflow the stack.
  const deep = deepNestingOffset(text, MAX_NESTING_DEPTH);
  if (deep !== undefined) throw new InputError(file, [tooDeep(positionOf(starts, deep))]);
  const errors: ParseError[] = [];
  const tree = parseTree(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  if (errors.length > 0 || tree === undefined) {
    const issues: InputIssue[] = errors.slice(0, 5).map((e) => ({
      path: "",
      message: `malformed JSON: ${describeJsonError(printParseErrorCode(e.error))}`,
      ...positionOf(starts, e.offset),
    }));
    throw new InputError(file, issues.length > 0 ? issues : [{ path: "", message: "malformed JSON" }]);
  }
  const value: unknown = getNodeValue(tree);
  const issues: InputIssue[] = [];
  const visit = (node: JsonNode): void => {
    if (node.type === "number") {
      const literal = text.slice(node.offset, node.offset + node.length);
      // Only long integer literals can lose digits; fractions and exponents are floats by intent.
      if (literal.length >= 16 && /^-?\d+$/.test(literal)) {
        const issue = imprecise(BigInt(literal), getNodePath(node));
        if (issue !== undefined) issues.push({ ...issue, ...positionOf(starts, node.parent?.type === "property" ? node.parent.offset : node.offset) });
      }
    }
    if (node.type === "object") {
      // JSON.parse and jsonc keep the last of two equal keys; a config file with both is a mistake.
      const seen = new Map<string, { line: number; column: number }>();
      for (const prop of node.children ?? []) {
        const key = prop.children?.[0];
        if (key?.type !== "string" || typeof key.value !== "string") continue;
        const at = positionOf(starts, prop.offset);
        const first = seen.get(key.value);
        if (first === undefined) seen.set(key.value, at);
        else {
          const where = first.line === at.line ? `at column ${first.column}` : `on line ${first.line}`;
          issues.push({ path: formatPath([...getNodePath(node), key.value]), message: `duplicate key (also ${where})`, ...at });
        }
      }
    }
    node.children?.forEach(visit);
  };
  visit(tree);
  return {
    file,
    value,
    issues,
    locate(path) {
      for (let n = path.length; n >= 0; n--) {
        const node: JsonNode | undefined = findNodeAtLocation(tree, path.slice(0, n) as (string | number)[]);
        if (node !== undefined) {
          const at = node.parent?.type === "property" ? node.parent.offset : node.offset;
          return positionOf(starts, at);
        }
      }
      return undefined;
    },
  };
}

/**
 * Why `text` is not JSON, in one line, and where (1-based line and column of the first problem),
 * for a caller whose JSON.parse failed: its message quotes the text, newlines and all. Deep nesting
 * is named before jsonc-parser (which recurses per level) sees it.
 */
export function jsonSyntaxError(text: string): { message: string; line: number; column: number } {
  const starts = lineStarts(text);
  const deep = deepNestingOffset(text, MAX_NESTING_DEPTH);
  if (deep !== undefined) return { message: tooDeep(undefined).message, ...positionOf(starts, deep) };
  const errors: ParseError[] = [];
  parseTree(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const first = errors[0];
  if (first === undefined) return { message: "malformed JSON", line: 1, column: 1 };
  return { message: `malformed JSON: ${describeJsonError(printParseErrorCode(first.error))}`, ...positionOf(starts, first.offset) };
}

/** Plain words for a jsonc-parser error code. */
export function describeJsonError(code: string): string {
  const words: Record<string, string> = {
    InvalidSymbol: "unexpected character",
    InvalidNumberFormat: "invalid number",
    PropertyNameExpected: "expected a double-quoted property name",
    ValueExpected: "expected a value",
    ColonExpected: "expected ':'",
    CommaExpected: "expected ','",
    CloseBraceExpected: "expected '}'",
    CloseBracketExpected: "expected ']'",
    EndOfFileExpected: "unexpected content after the value",
    InvalidCommentToken: "comments are not allowed",
    UnexpectedEndOfComment: "unterminated comment",
    UnexpectedEndOfString: "unterminated string",
    UnexpectedEndOfNumber: "unterminated number",
    InvalidUnicode: "invalid unicode escape",
    InvalidEscapeCharacter: "invalid escape character",
    InvalidCharacter: "invalid character in string",
  };
  return words[code] ?? code;
}

/** The most alias expansions a YAML document may make: a few anchors reused is normal, a bomb is not. */
const MAX_YAML_ALIASES = 100;

/** What the yaml library reports when it gives up on deep nesting. */
const STACK_OVERFLOW = "Maximum call stack size exceeded";

function parseYaml(text: string, file: string): LocatedDocument {
  const many = itemsPast(text, MAX_YAML_ITEMS, true);
  if (many !== undefined) throw new InputError(file, [tooManyItems("lines and commas", MAX_YAML_ITEMS, positionOf(lineStarts(text.slice(0, many + 1)), many))]);
  const lineCounter = new LineCounter();
  // Integers come back as bigint so that one beyond 2^53 can be told from its rounded double.
  const doc = parseYamlDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false, intAsBigInt: true });
  const at = (offset: number) => {
    const pos = lineCounter.linePos(offset);
    return { line: pos.line, column: pos.col };
  };
  if (doc.errors.length > 0) {
    const deep = doc.errors.find((e) => e.message.includes(STACK_OVERFLOW));
    if (deep !== undefined) throw new InputError(file, [tooDeep(at(deep.pos[0]))]);
    throw new InputError(
      file,
      doc.errors.slice(0, 5).map((e) => ({ path: "", message: `malformed YAML: ${e.message.split("\n")[0] ?? e.code}`, ...at(e.pos[0]) })),
    );
  }
  const issues: InputIssue[] = [];
  const located: LocatedDocument = {
    file,
    value: undefined,
    issues,
    locate(path) {
      for (let n = path.length; n >= 0; n--) {
        const node = nodeAt(doc.contents, path.slice(0, n));
        if (node?.range !== undefined && node.range !== null) return at(node.range[0]);
      }
      return undefined;
    },
  };
  let js: unknown;
  try {
    js = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (e) {
    // An alias to no anchor, an alias bomb, or aliases nesting a value past the stack.
    if (e instanceof ReferenceError || (e instanceof RangeError && e.message.includes(STACK_OVERFLOW))) throw new InputError(file, [aliasIssue(doc, e, at)]);
    throw e;
  }
  const deep = deepValuePath(js, MAX_NESTING_DEPTH);
  if (deep !== undefined) throw new InputError(file, [tooDeep(located.locate(deep))]);
  const value = numbersFromBigInts(js, [], (path, literal) => {
    const issue = imprecise(literal, path);
    if (issue !== undefined) issues.push({ ...issue, ...(located.locate(path) ?? {}) });
  });
  return { ...located, value };
}

/** Why the aliases of a YAML document cannot be expanded, at the alias to blame. */
function aliasIssue(doc: Document, error: Error, at: (offset: number) => { line: number; column: number }): InputIssue {
  let unresolved: { name: string; offset: number } | undefined;
  let first: number | undefined;
  visit(doc, {
    Alias(_, node) {
      const offset = node.range?.[0] ?? 0;
      first ??= offset;
      if (node.resolve(doc) === undefined) {
        unresolved = { name: node.source, offset };
        return visit.BREAK;
      }
      return undefined;
    },
  });
  if (unresolved !== undefined) {
    return {
      path: "",
      message: `the alias *${unresolved.name} refers to no anchor (an anchor &${unresolved.name} must come before it)`,
      ...at(unresolved.offset),
    };
  }
  const why = error instanceof RangeError ? "nest a value too deeply" : `expand to more than ${MAX_YAML_ALIASES} copies`;
  return { path: "", message: `the YAML aliases ${why} (an alias bomb?); write the values out instead`, ...(first === undefined ? {} : at(first)) };
}

/** Replaces every bigint of a YAML value by a number, reporting each one to `seen` with its path. */
function numbersFromBigInts(v: unknown, path: PropertyKey[], seen: (path: readonly PropertyKey[], literal: bigint) => void): unknown {
  if (typeof v === "bigint") {
    seen(path, v);
    return Number(v);
  }
  if (Array.isArray(v)) return v.map((x, i) => numbersFromBigInts(x, [...path, i], seen));
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      // defineProperty, so a `__proto__` key stays a plain key (and is refused as unknown).
      Object.defineProperty(out, k, { value: numbersFromBigInts(x, [...path, k], seen), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return v;
}

/** Walks a YAML node tree; for a map key returns the key node so errors point at the key. */
function nodeAt(root: unknown, path: readonly PropertyKey[]): (YamlNode & { range?: [number, number, number] | null }) | undefined {
  let node: unknown = root;
  for (let i = 0; i < path.length; i++) {
    const key = path[i];
    if (isMap(node)) {
      const pair = node.items.find((p) => (p.key as { value?: unknown } | null)?.value === key);
      if (pair === undefined) return undefined;
      if (i === path.length - 1) return pair.key as YamlNode;
      node = pair.value;
    } else if (isSeq(node) && typeof key === "number") {
      node = node.items[key];
    } else {
      return undefined;
    }
  }
  return node as YamlNode | undefined;
}

/**
 * Parses JSON or YAML text. Malformed text, an empty file, or a file that holds no document is
 * refused with the line and column of the problem.
 */
export function parseDocumentText(text: string, file: string, format: DocumentFormat = formatForFile(file)): LocatedDocument {
  if (text.trim() === "") throw new InputError(file, [{ path: "", message: "the file is empty" }]);
  // A trace handed where a document belongs reads as malformed YAML or JSON, or as one long YAML
  // string: say what it is instead.
  const notTrace = () => {
    const trace = traceLike(text);
    if (trace === undefined) return;
    throw new InputError(file, [
      {
        path: "",
        message: `expected one JSON or YAML document (a profile or a spec), but this is ${trace}; a trace is checked through the spec that names it (workload.trace)`,
        line: 1,
      },
    ]);
  };
  let doc: LocatedDocument;
  try {
    doc = format === "json" ? parseJson(text, file) : parseYaml(text, file);
  } catch (e) {
    if (e instanceof InputError) notTrace();
    throw e;
  }
  if (doc.value === null || typeof doc.value !== "object") notTrace();
  return doc;
}

/** "a JSON Lines trace" or "an Azure CSV trace" when the text looks like one, else undefined. */
function traceLike(text: string): string | undefined {
  const lines: string[] = [];
  for (let start = 0; start < text.length && lines.length < 2;) {
    const end = text.indexOf("\n", start);
    const line = text.slice(start, end === -1 ? text.length : end).trim();
    if (line !== "") lines.push(line);
    start = end === -1 ? text.length : end + 1;
  }
  if (lines[0]?.replace(/^\uFEFF/, "").startsWith("TIMESTAMP,") === true) return "an Azure CSV trace (its header is TIMESTAMP,...)";
  if (lines.length < 2) return undefined;
  const isObject = (line: string) => {
    try {
      const v: unknown = JSON.parse(line);
      return v !== null && typeof v === "object" && !Array.isArray(v);
    } catch {
      return false;
    }
  };
  return lines.every(isObject) ? "a JSON Lines file (one JSON object per line, like a Mooncake or kvsim trace)" : undefined;
}

/** A short rendering of an offending value for messages (JSON, cut at 60 characters). */
export function renderValue(v: unknown): string {
  let s: string;
  try {
    // JSON.stringify turns NaN and the infinities into "null"; name them as they are.
    const json: unknown = typeof v === "bigint" || (typeof v === "number" && !Number.isFinite(v)) ? String(v) : JSON.stringify(v);
    s = typeof json === "string" ? json : String(v);
  } catch {
    // A value nested past the stack cannot be rendered at all; say what it is.
    s = Array.isArray(v) ? "[...]" : typeof v === "object" && v !== null ? "{...}" : String(v);
  }
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/** Turns zod issues into located input issues, naming the offending value where there is one. */
export function zodIssues(error: z.ZodError, locate?: LocatedDocument["locate"], known?: KnownKeys): InputIssue[] {
  const out: InputIssue[] = [];
  collectIssues(error.issues, [], out, locate, known);
  return out;
}

/** The schema and the value it checked: an unknown key is told the known key it likely meant. */
export interface KnownKeys {
  readonly schema: z.core.$ZodType;
  readonly root: unknown;
}

/** `unknown key`, with `(did you mean max_num_seqs?)` when a known key at that place is close. */
function unknownKeyMessage(path: readonly PropertyKey[], key: string, known: KnownKeys | undefined): string {
  if (known === undefined) return "unknown key";
  const near = suggestSimilar(key, knownKeysAt(known.schema, known.root, path.slice(0, -1)));
  return near.length === 0 ? "unknown key" : `unknown key (did you mean ${near.slice(0, 3).join(" or ")}?)`;
}

/** True when a union branch failed because the input has another type altogether. */
const wrongType = (branch: readonly z.core.$ZodIssue[]): boolean => branch.some((i) => i.path.length === 0 && i.code === "invalid_type");

function collectIssues(
  issues: readonly z.core.$ZodIssue[],
  prefix: readonly PropertyKey[],
  out: InputIssue[],
  locate: LocatedDocument["locate"] | undefined,
  known?: KnownKeys,
): void {
  for (const issue of issues) {
    const base = [...prefix, ...issue.path];
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const path = [...base, key];
        out.push({ path: formatPath(path), message: unknownKeyMessage(path, key, known), ...(locate?.(path) ?? {}) });
      }
      continue;
    }
    if (issue.code === "invalid_union") {
      // A union of a path and an inline object: when the input has the type of exactly one
      // branch, that branch's own problems say far more than "matched no option".
      const fitting = issue.errors.filter((branch) => !wrongType(branch));
      if (fitting.length === 1) {
        collectIssues(fitting[0]!, base, out, locate, known);
        continue;
      }
    }
    const input = (issue as { input?: unknown }).input;
    if (issue.code === "invalid_type" && input === undefined && issue.message.endsWith("received undefined")) {
      out.push({ path: formatPath(base), message: "is required", ...(locate?.(base) ?? {}) });
      continue;
    }
    // A refinement of a whole object (code custom) says what is wrong in its own words.
    const scalar = typeof input === "number" || typeof input === "string" || typeof input === "boolean";
    const shown = issue.code === "custom" ? scalar && !issue.message.includes("(got ") : input !== undefined && issue.code !== "invalid_union";
    const got = shown ? ` (got ${renderValue(input)})` : "";
    out.push({ path: formatPath(base), message: `${issue.message}${got}`, ...(locate?.(base) ?? {}) });
  }
}

/** Validates a located document against a schema; throws InputError listing every problem. */
export function validateDocument<S extends z.ZodType>(schema: S, doc: LocatedDocument): z.output<S> {
  const result = schema.safeParse(doc.value, { reportInput: true });
  if (result.success && doc.issues.length === 0) return result.data;
  // A reading issue explains its field better than the schema's view of the rounded value.
  const taken = new Set(doc.issues.map((i) => i.path));
  const schemaIssues = result.success ? [] : zodIssues(result.error, (p) => doc.locate(p), { schema, root: doc.value }).filter((i) => !taken.has(i.path));
  throw new InputError(doc.file, [...doc.issues, ...schemaIssues]);
}

/** Validates an already-parsed value (an inline object, say); issues carry paths but no lines. */
export function validateValue<S extends z.ZodType>(schema: S, value: unknown, file: string): z.output<S> {
  const result = schema.safeParse(value, { reportInput: true });
  if (!result.success) throw new InputError(file, zodIssues(result.error, undefined, { schema, root: value }));
  return result.data;
}
