import { InputError, type Profile } from "@kvsim/profile-schema";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";

/**
 * Profiles for tests, built from the oracle table of docs/rules/grouped-pd.md §2 (not exported from the package).
 *
 * GLM-5.3-Flash, TP 4, fp8: full attention 11 x 1,114,112 + 11 x 71,808 = 13,045,120 B per
 * 2,176-token block; fixed bytes = ring 11 x 2,048 = 22,528 + KDA 2 x 9 x 1,085,440 = 19,537,920
 * + 2 x 8 x 1,085,440 = 17,367,040, total 36,927,488 B.
 */
export const GLM: Profile = glmFlashProfile("0.32.0");

/** A linear profile at `kvBytesPerToken` bytes per token. */
export function linearProfile(kvBytesPerToken: number): Profile {
  return { schema_version: 1, model: "linear-test", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: kvBytesPerToken };
}

/** Llama-3.1-8B bf16: 32 layers x 2 (K, V) x 8 KV heads x 128 head dim x 2 bytes = 131,072 B per token. */
export const LLAMA_8B = linearProfile(131_072);

/**
 * A small grouped profile whose full-attention block bytes do not divide by the block size:
 * 1,000 B per 16-token block is 62.5 B per token, so it has no exact per-token form.
 */
export const INEXACT: Profile = {
  schema_version: 1,
  model: "inexact",
  vllm_version: "0.32.0",
  tensor_parallel_size: 1,
  page_size_bytes: 4096,
  kv_cache_groups: [
    { name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: 16, prefix_cacheable: true, transfer_bytes_per_block: 1000 },
    { name: "sw", kind: "sliding_window", num_layers: 1, block_size_tokens: 16, window_tokens: 32, prefix_cacheable: true, transfer_bytes_per_block: 512 },
  ],
};

/** The issues of the InputError `fn` throws, as "path: message" lines (fails when none is thrown). */
export function refusal(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof InputError) return e.issues.map((i) => `${i.path}: ${i.message}`);
    throw e;
  }
  throw new Error("expected an InputError");
}
