import { InputError, tokens, type CacheGroup, type GroupedProfile, type InputIssue, type Profile, type Tokens } from "@kvsim/profile-schema";

/** A group whose transfer marker is known to be present. */
export type PricedGroup = CacheGroup & { readonly transfer_bytes_per_block: number; readonly prefix_cacheable: boolean };

/** What pricing needs from a grouped profile, once checked. */
export interface PricedGroups {
  /** The one block size every full-attention group shares: the handoff's unit. */
  readonly blockSizeTokens: Tokens;
  readonly groups: readonly PricedGroup[];
}

const LABEL = "<profile>";

/**
 * Why a profile cannot price a handoff (grouped-pd.md section 5), as located issues; empty when it
 * can. A linear profile always can. A grouped one needs, on every group, `prefix_cacheable` and
 * `transfer_bytes_per_block`, and at least one full-attention group, all of one block size.
 * Profiles written before the markers existed still load and serve aggregated replay; only
 * pricing refuses them.
 */
export function transferProfileIssues(profile: Profile): InputIssue[] {
  const groups = profile.kv_cache_groups;
  if (groups === undefined) return [];
  const issues: InputIssue[] = [];
  groups.forEach((g, i) => {
    for (const field of ["prefix_cacheable", "transfer_bytes_per_block"] as const) {
      if (g[field] === undefined) {
        issues.push({
          path: `kv_cache_groups[${i}].${field}`,
          message: `group "${g.name}" needs ${field} to price a handoff (a profile without the transfer markers serves aggregated replay only)`,
        });
      }
    }
  });
  const full = groups.map((g, i) => ({ g, i })).filter(({ g }) => g.kind === "full_attention");
  const first = full[0];
  if (first === undefined) {
    issues.push({ path: "kv_cache_groups", message: "a grouped handoff counts in full-attention blocks: at least one full_attention group is needed" });
  } else {
    for (const { g, i } of full.slice(1)) {
      if (g.block_size_tokens !== first.g.block_size_tokens) {
        issues.push({
          path: `kv_cache_groups[${i}].block_size_tokens`,
          message: `full-attention groups must share one block size: group "${g.name}" has ${g.block_size_tokens}, group "${first.g.name}" has ${first.g.block_size_tokens}`,
        });
      }
    }
  }
  return issues;
}

/** The checked groups of a grouped profile; throws InputError naming each group and field. */
export function pricedGroups(profile: GroupedProfile): PricedGroups {
  const issues = transferProfileIssues(profile);
  if (issues.length > 0) throw new InputError(LABEL, issues);
  const groups = profile.kv_cache_groups;
  const full = groups.find((g) => g.kind === "full_attention");
  // transferProfileIssues guarantees both: every marker present and a full-attention group.
  return { blockSizeTokens: tokens(full!.block_size_tokens), groups: groups as readonly PricedGroup[] };
}

/**
 * Refuses a grouped profile where a `state` group lacks `prefix_cacheable`: without it nobody can
 * tell a Mamba-type state (which backs off one token) from a ring.
 */
export function assertMambaTypeKnown(profile: Profile): void {
  const issues: InputIssue[] = [];
  profile.kv_cache_groups?.forEach((g, i) => {
    if (g.kind === "state" && g.prefix_cacheable === undefined) {
      issues.push({
        path: `kv_cache_groups[${i}].prefix_cacheable`,
        message: `state group "${g.name}" needs prefix_cacheable to tell a Mamba-type state (backoff 1 token) from a ring`,
      });
    }
  });
  if (issues.length > 0) throw new InputError(LABEL, issues);
}
