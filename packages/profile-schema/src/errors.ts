/** One problem found in an input, located as precisely as the input allows. */
export interface InputIssue {
  /** Dotted field path inside the document, e.g. `kv_cache_groups[1].window_tokens`; "" for the whole document. */
  readonly path: string;
  readonly message: string;
  /** 1-based line in the file, when known. */
  readonly line?: number;
  /** 1-based column in the file, when known. */
  readonly column?: number;
}

/**
 * Invalid input refused at the boundary. `file` names the source (a path, or a label such as
 * `<inline>`); every issue carries its field path and, when known, its line and column.
 */
export class InputError extends Error {
  override readonly name = "InputError";
  readonly code = "invalid_input" as const;
  readonly file: string;
  readonly issues: readonly InputIssue[];

  constructor(file: string, issues: readonly InputIssue[], options?: { cause?: unknown }) {
    super(formatIssues(file, issues), options);
    this.file = file;
    this.issues = issues;
  }
}

/** `file:line:column: path: message`, one issue per line. */
export function formatIssue(file: string, issue: InputIssue): string {
  let where = file;
  if (issue.line !== undefined) {
    where += `:${issue.line}`;
    if (issue.column !== undefined) where += `:${issue.column}`;
  }
  const field = issue.path === "" ? "" : `${issue.path}: `;
  return `${where}: ${field}${issue.message}`;
}

function formatIssues(file: string, issues: readonly InputIssue[]): string {
  return issues.map((i) => formatIssue(file, i)).join("\n");
}

/** Renders a zod-style path (array of keys and indices) as `a.b[2].c`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out === "" ? String(key) : `.${String(key)}`;
  }
  return out;
}

/** The inverse of formatPath: `kv_cache_groups[2].prefix_cacheable` back to its keys. */
export function parsePath(path: string): PropertyKey[] {
  return [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => (m[2] === undefined ? m[1]! : Number(m[2])));
}
