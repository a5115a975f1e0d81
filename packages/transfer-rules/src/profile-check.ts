import {
  InputError,
  fullAttentionBlockSize,
  handoffLayoutIssues,
  type CacheGroup,
  type GroupedProfile,
  type InputIssue,
  type Profile,
  type Tokens,
} from "@kvsim/profile-schema";

/** A group whose transfer marker is known to be present. */
type PricedGroup = CacheGroup & { readonly transfer_bytes_per_block: number; readonly prefix_cacheable: boolean };

/** What pricing needs from a grouped profile, once checked. */
export interface PricedGroups {
  /** The one block size every full-attention group shares: the handoff's unit. */
  readonly blockSizeTokens: Tokens;
  readonly groups: readonly PricedGroup[];
}

// Stryker disable next-line StringLiteral: TR-02
const LABEL = "<profile>";

/**
 * Why a profile cannot price a handoff (docs/rules/grouped-pd.md §5), as located issues; empty when it
 * can: profile-schema's `handoffLayoutIssues`. Profiles written before the markers existed still
 * load and serve aggregated replay; only pricing refuses them.
 */
export const transferProfileIssues = (profile: Profile): InputIssue[] => handoffLayoutIssues(profile);

/**
 * Profiles already checked, with their answer: a replay prices every handoff with the same
 * profile object, and the check costs far more than the pricing. Profiles are read-only values.
 */
const checked = new WeakMap<GroupedProfile, PricedGroups>();

/** The checked groups of a grouped profile; throws InputError naming each group and field. */
export function pricedGroups(profile: GroupedProfile): PricedGroups {
  const known = checked.get(profile);
  if (known !== undefined) return known;
  const issues = transferProfileIssues(profile);
  if (issues.length > 0) throw new InputError(LABEL, issues);
  // handoffLayoutIssues guarantees every marker and one full-attention block size.
  const priced = { blockSizeTokens: fullAttentionBlockSize(profile), groups: profile.kv_cache_groups as readonly PricedGroup[] };
  checked.set(profile, priced);
  return priced;
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
