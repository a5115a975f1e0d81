/** Fixtures shared by the scheduler's tests (not exported from the package). */
import { createPromptTokens, type PromptTokens } from "@kvsim/kv-pool";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { engineSettings, type CacheGroup, type EngineOverrides, type Profile, type Timing } from "@kvsim/profile-schema";
import type { CommandOutcome, RankConfig, RankRole, RequestInput, StepResult } from "./contract.js";
import { Rank } from "./rank.js";

export const linearProfile = (extra: Partial<Profile> = {}): Profile => ({
  schema_version: 1,
  model: "test/linear",
  vllm_version: "0.32.0",
  tensor_parallel_size: 1,
  kv_bytes_per_token: 1024,
  ...extra,
});

/** GLM-5.3-Flash, TP 4, fp8 (docs/rules/grouped-pd.md §2; the table's arithmetic is in the fixture). */
export const glmProfile = (version: "0.31.0" | "0.32.0" = "0.32.0"): Profile => glmFlashProfile(version);

const smallGroup = (g: Partial<CacheGroup> & Pick<CacheGroup, "name" | "kind">): CacheGroup => ({
  num_layers: 1,
  block_size_tokens: 4,
  prefix_cacheable: true,
  transfer_bytes_per_block: 100,
  ...g,
});

/**
 * A small hybrid pool with every kind of group (4-token blocks, 1,000-byte pages): full attention,
 * a 6-token sliding window, a ring state (not cacheable) and a Mamba-type state, which takes one
 * prefill checkpoint block on 0.32.0.
 */
export const hybridProfile = (version: "0.31.0" | "0.32.0"): Profile => ({
  schema_version: 1,
  model: `test/hybrid-${version}`,
  vllm_version: version,
  tensor_parallel_size: 1,
  page_size_bytes: 1000,
  kv_cache_groups: [
    smallGroup({ name: "fa", kind: "full_attention" }),
    smallGroup({ name: "swa", kind: "sliding_window", window_tokens: 6 }),
    smallGroup({ name: "ring", kind: "state", prefix_cacheable: false }),
    smallGroup({ name: "mamba", kind: "state", ...(version === "0.32.0" ? { prefill_checkpoint_blocks: 1 } : {}) }),
  ],
});

export const FIXED_10_2: Timing = { type: "fixed", prefill_ms: 10, decode_ms: 2 };

export interface RankOptions {
  readonly role?: RankRole;
  readonly profile?: Profile;
  readonly engine?: EngineOverrides;
  readonly timing?: Timing;
  readonly kvTransfer?: RankConfig["kvTransfer"];
  readonly collectKvEvents?: boolean;
}

export function makeRank(options: RankOptions = {}): Rank {
  return new Rank(rankConfig(options));
}

export function rankConfig(options: RankOptions = {}): RankConfig {
  return {
    role: options.role ?? "aggregated",
    profile: options.profile ?? linearProfile(),
    engine: engineSettings(options.engine ?? {}),
    timing: options.timing ?? FIXED_10_2,
    ...(options.kvTransfer === undefined ? {} : { kvTransfer: options.kvTransfer }),
    ...(options.collectKvEvents === undefined ? {} : { collectKvEvents: options.collectKvEvents }),
  };
}

/** `n` tokens all equal to `value` (vLLM's test prompts are [i] * n). */
export function repeatedPrompt(value: number, n: number): PromptTokens {
  return createPromptTokens(new Uint32Array(n).fill(value));
}

/** `n` tokens starting at `start`, counting up (no two blocks equal). */
export function rangePrompt(start: number, n: number): PromptTokens {
  return createPromptTokens(Uint32Array.from({ length: n }, (_, i) => start + i));
}

export function request(id: string, prompt: PromptTokens, maxOutputTokens: number): RequestInput {
  return { id, prompt, maxOutputTokens };
}

/** Asserts a command succeeded and returns its outcome narrowed to ok. */
export function expectOk(outcome: CommandOutcome): Extract<CommandOutcome, { ok: true }> {
  if (!outcome.ok) throw new Error(`command refused: ${outcome.reason}`);
  return outcome;
}

/** Steps back to back from `startMs` until the rank has nothing it can run; returns every pass. */
export function runToIdle(rank: Rank, startMs = 0, maxSteps = 100_000): StepResult[] {
  const passes: StepResult[] = [];
  let now = startMs;
  for (let i = 0; i < maxSteps; i++) {
    const r = rank.step(now);
    if (r === undefined) return passes;
    passes.push(r);
    now = r.endMs;
  }
  throw new Error(`the rank did not go idle within ${maxSteps} steps`);
}

/** Per request id, the tokens scheduled in a pass. */
export function scheduledOf(pass: StepResult): Record<string, number> {
  return Object.fromEntries(pass.scheduled.map((w) => [w.requestId, w.tokens]));
}
