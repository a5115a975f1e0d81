import { InputError, type InputIssue } from "./errors.js";
import type { LocatedDocument } from "./document.js";

/** The two documents kvsim reads: a profile (`schema_version`) and a replay spec (`version`). */
export type DocumentKind = "profile" | "spec";

const NAME: Readonly<Record<DocumentKind, string>> = {
  profile: "a profile (an object with schema_version: 1)",
  spec: "a spec (an object with version: 1)",
};

function typeName(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/** "one line of a Mooncake trace" when an object has the keys of a trace line, else undefined. */
function traceLineKind(o: object): string | undefined {
  if ("timestamp" in o && ("input_length" in o || "hash_ids" in o)) return "one line of a Mooncake trace";
  if ("arrival_ms" in o && ("request_id" in o || "output_tokens" in o)) return "one line of a kvsim trace";
  return undefined;
}

/** A profile has `schema_version`, a spec `version`; undefined when it has neither or both. */
export function documentKind(value: unknown): DocumentKind | undefined {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const profile = "schema_version" in value;
  const spec = "version" in value;
  return profile === spec ? undefined : profile ? "profile" : "spec";
}

const SPEC_KEYS = ["topology", "workload", "timing", "engine", "kv_transfer", "router", "sla", "profile"];
const PROFILE_KEYS = ["model", "vllm_version", "tensor_parallel_size", "kv_cache_groups", "kv_bytes_per_token", "page_size_bytes"];

/**
 * The kind a document is by its marker (documentKind), or else by its keys: a mapping with only
 * spec keys (topology, workload...) is a spec that lost its `version`, one with only profile keys
 * (model, kv_cache_groups...) a profile without `schema_version`. Undefined when the keys say
 * neither or both, or when it is no mapping.
 */
export function likelyKind(value: unknown): DocumentKind | undefined {
  const marked = documentKind(value);
  if (marked !== undefined || value === null || typeof value !== "object" || Array.isArray(value)) return marked;
  const spec = SPEC_KEYS.some((k) => k in value);
  const profile = PROFILE_KEYS.some((k) => k in value);
  return spec === profile ? undefined : spec ? "spec" : "profile";
}

/**
 * Why a parsed value is not the kind of document expected (`either` for a command that takes
 * both), in plain words, or undefined when it is (or might be: an object with neither marker is
 * left to the schema, which names what is missing).
 */
export function documentKindIssue(value: unknown, expected: DocumentKind | "either"): InputIssue | undefined {
  const want = expected === "either" ? `${NAME.profile} or ${NAME.spec}` : NAME[expected];
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { path: "", message: `expected ${want}, got ${typeName(value)}` };
  }
  const trace = traceLineKind(value);
  const kind = documentKind(value);
  if ("schema_version" in value && "version" in value) {
    return { path: "", message: "has both schema_version (a profile) and version (a spec); keep the one it is" };
  }
  if (kind === undefined) {
    if (trace !== undefined)
      return { path: "", message: `expected ${want}, but this is ${trace}; a trace is checked through the spec that names it (workload.trace)` };
    // A spec or profile that lost its marker: its schema names what is missing, as replay would.
    if (expected === "either" && likelyKind(value) === undefined)
      return { path: "", message: "is neither a profile (it has no schema_version) nor a spec (it has no version)" };
    return undefined;
  }
  if (expected === "either" || kind === expected) return undefined;
  return kind === "profile"
    ? {
        path: "",
        message: "this is a profile (it has schema_version), not a spec; a spec has version: 1 and names its profile, e.g. profile: ./this-file.json",
      }
    : { path: "", message: "this is a spec (it has version), not a profile; a profile has schema_version: 1 (the spec names its profile under profile:)" };
}

/** Throws an InputError at the document's first line when it is not the kind expected. */
export function assertDocumentKind(doc: LocatedDocument, expected: DocumentKind | "either"): void {
  const issue = documentKindIssue(doc.value, expected);
  if (issue !== undefined) throw new InputError(doc.file, [{ ...issue, ...(doc.locate([]) ?? {}) }]);
}
