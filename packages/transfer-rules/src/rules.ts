import {
  DEFAULT_LINEAR_BLOCK_SIZE,
  blocks,
  blocksCovering,
  bytes,
  cdiv,
  hasMambaTypeState,
  isGroupedProfile,
  skippedWindowBlocks,
  tokens,
  type Blocks,
  type Bytes,
  type CacheGroup,
  type CacheGroupKind,
  type Profile,
  type Tokens,
} from "@kvsim/profile-schema";
import { assertMambaTypeKnown, pricedGroups } from "./profile-check.js";

/** Blocks and bytes one cache group moves in a handoff. */
export interface GroupPayload {
  readonly name: string;
  readonly kind: CacheGroupKind;
  readonly blocks: Blocks;
  readonly bytes: Bytes;
}

/** Options for linear profiles, whose block size is the engine's, not the profile's. */
export interface LinearOptions {
  /** Tokens per block of a linear profile's engine (vLLM `block_size`); default 16. Ignored for grouped profiles. */
  readonly blockSizeTokens?: number | undefined;
}

/** The pseudo-group row of a linear profile. */
export const LINEAR_GROUP_NAME = "kv";

/** Throws a RangeError unless `value` is an integer >= `min` that a double holds exactly. */
export function assertCount(name: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  }
}

/** The engine block size of a linear profile, checked. */
export function linearBlockSize(options: LinearOptions | undefined): Tokens {
  const b = options?.blockSizeTokens ?? DEFAULT_LINEAR_BLOCK_SIZE;
  assertCount("blockSizeTokens", b, 1);
  return tokens(b);
}

/** Multiplies a count by a byte rate, refusing a product a double cannot hold exactly. */
export function timesBytes(count: number, rate: number): Bytes {
  const product = count * rate;
  if (!Number.isSafeInteger(product)) throw new RangeError(`payload of ${count} x ${rate} bytes exceeds 2^53 bytes`);
  return bytes(product);
}

/**
 * Prompt tokens the prefill does not compute (docs/rules/grouped-pd.md §2): 1 for a model with a
 * Mamba-type state group (it stops one token short; the decode rank computes the last token from
 * the transferred state), else 0; never more than N - 1, so N = 1 keeps its token.
 */
export function backoffTokens(profile: Profile, promptTokens: Tokens): Tokens {
  if (!Number.isSafeInteger(promptTokens) || promptTokens < 1) {
    throw new RangeError(`promptTokens must be an integer >= 1 (a prompt with no token is refused), got ${promptTokens}`);
  }
  return tokens(Math.min(profileBackoff(profile), promptTokens - 1));
}

/**
 * Profiles `backoffTokens` has checked, with their backoff (1 with a Mamba-type state group, else
 * 0): a replay asks for every handoff, several times, with the same profile object, and its
 * groups are checked and scanned once instead (a process's first replay ran the scan, an array
 * and two callbacks per call, mostly unoptimised). A profile that fails the check is not kept,
 * so it fails every call.
 */
const checkedBackoff = new WeakMap<Profile, number>();

function profileBackoff(profile: Profile): number {
  let backoff = checkedBackoff.get(profile);
  if (backoff === undefined) {
    assertMambaTypeKnown(profile);
    backoff = hasMambaTypeState(profile) ? 1 : 0;
    checkedBackoff.set(profile, backoff);
  }
  return backoff;
}

/** Tokens the prefill computes and hands over: T = N - backoff. */
export function transferredTokens(profile: Profile, promptTokens: Tokens): Tokens {
  return tokens(promptTokens - backoffTokens(profile, promptTokens));
}

/**
 * Blocks a group moves for `t` transferred tokens when the destination holds `hit` tokens
 * (already rounded down to whole full-attention blocks). One rule per kind, so a new kind is a
 * compile error here rather than a silent default elsewhere.
 */
type GroupRule = (group: CacheGroup, t: Tokens, hit: Tokens) => number;

const wholeBlocks = (group: CacheGroup, t: Tokens): number => Math.floor(t / group.block_size_tokens);

/** Every block of the T tokens (a partial last block included) that the destination lacks. */
const fullAttentionRule: GroupRule = (g, t, hit) => blocksCovering(g, t) - wholeBlocks(g, hit);

/** Only the blocks inside the window of the next token, less those the destination holds. */
const windowRule: GroupRule = (g, t, hit) => blocksCovering(g, t) - Math.max(skippedWindowBlocks(g, t), wholeBlocks(g, hit));

/** The one running-state block (Mamba-type) or the one ring block. */
const stateRule: GroupRule = () => 1;

const RULES: Readonly<Record<CacheGroupKind, GroupRule>> = {
  full_attention: fullAttentionRule,
  sliding_window: windowRule,
  convolution: windowRule,
  state: stateRule,
};

/**
 * Blocks and bytes moved per group for `transferred` tokens (docs/rules/grouped-pd.md §2). Without
 * `destinationHitTokens` the whole transfer moves; with a destination hit of L tokens (rounded
 * down to whole full-attention blocks) only what the destination lacks moves, and when it lacks
 * no full-attention block nothing moves at all, window and state groups included.
 * Bytes = blocks x `transfer_bytes_per_block`, never the page size.
 *
 * A linear profile gives one pseudo-group row `{ name: "kv", kind: "full_attention" }` whose
 * `blocks` are engine blocks of `options.blockSizeTokens` (default 16) and whose bytes are priced
 * per token as the two modes charge them: T x kv_bytes_per_token without a destination, and the
 * block-rounded missing tokens (cdiv(T, B) - floor(L / B)) x B x kv_bytes_per_token with one.
 */
export function groupPayload(profile: Profile, transferred: Tokens, destinationHitTokens?: Tokens, options?: LinearOptions): GroupPayload[] {
  assertCount("transferred tokens", transferred, 0);
  if (destinationHitTokens !== undefined) assertCount("destination hit tokens", destinationHitTokens, 0);
  if (!isGroupedProfile(profile)) return [linearRow(profile, transferred, destinationHitTokens, options)];
  const { blockSizeTokens, groups } = pricedGroups(profile);
  const hit = tokens(Math.floor((destinationHitTokens ?? 0) / blockSizeTokens) * blockSizeTokens);
  const missingFull = cdiv(transferred, blockSizeTokens) - hit / blockSizeTokens;
  const nothingMoves = missingFull <= 0;
  // Pushed, not mapped: an optimised map builds a holey array, the interpreter a packed one, and
  // the sums over these rows (once per handoff) were deoptimised on meeting the second.
  const rows: GroupPayload[] = [];
  for (const g of groups) {
    const moved = nothingMoves ? 0 : Math.max(0, RULES[g.kind](g, transferred, hit));
    rows.push({ name: g.name, kind: g.kind, blocks: blocks(moved), bytes: timesBytes(moved, g.transfer_bytes_per_block) });
  }
  return rows;
}

function linearRow(profile: Profile, t: Tokens, hit: Tokens | undefined, options: LinearOptions | undefined): GroupPayload {
  const b = linearBlockSize(options);
  // The schema guarantees a profile without groups has kv_bytes_per_token.
  const rate = profile.kv_bytes_per_token!;
  if (hit === undefined) return { name: LINEAR_GROUP_NAME, kind: "full_attention", blocks: blocks(cdiv(t, b)), bytes: timesBytes(t, rate) };
  const missing = Math.max(0, cdiv(t, b) - Math.floor(hit / b));
  return { name: LINEAR_GROUP_NAME, kind: "full_attention", blocks: blocks(missing), bytes: timesBytes(missing * b, rate) };
}
