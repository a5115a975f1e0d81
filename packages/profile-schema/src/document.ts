import { findNodeAtLocation, getNodeValue, parseTree, printParseErrorCode, type Node as JsonNode, type ParseError } from "jsonc-parser";
import { isMap, isSeq, LineCounter, parseDocument as parseYamlDocument, type Node as YamlNode } from "yaml";
import type { z } from "zod";
import { formatPath, InputError, type InputIssue } from "./errors.js";

export type DocumentFormat = "json" | "yaml";

/** A parsed JSON or YAML document that can say where a field path sits in its text. */
export interface LocatedDocument {
  readonly file: string;
  readonly value: unknown;
  /** Line and column (1-based) of the deepest existing node on `path`. */
  locate(path: readonly PropertyKey[]): { line: number; column: number } | undefined;
}

/** Picks the format from a file name: `.json` is JSON, anything else YAML (YAML also reads JSON). */
export function formatForFile(file: string): DocumentFormat {
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

function parseJson(text: string, file: string): LocatedDocument {
  const errors: ParseError[] = [];
  const tree = parseTree(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const starts = lineStarts(text);
  if (errors.length > 0 || tree === undefined) {
    const issues: InputIssue[] = errors.slice(0, 5).map((e) => ({
      path: "",
      message: `malformed JSON: ${describeJsonError(printParseErrorCode(e.error))}`,
      ...positionOf(starts, e.offset),
    }));
    throw new InputError(file, issues.length > 0 ? issues : [{ path: "", message: "malformed JSON" }]);
  }
  const value: unknown = getNodeValue(tree);
  return {
    file,
    value,
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

function describeJsonError(code: string): string {
  const words: Record<string, string> = {
    InvalidSymbol: "unexpected character",
    InvalidNumberFormat: "invalid number",
    PropertyNameExpected: "expected a double-quoted property name",
    ValueExpected: "expected a value",
    ColonExpected: "expected ':'",
    CommaExpected: "expected ','",
    CloseBraceExpected: "expected '}'",
    CloseBracketExpected: "expected ']'",
    EndOfFileExpected: "unexpected content after the document",
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

function parseYaml(text: string, file: string): LocatedDocument {
  const lineCounter = new LineCounter();
  const doc = parseYamlDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw new InputError(
      file,
      doc.errors.slice(0, 5).map((e) => {
        const pos = lineCounter.linePos(e.pos[0]);
        return { path: "", message: `malformed YAML: ${e.message.split("\n")[0] ?? e.code}`, line: pos.line, column: pos.col };
      }),
    );
  }
  const value: unknown = doc.toJS({ maxAliasCount: 100 });
  return {
    file,
    value,
    locate(path) {
      for (let n = path.length; n >= 0; n--) {
        const node = nodeAt(doc.contents, path.slice(0, n));
        if (node?.range !== undefined && node.range !== null) {
          const pos = lineCounter.linePos(node.range[0]);
          return { line: pos.line, column: pos.col };
        }
      }
      return undefined;
    },
  };
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
  return format === "json" ? parseJson(text, file) : parseYaml(text, file);
}

function renderValue(v: unknown): string {
  let s: string;
  try {
    const json: unknown = typeof v === "bigint" ? v.toString() : JSON.stringify(v);
    s = typeof json === "string" ? json : String(v);
  } catch {
    s = String(v);
  }
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/** Turns zod issues into located input issues, naming the offending value where there is one. */
export function zodIssues(error: z.ZodError, locate?: LocatedDocument["locate"]): InputIssue[] {
  const out: InputIssue[] = [];
  for (const issue of error.issues) {
    const base = issue.path;
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const path = [...base, key];
        out.push({ path: formatPath(path), message: "unknown key", ...(locate?.(path) ?? {}) });
      }
      continue;
    }
    const input = (issue as { input?: unknown }).input;
    const got = input !== undefined && issue.code !== "invalid_union" && issue.code !== "custom" ? ` (got ${renderValue(input)})` : "";
    out.push({ path: formatPath(base), message: `${issue.message}${got}`, ...(locate?.(base) ?? {}) });
  }
  return out;
}

/** Validates a located document against a schema; throws InputError listing every problem. */
export function validateDocument<S extends z.ZodType>(schema: S, doc: LocatedDocument): z.output<S> {
  const result = schema.safeParse(doc.value, { reportInput: true });
  if (!result.success) throw new InputError(doc.file, zodIssues(result.error, (p) => doc.locate(p)));
  return result.data;
}

/** Validates an already-parsed value (an inline object, say); issues carry paths but no lines. */
export function validateValue<S extends z.ZodType>(schema: S, value: unknown, file: string): z.output<S> {
  const result = schema.safeParse(value, { reportInput: true });
  if (!result.success) throw new InputError(file, zodIssues(result.error));
  return result.data;
}
