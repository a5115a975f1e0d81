import { checkPdGate, isGroupedProfile, isMambaTypeGroup, type CacheGroup } from "@kvsim/profile-schema";
import { checkBandwidth } from "@kvsim/transfer-rules";
import type { RankConfig, RankRole } from "./contract.js";
import { rooflineGpuProblem } from "./roofline.js";
import { speculativeTimingProblem } from "./speculative-timing.js";

/** One reason a rank configuration is refused, located by a field path. */
export interface RankConfigProblem {
  readonly role: RankRole;
  readonly path: string;
  readonly message: string;
}

/** A rank that cannot be built; `problems` lists every reason at once. */
export class RankConfigError extends Error {
  override readonly name = "RankConfigError";
  constructor(readonly problems: readonly RankConfigProblem[]) {
    super(
      `the ${problems[0]?.role ?? "rank"} rank configuration is refused (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n` +
        problems.map((p) => `  - ${p.path === "" ? "" : `${p.path}: `}${p.message}`).join("\n"),
    );
  }
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** The block a Mamba-type state checkpoints at (the lcm of the Mamba-type groups' block sizes), or undefined. */
export function mambaBlockSize(groups: readonly CacheGroup[]): number | undefined {
  let lcm: number | undefined;
  for (const g of groups) {
    if (!isMambaTypeGroup(g)) continue;
    lcm = lcm === undefined ? g.block_size_tokens : (lcm / gcd(lcm, g.block_size_tokens)) * g.block_size_tokens;
  }
  return lcm;
}

/**
 * Every problem with a rank configuration: the P/D gate for prefill and decode roles, the timing
 * tables a `profile` timing needs for the role, the engine block size of a grouped profile, the
 * transfer bandwidth, and, when the pool aligns prefill chunks to `alignBlock` tokens (Mamba-type
 * "align" mode), a budget and threshold that can hold one block.
 */
export function rankConfigProblems(config: RankConfig, alignBlock: number | undefined): RankConfigProblem[] {
  const { role, profile, engine, timing } = config;
  const problems: RankConfigProblem[] = [];
  const add = (path: string, message: string) => problems.push({ role, path, message });
  if (role !== "aggregated") {
    for (const p of checkPdGate(profile, role)) problems.push({ role, path: p.path, message: p.message });
  }
  if (timing.type === "profile") {
    const fp = profile.forward_pass;
    if (fp === undefined) {
      add(
        "profile.forward_pass",
        `"profile" timing needs the profile's forward_pass tables, and profile ${profile.model} has none: measure its passes, or use timing type roofline (from the model_shape kvsim profile from-hf writes), linear (fitted by kvsim calibrate) or fixed`,
      );
    } else {
      if (role !== "decode" && fp.prefill.length === 0)
        add("profile.forward_pass.prefill", `must list measured points: a ${role} rank prices prefill work from it`);
      if (role !== "prefill" && fp.decode.length === 0)
        add("profile.forward_pass.decode", `must list measured points: a ${role} rank prices decode work from it`);
    }
  }
  if (timing.type === "roofline") {
    if (profile.model_shape === undefined) {
      add("profile.model_shape", `"roofline" timing needs the profile's model_shape, and profile ${profile.model} has none: kvsim profile from-hf writes it`);
    }
    const gpuProblem = rooflineGpuProblem(engine);
    if (gpuProblem !== undefined) add("engine.gpu", gpuProblem);
  }
  if (isGroupedProfile(profile) && engine.block_size !== undefined) {
    add("engine.block_size", "applies to linear profiles only; a grouped profile takes its block sizes from kv_cache_groups");
  }
  if (alignBlock !== undefined) {
    // vLLM's align mode cuts prefill chunks to whole Mamba blocks: a smaller budget never progresses.
    if (engine.max_num_batched_tokens < alignBlock) {
      add(
        "engine.max_num_batched_tokens",
        `${engine.max_num_batched_tokens} is below the Mamba-type block of ${alignBlock} tokens: with prefix caching, prefill chunks end on block boundaries`,
      );
    }
    if (engine.long_prefill_token_threshold > 0 && engine.long_prefill_token_threshold < alignBlock) {
      add(
        "engine.long_prefill_token_threshold",
        `${engine.long_prefill_token_threshold} is below the Mamba-type block of ${alignBlock} tokens: with prefix caching, prefill chunks end on block boundaries`,
      );
    }
  }
  const spec = engine.speculative_config;
  if (spec !== undefined && role !== "prefill") {
    if (engine.async_scheduling) add("engine.speculative_config", "is not modelled together with async_scheduling: turn one of them off");
    const problem = speculativeTimingProblem(spec, profile, timing.type);
    if (problem !== undefined) add("engine.speculative_config", problem);
  }
  if (engine.async_scheduling && role !== "aggregated") {
    add("engine.async_scheduling", `is modelled on aggregated ranks only; this is a ${role} rank`);
  }
  const bw = config.kvTransfer?.bandwidthGbps;
  if (bw !== undefined) {
    const problem = checkBandwidth(bw);
    if (problem !== undefined) add("kv_transfer.bandwidth_gbps", problem);
  }
  return problems;
}
