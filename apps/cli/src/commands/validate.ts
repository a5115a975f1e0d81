import {
  assertDocumentKind,
  checkPdGate,
  likelyKind,
  formatIssue,
  InputError,
  isGroupedProfile,
  parsePath,
  ProfileSchema,
  readTrace,
  ArrivalSpan,
  arrivalSpanWarning,
  resolveEngine,
  validateDocument,
  type LocatedDocument,
  type PdRole,
  type Profile,
  type Spec,
  type TraceFormat,
} from "@kvsim/profile-schema";
import { SpecInputError, type SpecOverride } from "@kvsim/sweep";
import { EXIT_BAD_INPUT, EXIT_OK, UsageError, type CliIo, type Problem } from "../io.js";
import { openTrace } from "../lines.js";
import { thousands } from "../profile-table.js";
import { checkSpec, fromInputError, printWarnings, shown, type LoadedProfile } from "../spec-check.js";
import { collectSet, parseSetFlags, readDocument } from "../spec-input.js";
import type { RegisterCommand } from "./index.js";

const plural = (n: number, one: string, many = `${one}s`) => `${thousands(n)} ${n === 1 ? one : many}`;

const KIND_ORDER = ["full_attention", "sliding_window", "convolution", "state"] as const;

function profileSummary(p: Profile): string {
  const head = `profile ${p.model}, vLLM ${p.vllm_version}`;
  if (!isGroupedProfile(p)) return `${head}, linear, ${thousands(p.kv_bytes_per_token ?? 0)} B per token`;
  const kinds = KIND_ORDER.map((k) => [k, p.kv_cache_groups.filter((g) => g.kind === k).length] as const)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  return `${head}, grouped, ${plural(p.kv_cache_groups.length, "group")} (${kinds}), page ${thousands(p.page_size_bytes)} B`;
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
    const notes = gate.map((g) =>
      formatIssue(doc.file, { path: g.path, message: g.message.replace(/^prefill role: /, ""), ...(doc.locate(parsePath(g.path)) ?? {}) }),
    );
    io.err(`note: aggregated replay only; a P/D prefill or decode rank refuses this profile:\n${notes.map((n) => `  ${n}`).join("\n")}\n`);
  }
  return EXIT_OK;
}

/** Streams a trace file through readTrace (line by line) and counts its requests. */
async function countTraceRequests(io: CliIo, path: string, format: TraceFormat, traceBlockSize: number, speedup: number): Promise<number> {
  const file = shown(path);
  const trace = openTrace(path, format, file);
  const span = new ArrivalSpan();
  try {
    const records = span.watch(readTrace(trace.lines, { format, file, traceBlockSize, speedup }));
    while ((await records.next()).done !== true);
  } finally {
    trace.close();
  }
  const warning = arrivalSpanWarning(format, span.count, span.spanMs);
  if (warning !== undefined) io.err(`warning: ${file}: ${warning}\n`);
  return span.count;
}

/** `; prefill pool 4115 pages from GPU memory, ...` for the roles whose engine sized its pool from memory. */
function poolSummary(
  spec: Spec,
  base: LoadedProfile | undefined,
  roles: readonly { readonly role: PdRole; readonly loaded: LoadedProfile | undefined }[],
): string {
  const pools: string[] = [];
  for (const { role, loaded } of roles.length > 0 ? roles : [{ role: "aggregated" as const, loaded: base }]) {
    if (loaded === undefined) continue;
    const r = resolveEngine(loaded.profile, { ...spec.engine, ...(role === "aggregated" ? undefined : spec[role]?.engine) });
    if (r.ok && r.capacity !== undefined) pools.push(`${role === "aggregated" ? "" : `${role} `}pool ${r.capacity.num_gpu_blocks} pages from GPU memory`);
  }
  return pools.length > 0 ? `; ${pools.join(", ")}` : "";
}

async function validateSpecDocument(io: CliIo, doc: LocatedDocument, overrides: readonly SpecOverride[]): Promise<number> {
  let checked: ReturnType<typeof checkSpec>;
  try {
    checked = checkSpec(doc, overrides);
  } catch (e) {
    if (e instanceof SpecInputError) return printProblems(io, fromInputError(e));
    throw e;
  }
  const { spec, base, roles, problems: found } = checked;
  printWarnings(io, checked.warnings);
  const problems = [...found];
  let workload = "";
  const { trace, synthetic, format } = spec.workload;
  if (trace !== undefined && format !== undefined) {
    try {
      const n = await countTraceRequests(io, trace, format, spec.workload.trace_block_size, spec.workload.speedup);
      workload = `trace ${shown(trace)} (${plural(n, "request")})`;
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      problems.push(...fromInputError(e));
    }
  } else if (synthetic !== undefined) {
    workload = `synthetic ${plural(synthetic.requests, "request")}`;
  }
  if (problems.length > 0) return printProblems(io, problems);

  const used = roles.length > 0 ? roles.map((r) => r.loaded) : [base];
  const topology =
    spec.topology.kind === "aggregated"
      ? `aggregated ${plural(spec.topology.workers, "worker")}`
      : `disaggregated ${spec.topology.prefill.workers} prefill + ${spec.topology.decode.workers} decode`;
  const models = [...new Set(used.map((l) => l?.profile.model ?? "?"))];
  const profiles =
    models.length === 1 ? `profile ${models[0] ?? "?"}` : `profiles ${roles.map((r) => `${r.loaded?.profile.model ?? "?"} (${r.role})`).join(", ")}`;
  io.out(`ok: spec v1, ${topology}, ${profiles}, ${workload}${poolSummary(spec, base, roles)}\n`);
  return EXIT_OK;
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
        // Profile or spec? A profile has `schema_version`, a spec `version`; without either, its
        // keys tell (a spec that lost its version is checked as the spec replay would read).
        assertDocumentKind(doc, "either");
        if (likelyKind(doc.value) === "profile") {
          if (overrides.length > 0) throw new UsageError("--set applies to specs; this is a profile");
          return validateProfileDocument(ctx.io, doc);
        }
        return await validateSpecDocument(ctx.io, doc, overrides);
      }),
    );
};
