// Test-only inputs (not exported from the package): profiles and specs built through the real
// schemas, so the defaults a user would get are the ones tested.
import { SpecSchema, validateProfile, type Profile, type Spec, type TraceRecord } from "@kvsim/profile-schema";

/** A linear profile: one KV rate per token. */
export function linearProfile(kvBytesPerToken: number): Profile {
  return validateProfile({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: kvBytesPerToken });
}

/** GLM-5.3-Flash, TP 4, fp8 cache (grouped-pd.md section 2 oracle table). */
export function glmProfile(version: "0.31.0" | "0.32.0"): Profile {
  const kda = (name: string, layers: number, bytes: number) => ({
    name,
    kind: "state",
    num_layers: layers,
    block_size_tokens: 2176,
    prefix_cacheable: true,
    transfer_bytes_per_block: bytes,
    ...(version === "0.32.0" ? { prefill_checkpoint_blocks: 1 } : {}),
  });
  return validateProfile({
    schema_version: 1,
    model: "zai-org/GLM-5.3-Flash",
    vllm_version: version,
    tensor_parallel_size: 4,
    kv_cache_dtype: "fp8",
    page_size_bytes: 13_045_120,
    kv_cache_groups: [
      { name: "full_attention", kind: "full_attention", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 13_045_120 },
      { name: "tail_ring", kind: "state", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: false, transfer_bytes_per_block: 22_528 },
      kda("kda_0", 9, 9_768_960),
      kda("kda_1", 9, 9_768_960),
      kda("kda_2", 8, 8_683_520),
      kda("kda_3", 8, 8_683_520),
    ],
  });
}

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
