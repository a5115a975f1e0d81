// Test-only inputs (not exported from the package): profiles and specs built through the real
// schemas, so the defaults a user would get are the ones tested.
import { SpecSchema, type Spec, type TraceRecord } from "@kvsim/profile-schema";

/** A linear profile (one KV rate per token) and GLM-5.3-Flash (the table of docs/rules/grouped-pd.md §2). */
export { linearTestProfile as linearProfile, glmFlashProfile as glmProfile } from "@kvsim/profile-schema/testing";

/** A spec over a trace (records passed separately), with the schema's defaults filled in. */
export function traceSpec(fields: Record<string, unknown>): Spec {
  return SpecSchema.parse({ version: 1, workload: { trace: "test.jsonl", format: "kvsim" }, ...fields });
}

/** A kvsim trace record given by length (tokens are synthesised, unique to the request). */
export const byLength = (line: number, arrivalMs: number, inputTokens: number, outputTokens: number): TraceRecord => ({
  line,
  requestId: `r${line}`,
  arrivalMs,
  inputTokens,
  outputTokens,
});

/** A kvsim trace record given by token ids. */
export const byTokens = (line: number, arrivalMs: number, tokens: readonly number[], outputTokens: number): TraceRecord => ({
  line,
  requestId: `r${line}`,
  arrivalMs,
  inputTokens: tokens.length,
  outputTokens,
  inputTokenIds: Uint32Array.from(tokens),
});
