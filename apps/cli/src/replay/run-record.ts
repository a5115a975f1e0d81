import { createHash } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { engineSettings, SpecSchema, type Profile, type Spec } from "@kvsim/profile-schema";
import { applyOverrides, type SpecOverride } from "@kvsim/sweep";
import { VERSION } from "../version.js";

/**
 * What a replay report records about its run (the report's `run` key, outside the digest): the
 * kvsim version, the spec (path, SHA-256 of its text, `--set` flags), the model, the topology, the
 * timing, and the settings that differ from their defaults. `kvsim diff` shows where two differ.
 */
export interface RunRecord {
  readonly kvsim_version: string;
  readonly spec: { readonly path: string; readonly sha256: string; readonly set: readonly string[] };
  /** The base profile's model; `profiles` has each role's when they differ. */
  readonly model: string;
  readonly profiles: readonly {
    readonly role: "all" | "prefill" | "decode";
    readonly path: string;
    readonly model: string;
    readonly vllm_version: string;
    readonly tensor_parallel_size: number;
  }[];
  readonly topology: Spec["topology"];
  readonly timing: Spec["timing"];
  /** Dotted spec path to its value as written, for every setting that is not its default. */
  readonly changed_settings: Readonly<Record<string, unknown>>;
}

/** SHA-256 (hex) of a text as UTF-8: the spec's hash in the run record. */
const sha256Text = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");

type Key = string | number;
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

function get(root: unknown, path: readonly Key[]): unknown {
  let v = root;
  for (const k of path) v = isObject(v) ? v[k as string] : undefined;
  return v;
}

function without(root: unknown, path: readonly Key[]): unknown {
  if (path.length === 0 || !isObject(root)) return root;
  const [head, ...rest] = path as [string, ...Key[]];
  if (rest.length === 0) return Object.fromEntries(Object.entries(root).filter(([k]) => k !== head));
  return { ...root, [head]: without(root[head], rest) };
}

/** The leaves of a document (mappings are walked; lists, scalars and inline profiles are leaves). */
function leaves(v: unknown, path: Key[] = [], out: Key[][] = []): Key[][] {
  const profileRef = path.at(-1) === "profile";
  if (isObject(v) && !profileRef && Object.keys(v).length > 0) for (const [k, x] of Object.entries(v)) leaves(x, [...path, k], out);
  else if (path.length > 0) out.push(path);
  return out;
}

const ENGINE_DEFAULTS = engineSettings({}) as unknown as Record<string, unknown>;
/** Fields every run has, shown elsewhere in the record (or not settings at all). */
const NOT_SETTINGS = new Set(["$schema", "version", "profile", "topology"]);

/**
 * The settings of a spec document (after `--set`) that are not their defaults: each leaf the spec
 * writes whose value, as validated, differs from what the spec would get without it, or without
 * the nearest optional section holding it (a `kv_transfer.network` NIC). A leaf the spec cannot go
 * without (the timing's values, the trace path) is no setting changed from a default and is left
 * out, as are the profile and the topology (recorded apart). Engine settings are compared with
 * vLLM's defaults as kvsim fills them.
 */
export function changedSettings(value: unknown): Record<string, unknown> {
  const full = SpecSchema.safeParse(value);
  if (!full.success) return {};
  const parsedWithout = new Map<string, ReturnType<typeof SpecSchema.safeParse>>();
  const lacking = (path: readonly Key[]) => {
    const key = JSON.stringify(path);
    let r = parsedWithout.get(key);
    if (r === undefined) parsedWithout.set(key, (r = SpecSchema.safeParse(without(value, path))));
    return r;
  };
  const out: Record<string, unknown> = {};
  for (const path of leaves(value)) {
    const top = String(path[0]);
    if (NOT_SETTINGS.has(top) || path.at(-1) === "profile") continue;
    for (let n = path.length; n >= 1; n--) {
      const r = lacking(path.slice(0, n));
      if (!r.success) continue;
      const engineKey =
        (top === "engine" && path.length === 2) || ((top === "prefill" || top === "decode") && path[1] === "engine" && path.length === 3)
          ? String(path.at(-1))
          : undefined;
      const fallback = get(r.data, path) ?? (engineKey === undefined ? undefined : ENGINE_DEFAULTS[engineKey]);
      if (!isDeepStrictEqual(get(full.data, path), fallback)) out[path.join(".")] = get(value, path);
      break;
    }
  }
  return out;
}

/** The run record of a replay of `spec` (checked), read from `specText` at `specPath` with `sets`. */
export function runRecord(args: {
  readonly spec: Spec;
  readonly specPath: string;
  readonly specText: string;
  readonly rawSpec: unknown;
  readonly overrides: readonly SpecOverride[];
  readonly sets: readonly string[];
  readonly profiles: ReadonlyMap<string, Profile>;
  readonly shownPath: (path: string) => string;
}): RunRecord {
  const { spec } = args;
  const describe = (role: "all" | "prefill" | "decode", ref: string | Profile | undefined) => {
    const p = typeof ref === "string" ? args.profiles.get(ref) : ref;
    return p === undefined
      ? undefined
      : {
          role,
          path: typeof ref === "string" ? args.shownPath(ref) : "(inline)",
          model: p.model,
          vllm_version: p.vllm_version,
          tensor_parallel_size: p.tensor_parallel_size,
        };
  };
  const base = describe("all", spec.profile);
  const roles = spec.topology.kind === "disaggregated" ? [describe("prefill", spec.prefill?.profile), describe("decode", spec.decode?.profile)] : [];
  return {
    kvsim_version: VERSION,
    spec: { path: args.specPath, sha256: sha256Text(args.specText), set: [...args.sets] },
    model: base?.model ?? "?",
    profiles: [base, ...roles].filter((p) => p !== undefined),
    topology: spec.topology,
    timing: spec.timing,
    changed_settings: changedSettings(applyOverrides(args.rawSpec, args.overrides)),
  };
}
