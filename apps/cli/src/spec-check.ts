import { isAbsolute, relative } from "node:path";
import {
  assertDocumentKind,
  formatIssue,
  specDeprecations,
  InputError,
  parseDocumentText,
  parsePath,
  ProfileSchema,
  validateDocument,
  type InputIssue,
  type LocatedDocument,
  type PdRole,
  type Profile,
  type Spec,
} from "@kvsim/profile-schema";
import { applyOverrides, SpecInputError, specWithOverrides, type SpecOverride } from "@kvsim/sweep";
import { specRankConfigs } from "@kvsim/replay-engine";
import { checkRankConfig, type RankConfig, type RankConfigProblem, type RankRole } from "@kvsim/vllm-scheduler";
import { InvalidInputs, readText, type CliIo, type Problem } from "./io.js";
import { parseSetFlags, readDocument, type StdinIo } from "./spec-input.js";

/**
 * The checks `kvsim validate` and `kvsim replay` share, so that what one accepts the other runs
 * and what one refuses the other refuses with the same messages: the spec, every profile it names
 * (each problem at its own file and line), the P/D gate, the layouts of the two roles, the timing
 * tables, and every rank setting the replay would refuse. The trace is not read here.
 */

/** Shows a path relative to the working folder when it lies inside it. */
export function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel) ? rel : path;
}

/** A loaded profile and how to point into its source: its own file, or the spec that inlines it. */
export interface LoadedProfile {
  readonly profile: Profile;
  readonly file: string;
  /** "" for a profile file; `profile.` or `decode.profile.` for a profile inlined in the spec. */
  readonly prefix: string;
  readonly locate: (path: string) => { line: number; column: number } | undefined;
}

/** A profile file, parsed, checked to be a profile, validated, and able to locate its fields. */
export function loadProfileFile(path: string, file = path): LoadedProfile {
  return profileFromText(readText(path), file);
}

function profileFromText(text: string, file: string): LoadedProfile {
  const doc = parseDocumentText(text, file);
  assertDocumentKind(doc, "profile");
  return { profile: validateDocument(ProfileSchema, doc), file: doc.file, prefix: "", locate: (p) => doc.locate(parsePath(p)) };
}

/** Issues about a loaded profile's fields, at their lines in its file (or in the spec inlining it). */
export function profileProblems(loaded: LoadedProfile, issues: readonly InputIssue[]): Problem[] {
  return issues.map((i) => ({ file: loaded.file, issue: { ...i, path: `${loaded.prefix}${i.path}`, ...(loaded.locate(i.path) ?? {}) } }));
}

export function fromInputError(e: InputError): Problem[] {
  if (e instanceof SpecInputError) return [...e.sources];
  return e.issues.map((issue) => ({ file: e.file, issue }));
}

/** What became of a profile file: loaded, unreadable (the read's error), or readable but bad (its error). */
type ProfileOutcome = { readonly loaded: LoadedProfile } | { readonly unreadable: InputError } | { readonly bad: InputError };

/**
 * What checking many variations of one spec (a sweep's points) may share: each profile file is
 * read, parsed and validated once, and each rank setting is checked once per profile. Without
 * it, every check reads its profiles again.
 */
export class SpecCheckCache {
  /** What became of each profile file, by path. */
  readonly profiles = new Map<string, ProfileOutcome>();
  /** What the ranks refuse, per loaded profile, by the rest of the rank's settings. */
  private readonly ranks = new WeakMap<Profile, Map<string, readonly RankConfigProblem[]>>();

  rankProblems(config: RankConfig): readonly RankConfigProblem[] {
    let byConfig = this.ranks.get(config.profile);
    if (byConfig === undefined) {
      byConfig = new Map();
      this.ranks.set(config.profile, byConfig);
    }
    const key = JSON.stringify({ ...config, profile: undefined }, (_, v: unknown) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v));
    let problems = byConfig.get(key);
    if (problems === undefined) {
      problems = checkRankConfig(config);
      byConfig.set(key, problems);
    }
    return problems;
  }
}

function loadProfileOutcome(ref: string): ProfileOutcome {
  let text: string;
  try {
    text = readText(ref);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    return { unreadable: e };
  }
  try {
    return { loaded: profileFromText(text, shown(ref)) };
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    return { bad: e };
  }
}

/**
 * Loads every profile a spec names (once per file, or once per `cache`), collecting problems
 * instead of stopping. A profile file that cannot be read at all is reported at the spec field
 * that names it (`at` points to its line, or to the `--set` flag that set it); problems inside a
 * readable profile stay at their own file and line.
 */
function profileLoader(
  specDoc: LocatedDocument,
  problems: Problem[],
  at: (path: readonly string[], message: string) => Problem,
  cache: SpecCheckCache | undefined,
) {
  const byFile = new Map<string, LoadedProfile | undefined>();
  return (ref: string | Profile, path: readonly string[]): LoadedProfile | undefined => {
    if (typeof ref !== "string") {
      return { profile: ref, file: specDoc.file, prefix: `${path.join(".")}.`, locate: (p) => specDoc.locate([...path, ...parsePath(p)]) };
    }
    if (byFile.has(ref)) return byFile.get(ref);
    let outcome = cache?.profiles.get(ref);
    if (outcome === undefined) {
      outcome = loadProfileOutcome(ref);
      cache?.profiles.set(ref, outcome);
    }
    if ("unreadable" in outcome) problems.push(...outcome.unreadable.issues.map((i) => at(path, `${shown(ref)}: ${i.message}`)));
    if ("bad" in outcome) problems.push(...fromInputError(outcome.bad));
    const loaded = "loaded" in outcome ? outcome.loaded : undefined;
    byFile.set(ref, loaded);
    return loaded;
  };
}

/** A spec that passed or failed the shared checks. */
export interface CheckedSpec {
  /** The spec with its paths resolved against its folder. */
  readonly spec: Spec;
  readonly doc: LocatedDocument;
  /** Profiles loaded from files, by resolved path (what runReplay takes). */
  readonly profiles: ReadonlyMap<string, Profile>;
  /** The base profile, then per role for a disaggregated topology. */
  readonly base: LoadedProfile | undefined;
  readonly roles: readonly { readonly role: PdRole; readonly loaded: LoadedProfile | undefined }[];
  /** Every problem found, each at its file, line and field; empty when the replay may start. */
  readonly problems: readonly Problem[];
  /** Deprecated keys the spec uses (they still work), located like problems. */
  readonly warnings: readonly Problem[];
}

/** Prints each warning on stderr as `warning: <file>:<line>:<column>: <field>: <message>`. */
export function printWarnings(io: CliIo, warnings: readonly Problem[]): void {
  for (const w of warnings) io.err(`warning: ${formatIssue(w.file, w.issue)}\n`);
}

/**
 * Runs the shared checks on a parsed spec document with its `--set` overrides applied. Throws an
 * InputError (a SpecInputError when an override is to blame) when the spec itself does not
 * validate, since nothing else can be checked then; otherwise returns every problem found.
 */
export function checkSpec(doc: LocatedDocument, overrides: readonly SpecOverride[] = [], cache?: SpecCheckCache): CheckedSpec {
  assertDocumentKind(doc, "spec");
  const spec: Spec = specWithOverrides(doc, overrides);
  const problems: Problem[] = [];
  /** A problem at a spec field: in the flag that set it, or at its line in the spec. */
  const at = (path: readonly string[], message: string): Problem => {
    const owner = [...overrides].reverse().find((o) => o.path.length <= path.length && o.path.every((k, i) => String(k) === path[i]));
    if (owner !== undefined) return { file: owner.source, issue: { path: path.join("."), message } };
    return { file: doc.file, issue: { path: path.join("."), message, ...(doc.locate(path) ?? {}) } };
  };
  const load = profileLoader(doc, problems, at, cache);
  const base = load(spec.profile, ["profile"]);
  const roles: { role: PdRole; loaded: LoadedProfile | undefined }[] = [];
  if (spec.topology.kind === "disaggregated") {
    for (const role of ["prefill", "decode"] as const) {
      const override = spec[role]?.profile;
      roles.push({ role, loaded: override === undefined ? base : load(override, [role, "profile"]) });
    }
  }
  // The rules a spec and its profiles must meet together are the replay's own (one source).
  const loadedOf = (role: RankRole): LoadedProfile | undefined => (role === "aggregated" ? base : roles.find((r) => r.role === role)?.loaded);
  const ruled = specRankConfigs(
    spec,
    { aggregated: base?.profile, prefill: loadedOf("prefill")?.profile, decode: loadedOf("decode")?.profile },
    cache === undefined ? {} : { checkRank: (c) => cache.rankProblems(c) },
  );
  for (const p of ruled.problems) {
    if (p.at.in === "spec") {
      problems.push(
        at(
          p.at.path,
          p.at.path.join(".") === pairPath(spec) ? `${p.message} (prefill: ${loadedOf("prefill")?.file}, decode: ${loadedOf("decode")?.file})` : p.message,
        ),
      );
    } else {
      const loaded = loadedOf(p.at.role);
      if (loaded !== undefined) problems.push(...profileProblems(loaded, [{ path: p.at.path, message: p.message }]));
    }
  }
  const profiles = new Map<string, Profile>();
  for (const [ref, loaded] of [
    [spec.profile, base],
    ...roles.map((r) => [r.role === "prefill" ? spec.prefill?.profile : spec.decode?.profile, r.loaded] as const),
  ] as const) {
    if (typeof ref === "string" && loaded !== undefined) profiles.set(ref, loaded.profile);
  }
  const warnings = specDeprecations(applyOverrides(doc.value, overrides)).map((d) => at(parsePath(d.path).map(String), d.message));
  return { spec, doc, profiles, base, roles, problems, warnings };
}

/** The spec field that chose a P/D pair's profiles, where a problem with the two layouts together is reported. */
function pairPath(spec: Spec): string {
  return spec.decode?.profile !== undefined ? "decode.profile" : spec.prefill?.profile !== undefined ? "prefill.profile" : "profile";
}

/**
 * Reads a spec (a file, or standard input for `-`), applies `--set` overrides and runs the shared
 * checks; throws InvalidInputs listing every problem, as `kvsim validate` prints them.
 */
export async function loadCheckedSpec(
  io: StdinIo,
  file: string,
  sets: readonly string[] | undefined,
  /** Overrides decided from the document itself, applied before `sets` (calibrate's stand-in timing). */
  prepare?: (doc: LocatedDocument) => readonly SpecOverride[],
): Promise<CheckedSpec> {
  // A malformed --set is refused before any file is read.
  const flags = parseSetFlags(sets);
  const doc = await readDocument(io, file);
  const overrides = [...(prepare?.(doc) ?? []), ...flags];
  let checked: CheckedSpec;
  try {
    checked = checkSpec(doc, overrides);
  } catch (e) {
    if (e instanceof SpecInputError) throw new InvalidInputs(fromInputError(e));
    throw e;
  }
  if (checked.problems.length > 0) throw new InvalidInputs(checked.problems);
  printWarnings(io, checked.warnings);
  return checked;
}
