import { formatPath, type InputIssue } from "./errors.js";
import { takesPrefillCheckpoints } from "./geometry.js";
import { isGroupedProfile, isMambaTypeGroup, type CacheGroup, type GroupedProfile, type Profile } from "./profile.js";
import { MAX_REQUEST_TOKENS } from "./limits.js";
import { MAX_SAFE_BYTES, tokens, type Tokens } from "./units.js";

/** The two roles of a disaggregated (P/D) topology. */
export type PdRole = "prefill" | "decode";

/** One reason a profile cannot serve a P/D role. `path` is the field in the profile. */
export interface PdGateProblem {
  readonly role: PdRole;
  readonly path: string;
  readonly message: string;
}

/** The vLLM releases whose grouped P/D rules kvsim models (docs/rules/grouped-pd.md §5). */
export const PD_VLLM_VERSIONS: readonly string[] = ["0.31.0", "0.32.0"];

const groupPath = (i: number, field: keyof CacheGroup) => formatPath(["kv_cache_groups", i, field]);
const groupLabel = (g: CacheGroup, i: number) => `kv_cache_groups[${i}] "${g.name}"`;

/**
 * Every reason `profile` cannot serve `role` in a P/D topology (docs/rules/grouped-pd.md §5); empty
 * when it can. A linear profile always passes: the gate guards the grouped rules.
 */
export function checkPdGate(profile: Profile, role: PdRole): PdGateProblem[] {
  if (!isGroupedProfile(profile)) return [];
  const problems: PdGateProblem[] = [];
  const add = (path: string, message: string) => problems.push({ role, path, message: `${role} role: ${message}` });
  const version = profile.vllm_version;
  if (!PD_VLLM_VERSIONS.includes(version)) {
    add("vllm_version", `vllm_version must be ${PD_VLLM_VERSIONS.join(" or ")} for a grouped P/D rank (got ${version})`);
  }
  for (const issue of handoffLayoutIssues(profile)) add(issue.path, issue.message);
  profile.kv_cache_groups.forEach((g, i) => {
    const checkpoints = g.prefill_checkpoint_blocks ?? 0;
    if (checkpoints > 0) {
      if (!isMambaTypeGroup(g)) {
        add(
          groupPath(i, "prefill_checkpoint_blocks"),
          `prefill_checkpoint_blocks must be 0 except on a prefix-cacheable state group (got ${checkpoints} on ${groupLabel(g, i)}, a ${g.prefix_cacheable === true ? "prefix-cacheable" : "non-cacheable"} ${g.kind} group)`,
        );
      }
      if (!takesPrefillCheckpoints(version)) {
        add(
          groupPath(i, "prefill_checkpoint_blocks"),
          `prefill_checkpoint_blocks must be 0 before vLLM 0.32.0 (got ${checkpoints} on ${groupLabel(g, i)}, vllm_version ${version})`,
        );
      }
    }
  });
  return problems;
}

/**
 * Why a profile's cache layout cannot be priced as a handoff, whatever its vLLM version: every
 * group needs `prefix_cacheable` and `transfer_bytes_per_block`, and the full-attention groups (at
 * least one) share one block size, the handoff's unit. Empty for a linear profile. Part of
 * `checkPdGate`; transfer pricing checks only this.
 */
export function handoffLayoutIssues(profile: Profile): InputIssue[] {
  if (!isGroupedProfile(profile)) {
    const rate = profile.kv_bytes_per_token ?? 0;
    if (rate * MAX_REQUEST_TOKENS <= MAX_SAFE_BYTES) return [];
    return [
      {
        path: "kv_bytes_per_token",
        message: `kv_bytes_per_token must be at most ${MAX_SAFE_BYTES / MAX_REQUEST_TOKENS} (2^29) to price a handoff: the longest prompt (2^24 tokens) would move ${rate} x 2^24 bytes, beyond 2^53 (got ${rate})`,
      },
    ];
  }
  const issues: InputIssue[] = [];
  const add = (path: string, message: string) => issues.push({ path, message });
  let firstFull: { readonly index: number; readonly size: number } | undefined;
  profile.kv_cache_groups.forEach((g, i) => {
    if (g.prefix_cacheable === undefined) {
      add(groupPath(i, "prefix_cacheable"), `prefix_cacheable is required on every group for P/D (${groupLabel(g, i)} has none)`);
    }
    if (g.transfer_bytes_per_block === undefined) {
      add(groupPath(i, "transfer_bytes_per_block"), `transfer_bytes_per_block is required on every group for P/D (${groupLabel(g, i)} has none)`);
    }
    if (g.kind !== "full_attention") return;
    if (firstFull === undefined) {
      firstFull = { index: i, size: g.block_size_tokens };
    } else if (g.block_size_tokens !== firstFull.size) {
      add(
        groupPath(i, "block_size_tokens"),
        `block_size_tokens must be the same on every full_attention group, the handoff unit (got ${g.block_size_tokens}, kv_cache_groups[${firstFull.index}] has ${firstFull.size})`,
      );
    }
  });
  if (firstFull === undefined) {
    add("kv_cache_groups", "kv_cache_groups needs at least one full_attention group: a grouped handoff counts in full-attention blocks");
  }
  const worst = worstHandoff(profile.kv_cache_groups);
  if (worst.bytes > MAX_SAFE_BYTES) {
    add(
      groupPath(worst.largest, "transfer_bytes_per_block"),
      `transfer_bytes_per_block is too large to price a handoff: the longest prompt (2^24 tokens) would move about ${worst.bytes.toPrecision(3)} bytes, beyond 2^53 (${groupLabel(profile.kv_cache_groups[worst.largest]!, worst.largest)}: ${worst.largestBytes.toPrecision(3)})`,
    );
  }
  return issues;
}

/**
 * Bytes a handoff of the longest prompt (MAX_REQUEST_TOKENS) moves at most, over every group (full
 * attention: every block; window: one window's blocks plus one; state: one block), and the group
 * that moves the most. When it fits in 2^53 bytes, pricing any prompt is exact.
 */
function worstHandoff(groups: readonly CacheGroup[]): { bytes: number; largest: number; largestBytes: number } {
  let total = 0;
  let largest = 0;
  let largestBytes = 0;
  groups.forEach((g, i) => {
    const all = Math.ceil(MAX_REQUEST_TOKENS / g.block_size_tokens);
    const window = g.window_tokens === undefined ? all : Math.min(all, Math.ceil(g.window_tokens / g.block_size_tokens) + 1);
    const moved = (g.kind === "state" ? 1 : g.kind === "full_attention" ? all : window) * (g.transfer_bytes_per_block ?? 0);
    total += moved;
    if (moved > largestBytes) {
      largest = i;
      largestBytes = moved;
    }
  });
  return { bytes: total, largest, largestBytes };
}

/** The group fields a P/D pair must agree on. prefill_checkpoint_blocks is local: checkpoints never move. */
const PAIRED_FIELDS = ["name", "kind", "num_layers", "block_size_tokens", "window_tokens", "prefix_cacheable", "transfer_bytes_per_block"] as const;

const show = (v: string | number | boolean | undefined): string => (v === undefined ? "none" : typeof v === "string" ? `"${v}"` : String(v));

/**
 * Refuses a prefill/decode pair whose KV layouts differ: one grouped and one linear (a grouped
 * rank counts in blocks, a linear rank in tokens; the path is "", the whole decode profile),
 * different `kv_cache_groups`, or different `kv_bytes_per_token`. Problems carry role `decode`
 * and paths into the decode profile.
 */
export function checkPdTopology(prefill: Profile, decode: Profile): PdGateProblem[] {
  const problems: PdGateProblem[] = [];
  const add = (path: string, message: string) => problems.push({ role: "decode", path, message: `decode role: ${message}` });
  const pGroups = prefill.kv_cache_groups;
  const dGroups = decode.kv_cache_groups;
  if (pGroups === undefined || dGroups === undefined) {
    if (pGroups !== undefined || dGroups !== undefined) {
      // Not one field but the whole layout: the path is the profile itself (callers point at it).
      const layout = (groups: unknown) => (groups === undefined ? "linear (kv_bytes_per_token)" : "grouped (kv_cache_groups)");
      add(
        "",
        `the prefill and decode profiles have different KV layouts: the prefill profile is ${layout(pGroups)}, the decode profile ${layout(dGroups)}; a grouped rank counts in blocks, a linear rank in tokens, so no handoff can pass between them`,
      );
    } else if (prefill.kv_bytes_per_token !== decode.kv_bytes_per_token) {
      add(
        "kv_bytes_per_token",
        `kv_bytes_per_token must match the prefill role's (got ${show(decode.kv_bytes_per_token)}, prefill has ${show(prefill.kv_bytes_per_token)})`,
      );
    }
    return problems;
  }
  if (pGroups.length !== dGroups.length) {
    add("kv_cache_groups", `kv_cache_groups must match the prefill role's (got ${dGroups.length} groups, prefill has ${pGroups.length})`);
    return problems;
  }
  dGroups.forEach((d, i) => {
    const p = pGroups[i]!;
    for (const field of PAIRED_FIELDS) {
      if (d[field] !== p[field]) {
        add(
          groupPath(i, field),
          `kv_cache_groups must match the prefill role's: ${field} of kv_cache_groups[${i}] differs (got ${show(d[field])}, prefill has ${show(p[field])})`,
        );
      }
    }
  });
  return problems;
}

/**
 * The block size of a grouped profile's full-attention groups: the unit a grouped handoff counts
 * in. Throws a RangeError when the profile has no full-attention group or two sizes (checkPdGate
 * refuses such profiles first).
 */
export function fullAttentionBlockSize(profile: GroupedProfile): Tokens {
  let size: number | undefined;
  for (const g of profile.kv_cache_groups) {
    if (g.kind !== "full_attention") continue;
    if (size !== undefined && size !== g.block_size_tokens) {
      throw new RangeError(`profile ${profile.model}: full_attention groups have block sizes ${size} and ${g.block_size_tokens}; checkPdGate refuses it`);
    }
    size = g.block_size_tokens;
  }
  if (size === undefined) throw new RangeError(`profile ${profile.model} has no full_attention group; checkPdGate refuses it`);
  return tokens(size);
}
