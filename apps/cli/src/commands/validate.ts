import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { isAbsolute, relative } from "node:path";
import { createInterface } from "node:readline";
import {
  checkPdGate,
  checkPdTopology,
  formatIssue,
  InputError,
  isGroupedProfile,
  parseDocumentText,
  ProfileSchema,
  readTrace,
  validateDocument,
  type InputIssue,
  type LocatedDocument,
  type PdGateProblem,
  type PdRole,
  type Profile,
  type Spec,
  type TraceFormat,
} from "@kvsim/profile-schema";
import { SpecInputError, specWithOverrides, type SpecOverride } from "@kvsim/sweep";
import { EXIT_BAD_INPUT, EXIT_OK, readText, UsageError, type CliIo } from "../io.js";
import { collectSet, parseSetFlags, readDocument } from "../spec-input.js";
import type { RegisterCommand } from "./index.js";

/** One problem and the file it is in (a spec check can find problems in several files). */
interface Problem {
  readonly file: string;
  readonly issue: InputIssue;
}

/** A loaded profile and how to point into its source: its own file, or the spec that inlines it. */
interface LoadedProfile {
  readonly profile: Profile;
  readonly file: string;
  /** "" for a profile file; `profile.` or `decode.profile.` for a profile inlined in the spec. */
  readonly prefix: string;
  readonly locate: (path: string) => { line: number; column: number } | undefined;
}

/** Shows a path relative to the working folder when it lies inside it. */
function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel) ? rel : path;
}

/** `kv_cache_groups[2].prefix_cacheable` back to its keys, to locate it in a document. */
function pathKeys(path: string): PropertyKey[] {
  return [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => (m[2] === undefined ? m[1]! : Number(m[2])));
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

const KIND_ORDER = ["full_attention", "sliding_window", "convolution", "state"] as const;

function profileSummary(p: Profile): string {
  const head = `profile ${p.model}, vLLM ${p.vllm_version}`;
  if (!isGroupedProfile(p)) return `${head}, linear, ${p.kv_bytes_per_token ?? 0} B per token`;
  const kinds = KIND_ORDER.map((k) => [k, p.kv_cache_groups.filter((g) => g.kind === k).length] as const)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  return `${head}, grouped, ${plural(p.kv_cache_groups.length, "group")} (${kinds}), page ${p.page_size_bytes} B`;
}

function gateProblem(loaded: LoadedProfile, p: PdGateProblem): Problem {
  return { file: loaded.file, issue: { path: `${loaded.prefix}${p.path}`, message: p.message, ...(loaded.locate(p.path) ?? {}) } };
}

function fromInputError(e: InputError): Problem[] {
  if (e instanceof SpecInputError) return [...e.sources];
  return e.issues.map((issue) => ({ file: e.file, issue }));
}

function printProblems(io: CliIo, problems: readonly Problem[]): number {
  io.err(`error: invalid input\n${problems.map((p) => formatIssue(p.file, p.issue)).join("\n")}\n`);
  return EXIT_BAD_INPUT;
}

function validateProfileDocument(io: CliIo, doc: LocatedDocument): number {
  const profile = validateDocument(ProfileSchema, doc);
  io.out(`ok: ${profileSummary(profile)}\n`);
  // A grouped profile that fails the P/D gate still serves aggregated replay (old profiles
  // without markers, say): a note, not an error. The gate's rules are the same for both roles.
  const gate = checkPdGate(profile, "prefill");
  if (gate.length > 0) {
    const notes = gate.map((g) => formatIssue(doc.file, { path: g.path, message: g.message.replace(/^prefill role: /, ""), ...(doc.locate(pathKeys(g.path)) ?? {}) }));
    io.err(`note: aggregated replay only; a P/D prefill or decode rank refuses this profile:\n${notes.map((n) => `  ${n}`).join("\n")}\n`);
  }
  return EXIT_OK;
}

/** Loads every profile a spec names (once per file), collecting problems instead of stopping. */
function profileLoader(specDoc: LocatedDocument, problems: Problem[]) {
  const byFile = new Map<string, LoadedProfile | undefined>();
  return (ref: string | Profile, at: readonly string[]): LoadedProfile | undefined => {
    if (typeof ref !== "string") {
      return { profile: ref, file: specDoc.file, prefix: `${at.join(".")}.`, locate: (path) => specDoc.locate([...at, ...pathKeys(path)]) };
    }
    if (byFile.has(ref)) return byFile.get(ref);
    let loaded: LoadedProfile | undefined;
    try {
      const doc = parseDocumentText(readText(ref), shown(ref));
      loaded = { profile: validateDocument(ProfileSchema, doc), file: doc.file, prefix: "", locate: (path) => doc.locate(pathKeys(path)) };
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      problems.push(...fromInputError(e.file === ref ? new InputError(shown(ref), e.issues) : e));
    }
    byFile.set(ref, loaded);
    return loaded;
  };
}

/** Streams a trace file through readTrace (line by line) and counts its requests. */
async function countTraceRequests(path: string, format: TraceFormat, traceBlockSize: number): Promise<number> {
  const file = shown(path);
  try {
    const st = await stat(path);
    if (!st.isFile()) throw new InputError(file, [{ path: "", message: "cannot read the trace: not a file" }]);
  } catch (e) {
    if (e instanceof InputError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    throw new InputError(file, [{ path: "", message: `cannot read the trace: ${code === "ENOENT" ? "no such file" : String(e)}` }]);
  }
  const stream = createReadStream(path, { encoding: "utf8" });
  let streamError: Error | undefined;
  stream.on("error", (e) => {
    streamError = e;
  });
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  let n = 0;
  try {
    const records = readTrace(lines, { format, file, traceBlockSize });
    while ((await records.next()).done !== true) n++;
  } finally {
    lines.close();
    stream.destroy();
  }
  if (streamError !== undefined) throw new InputError(file, [{ path: "", message: `cannot read the trace: ${streamError.message}` }]);
  return n;
}

async function validateSpecDocument(io: CliIo, doc: LocatedDocument, overrides: readonly SpecOverride[]): Promise<number> {
  let spec: Spec;
  try {
    spec = specWithOverrides(doc, overrides);
  } catch (e) {
    if (e instanceof SpecInputError) return printProblems(io, fromInputError(e));
    throw e;
  }
  const problems: Problem[] = [];
  const load = profileLoader(doc, problems);
  const base = load(spec.profile, ["profile"]);
  const roles: { role: PdRole; loaded: LoadedProfile | undefined }[] = [];
  if (spec.topology.kind === "disaggregated") {
    for (const role of ["prefill", "decode"] as const) {
      const override = spec[role]?.profile;
      roles.push({ role, loaded: override === undefined ? base : load(override, [role, "profile"]) });
    }
    for (const { role, loaded } of roles) {
      if (loaded !== undefined) problems.push(...checkPdGate(loaded.profile, role).map((p) => gateProblem(loaded, p)));
    }
    const [prefill, decode] = [roles[0]?.loaded, roles[1]?.loaded];
    if (prefill !== undefined && decode !== undefined) {
      problems.push(...checkPdTopology(prefill.profile, decode.profile).map((p) => gateProblem(decode, p)));
    }
  }
  const used = roles.length > 0 ? roles.map((r) => r.loaded) : [base];
  if (spec.timing.type === "profile") {
    for (const loaded of new Set(used)) {
      if (loaded !== undefined && loaded.profile.forward_pass === undefined) {
        problems.push({
          file: doc.file,
          issue: { path: "timing.type", message: `"profile" needs forward_pass tables, and profile ${loaded.profile.model} (${loaded.file}) has none`, ...(doc.locate(["timing", "type"]) ?? {}) },
        });
      }
    }
  }
  let workload = "";
  const { trace, synthetic, format } = spec.workload;
  if (trace !== undefined && format !== undefined) {
    try {
      const n = await countTraceRequests(trace, format, spec.workload.trace_block_size);
      workload = `trace ${shown(trace)} (${plural(n, "request")})`;
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      problems.push(...fromInputError(e));
    }
  } else if (synthetic !== undefined) {
    workload = `synthetic ${plural(synthetic.requests, "request")}`;
  }
  if (problems.length > 0) return printProblems(io, problems);

  const topology =
    spec.topology.kind === "aggregated"
      ? `aggregated ${plural(spec.topology.workers, "worker")}`
      : `disaggregated ${spec.topology.prefill.workers} prefill + ${spec.topology.decode.workers} decode`;
  const models = [...new Set(used.map((l) => l?.profile.model ?? "?"))];
  const profiles = models.length === 1 ? `profile ${models[0] ?? "?"}` : `profiles ${roles.map((r) => `${r.loaded?.profile.model ?? "?"} (${r.role})`).join(", ")}`;
  io.out(`ok: spec v1, ${topology}, ${profiles}, ${workload}\n`);
  return EXIT_OK;
}

/** Profile or spec? A profile has `schema_version`, a spec has `version`. */
function documentKind(doc: LocatedDocument): "profile" | "spec" {
  const v = doc.value;
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw new InputError(doc.file, [{ path: "", message: "expected an object: a profile (with schema_version) or a spec (with version)" }]);
  }
  const isProfile = "schema_version" in v;
  const isSpec = "version" in v;
  if (isProfile && isSpec) throw new InputError(doc.file, [{ path: "", message: "has both schema_version (a profile) and version (a spec); keep the one it is" }]);
  if (!isProfile && !isSpec) throw new InputError(doc.file, [{ path: "", message: "is neither a profile (it has no schema_version) nor a spec (it has no version)" }]);
  return isProfile ? "profile" : "spec";
}

export const registerValidate: RegisterCommand = (program, ctx) => {
  program
    .command("validate")
    .description(
      "Check a profile or a replay spec (with the profiles it names, the P/D gate and its trace): exit 0 with a one-line summary, or 2 listing every problem with its file, line and field.",
    )
    .argument("<file>", "a profile (has schema_version) or a spec (has version), JSON or YAML; - reads standard input")
    .option("--set <path=value>", "override a spec field before checking it, e.g. topology.decode.workers=4 (repeatable)", collectSet)
    .action(
      ctx.run(async (file: string, flags: { set?: string[] }) => {
        const overrides = parseSetFlags(flags.set);
        const doc = await readDocument(ctx.io, file);
        if (documentKind(doc) === "profile") {
          if (overrides.length > 0) throw new UsageError("--set applies to specs; this is a profile");
          return validateProfileDocument(ctx.io, doc);
        }
        return await validateSpecDocument(ctx.io, doc, overrides);
      }),
    );
};
