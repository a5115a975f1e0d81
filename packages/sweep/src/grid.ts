import { dirname, resolve } from "node:path";
import { InputError, SpecSchema, zodIssues, type InputIssue, type LocatedDocument } from "@kvsim/profile-schema";
import { z } from "zod";
import { parseSpecPath, resolvePathValues, routerAsMapping, setAt, shownText, specPathTooLong, type PathKey, type SpecOverride } from "./overrides.js";

/** The most points one grid may expand to. */
export const MAX_GRID_POINTS = 100_000;

const finite = () => z.number({ error: "expected a finite number" }).refine(Number.isFinite, { error: "expected a finite number" });
const zipName = () => z.string().regex(/^[A-Za-z0-9_-]+$/, { error: "a zip group is a name of letters, digits, _ and -" });

/** One grid entry: a list of values, a `{from, to, step}` range, or `{values, zip}` (paths of one zip group move together). */
const GridEntrySchema = z.union(
  [
    z.array(z.unknown()).min(1, { error: "needs at least one value" }),
    z.strictObject({
      from: finite(),
      to: finite(),
      step: finite().refine((s) => s > 0, { error: "must be greater than 0" }),
      zip: zipName().optional(),
    }),
    z.strictObject({ values: z.array(z.unknown()).min(1, { error: "needs at least one value" }), zip: zipName().optional() }),
  ],
  { error: "expected a list of values, {from, to, step} or {values, zip}" },
);
export type GridEntry = z.infer<typeof GridEntrySchema>;

/** One spec path of a grid with its values and where it was written. */
export interface GridPath {
  readonly text: string;
  readonly path: readonly PathKey[];
  readonly values: readonly unknown[];
  /** Line in the grid file, when known. */
  readonly line: number | undefined;
}

/** One axis of the cartesian product: one path, or the paths of a zip group moving together. */
export interface GridAxis {
  readonly zip: string | undefined;
  readonly paths: readonly GridPath[];
  /** Number of positions on this axis (every path of a zip group has this many values). */
  readonly size: number;
}

export interface Grid {
  readonly file: string;
  readonly axes: readonly GridAxis[];
  /** Points in the product: the product of the axis sizes. */
  readonly size: number;
}

/** One point of a grid: its index (row-major over the axes, the first axis outermost) and its settings. */
export interface GridPoint {
  readonly index: number;
  /** Spec path to value, in grid-file order. */
  readonly settings: Readonly<Record<string, unknown>>;
  readonly overrides: readonly SpecOverride[];
}

/**
 * The values of `{from, to, step}`: from, from + step, ... up to `to` inclusive (within 1e-9 steps
 * of it). Each value is from + i x step rounded to 12 significant digits, so 0.1 steps give 0.3,
 * not 0.30000000000000004.
 */
export function rangeValues(from: number, to: number, step: number): number[] {
  if (to < from) return [];
  const count = Math.floor((to - from) / step + 1e-9) + 1;
  if (count > MAX_GRID_POINTS) return Array.from({ length: MAX_GRID_POINTS + 1 }, () => from);
  return Array.from({ length: count }, (_, i) => Number((from + i * step).toPrecision(12)));
}

/**
 * Reads a grid document: a mapping from spec paths to their values. Relative profile and trace
 * paths among the values are resolved against the grid file's folder. Throws InputError naming the
 * grid file, line and path: a malformed entry, a zip group whose paths have different lengths, an
 * empty range, a product over MAX_GRID_POINTS.
 */
export function parseGrid(doc: LocatedDocument): Grid {
  const value = doc.value;
  const where = (keys: readonly PropertyKey[]) => doc.locate(keys) ?? {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InputError(doc.file, [{ path: "", message: "a grid maps spec paths to their values, e.g. engine.max_num_seqs: [64, 128, 256]" }]);
  }
  const baseDir = doc.file.startsWith("<") ? process.cwd() : dirname(resolve(doc.file));
  const issues: InputIssue[] = [...doc.issues];
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) issues.push({ path: "", message: "lists no spec path" });
  const axes: { zip: string | undefined; paths: GridPath[] }[] = [];
  const zips = new Map<string, { zip: string; paths: GridPath[] }>();
  for (const [key, raw] of entries) {
    const long = specPathTooLong(key);
    if (long !== undefined) {
      issues.push({ path: shownText(key), message: long, ...where([key]) });
      continue;
    }
    const path = parseSpecPath(key);
    const { line } = where([key]) as { line?: number };
    if (path === undefined) {
      issues.push({ path: key, message: "is not a spec path (keys joined by dots, e.g. engine.max_num_seqs)", ...where([key]) });
      continue;
    }
    const parsed = GridEntrySchema.safeParse(raw, { reportInput: true });
    if (!parsed.success) {
      issues.push(...zodIssues(parsed.error, (p) => doc.locate([key, ...p])).map((i) => ({ ...i, path: i.path === "" ? key : `${key}.${i.path}` })));
      continue;
    }
    const entry = parsed.data;
    const values = Array.isArray(entry) ? entry : "values" in entry ? entry.values : rangeValues(entry.from, entry.to, entry.step);
    if (values.length === 0) {
      issues.push({ path: key, message: "the range is empty (to is below from)", ...where([key]) });
      continue;
    }
    const gridPath: GridPath = { text: key, path, values: values.map((v) => resolvePathValues(path, v, baseDir)), line };
    const zip = Array.isArray(entry) ? undefined : entry.zip;
    if (zip === undefined) {
      axes.push({ zip: undefined, paths: [gridPath] });
      continue;
    }
    const group = zips.get(zip);
    if (group === undefined) {
      const axis = { zip, paths: [gridPath] };
      zips.set(zip, axis);
      axes.push(axis);
    } else {
      const first = group.paths[0]!;
      if (first.values.length !== values.length) {
        issues.push({
          path: key,
          message: `zip group ${zip} moves its paths together, but this has ${values.length} values and ${first.text}${first.line === undefined ? "" : ` (line ${first.line})`} has ${first.values.length}`,
          ...where([key]),
        });
        continue;
      }
      group.paths.push(gridPath);
    }
  }
  const sized = axes.map((a) => ({ ...a, size: a.paths[0]?.values.length ?? 0 }));
  const size = sized.reduce((n, a) => n * a.size, 1);
  if (issues.length === 0 && size > MAX_GRID_POINTS) issues.push({ path: "", message: `expands to ${size} points; at most ${MAX_GRID_POINTS} are allowed` });
  if (issues.length > 0) throw new InputError(doc.file, issues);
  return { file: doc.file, axes: sized, size };
}

/** The grid's points, row-major: the first axis of the file is the outermost loop. */
export function expandGrid(grid: Grid): GridPoint[] {
  const points: GridPoint[] = [];
  for (let index = 0; index < grid.size; index++) {
    let rest = index;
    const picks: number[] = new Array<number>(grid.axes.length);
    for (let a = grid.axes.length - 1; a >= 0; a--) {
      const size = grid.axes[a]!.size;
      picks[a] = rest % size;
      rest = Math.floor(rest / size);
    }
    const settings: Record<string, unknown> = {};
    const overrides: SpecOverride[] = [];
    grid.axes.forEach((axis, a) => {
      for (const p of axis.paths) {
        const v = p.values[picks[a]!];
        Object.defineProperty(settings, p.text, { value: v, enumerable: true, writable: true, configurable: true });
        overrides.push({ path: p.path, value: v, source: `${grid.file}${p.line === undefined ? "" : `:${p.line}`}` });
      }
    });
    points.push({ index, settings, overrides });
  }
  return points;
}

/**
 * Refuses, before anything runs, a grid path that is no spec field (a typo such as
 * `engine.max_num_seq`): each path's first value is set on `base` (the spec document's value)
 * and an unknown key at or above the path is an error naming the grid line.
 */
export function checkGridPaths(grid: Grid, base: unknown): void {
  const issues: InputIssue[] = [];
  for (const axis of grid.axes) {
    for (const p of axis.paths) {
      let value: unknown;
      try {
        value = setAt(routerAsMapping(base, p.path), p.path, p.values[0]);
      } catch (e) {
        issues.push({ path: p.text, message: e instanceof Error ? e.message : String(e), ...(p.line === undefined ? {} : { line: p.line }) });
        continue;
      }
      const result = SpecSchema.safeParse(value);
      if (result.success) continue;
      for (const issue of zodIssues(result.error)) {
        const keys = parseSpecPath(issue.path) ?? [];
        if (issue.message === "unknown key" && keys.length <= p.path.length && keys.every((k, i) => k === p.path[i])) {
          issues.push({ path: p.text, message: `is not a field of a spec (${issue.path}: unknown key)`, ...(p.line === undefined ? {} : { line: p.line }) });
        }
      }
    }
  }
  if (issues.length > 0) throw new InputError(grid.file, issues);
}
