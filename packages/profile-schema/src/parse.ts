import { dirname, isAbsolute, resolve } from "node:path";
import { parseDocumentText, validateDocument, validateValue, type DocumentFormat } from "./document.js";
import { assertDocumentKind } from "./document-kind.js";
import { ProfileSchema, type Profile } from "./profile.js";
import { SpecSchema, type Spec } from "./spec.js";

/** Parses and validates a profile file's text (JSON or YAML). Throws InputError. */
export function parseProfile(text: string, file = "<profile>", format?: DocumentFormat): Profile {
  const doc = parseDocumentText(text, file, format);
  assertDocumentKind(doc, "profile");
  return validateDocument(ProfileSchema, doc);
}

/** Validates a profile that is already a value (an inline profile in a spec, say). */
export function validateProfile(value: unknown, file = "<profile>"): Profile {
  return validateValue(ProfileSchema, value, file);
}

/**
 * Parses and validates a replay spec. Relative paths in it (profiles, trace) are resolved against
 * the spec file's folder, so the result can be used from any working directory.
 */
export function parseSpec(text: string, file = "<spec>", format?: DocumentFormat): Spec {
  const doc = parseDocumentText(text, file, format);
  assertDocumentKind(doc, "spec");
  return resolveSpecPaths(validateDocument(SpecSchema, doc), file);
}

/** Resolves every relative path of a spec against the folder of `specFile`. */
export function resolveSpecPaths(spec: Spec, specFile: string): Spec {
  const base = specFile.startsWith("<") ? process.cwd() : dirname(resolve(specFile));
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(base, p));
  const ref = <T>(p: T): T => (typeof p === "string" ? (abs(p) as T) : p);
  return {
    ...spec,
    profile: ref(spec.profile),
    ...(spec.prefill === undefined
      ? {}
      : { prefill: { ...spec.prefill, ...(spec.prefill.profile === undefined ? {} : { profile: ref(spec.prefill.profile) }) } }),
    ...(spec.decode === undefined ? {} : { decode: { ...spec.decode, ...(spec.decode.profile === undefined ? {} : { profile: ref(spec.decode.profile) }) } }),
    workload: { ...spec.workload, ...(spec.workload.trace === undefined ? {} : { trace: abs(spec.workload.trace) }) },
  };
}
