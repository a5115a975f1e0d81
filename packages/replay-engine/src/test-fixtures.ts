// Test-only inputs (not exported from the package): profiles and specs built through the real
// schemas, so the defaults a user would get are the ones tested.
import { SpecSchema, type Spec, type TraceRecord } from "@kvsim/profile-schema";
import { linearTestProfile } from "@kvsim/profile-schema/testing";

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

/** Token ids start, start + 1, ... (n of them). */
export const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);

/**
 * The offload tests' scenario: 1,024 bytes a token in blocks of 4 (4,096 bytes a block), four
 * usable pages, fixed 10 / 2 ms. The CPU tier loads at 12.288 MB/s (three blocks in 1 ms) after
 * 0.5 ms. r1 (13 tokens) caches three blocks; r2 (16 tokens) at 20 ms takes every page and evicts
 * them; r3 at 40 ms repeats r1's prompt.
 */
export const offloadScenario = {
  base: {
    profile: linearTestProfile(1024),
    topology: { kind: "aggregated", workers: 1 },
    engine: { num_gpu_blocks: 5, block_size: 4, enable_prefix_caching: true },
    timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
  },
  cpu: { name: "cpu", capacity: "1 MiB", read_bandwidth: "12.288 MB/s", write_bandwidth: "10 GB/s", latency_ms: 0.5 },
  trace: [byTokens(1, 0, range(0, 13), 1), byTokens(2, 20, range(1000, 16), 1), byTokens(3, 40, range(0, 13), 1)],
} as const;
