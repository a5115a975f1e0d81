import { blocks, bytes, cdiv, isGroupedProfile, tokens, type Bytes, type Millis, type Profile, type Tokens, type TransferMode } from "@kvsim/profile-schema";
import { assertBandwidth, delayMsForBytes } from "./delay.js";
import { pricedGroups } from "./profile-check.js";
import { assertCount, backoffTokens, groupPayload, linearBlockSize, timesBytes, type GroupPayload, type LinearOptions } from "./rules.js";
import type { BlockTransferTerms, TokenTransferTerms, TransferTerms } from "./terms.js";

export interface SourceTermsOptions extends LinearOptions {
  readonly mode: TransferMode;
  /** Decimal GB/s; absent means no modelled delay. 0, negative or non-finite is refused. */
  readonly bandwidthGbps?: number | undefined;
}

/**
 * The bytes of the rows that are not full attention, summed in row order. One loop, not
 * filter().reduce(): the filtered array's elements kind differs by how the rows were built, and
 * the sum, inlined into a handoff's pricing, was deoptimised on meeting the second kind.
 */
function fixedBytesOf(rows: readonly GroupPayload[]): Bytes {
  let sum = 0;
  for (const r of rows) if (r.kind !== "full_attention") sum += r.bytes;
  return bytes(sum);
}

/**
 * The transfer terms a source (prefill) rank reports for a prompt of N tokens
 * (docs/rules/grouped-pd.md §6). Grouped: unit "block" of the full-attention block size B,
 * promptUnits = cdiv(T, B), bytesPerUnit = the full-attention groups' bytes per block,
 * fixedBytes = the window groups' in-window blocks and the state groups' blocks. Linear: unit
 * "token", promptUnits = N, bytesPerUnit = kv_bytes_per_token, fixedBytes 0 (linear terms carry no
 * block size; `options.blockSizeTokens` is only checked here and is passed to `withDestination`).
 */
export function sourceTerms(profile: Profile, promptTokens: Tokens, options: SourceTermsOptions): TransferTerms {
  if (options.bandwidthGbps !== undefined) assertBandwidth(options.bandwidthGbps);
  const backoff = backoffTokens(profile, promptTokens);
  const t = tokens(promptTokens - backoff);
  // Object literals with every key, not a spread base: V8 (Node 20) builds `{ ...base, more }`
  // through its slow path, several microseconds per object (once per handoff, most of this call).
  if (!isGroupedProfile(profile)) {
    linearBlockSize(options);
    const terms: TokenTransferTerms = {
      mode: options.mode,
      bandwidthGbps: options.bandwidthGbps,
      backoffTokens: backoff,
      transferredTokens: t,
      unit: "token",
      promptUnits: t,
      bytesPerUnit: bytes(profile.kv_bytes_per_token!),
      fixedBytes: bytes(0),
    };
    return terms;
  }
  const { blockSizeTokens, groups } = pricedGroups(profile);
  let perBlock = 0;
  for (const g of groups) if (g.kind === "full_attention") perBlock += g.transfer_bytes_per_block;
  const bytesPerUnit = bytes(perBlock);
  const terms: BlockTransferTerms = {
    mode: options.mode,
    bandwidthGbps: options.bandwidthGbps,
    backoffTokens: backoff,
    transferredTokens: t,
    unit: "block",
    blockSizeTokens,
    promptUnits: blocks(cdiv(t, blockSizeTokens)),
    bytesPerUnit,
    fixedBytes: fixedBytesOf(groupPayload(profile, t)),
  };
  return terms;
}

/**
 * The terms once the destination is known to hold a prefix of L tokens (its own prefix-cache hit):
 * `missing` gets what it lacks. Grouped: the missing full-attention blocks,
 * cdiv(T, B) - floor(L / B), and the window and state bytes still needed (zero when no
 * full-attention block is missing). Linear: the missing tokens rounded to whole engine blocks as
 * vLLM reserves them, (cdiv(T, B) - floor(L / B)) x B, with B = `options.blockSizeTokens`
 * (default 16). A hit beyond the transfer lacks nothing.
 */
export function withDestination(terms: TransferTerms, profile: Profile, destinationHitTokens: Tokens, options?: LinearOptions): TransferTerms {
  assertCount("destination hit tokens", destinationHitTokens, 0);
  const t = terms.transferredTokens;
  if (terms.unit === "block") {
    if (!isGroupedProfile(profile)) throw new RangeError("block transfer terms need the grouped profile they were priced from, got a linear profile");
    const { blockSizeTokens } = pricedGroups(profile);
    if (blockSizeTokens !== terms.blockSizeTokens) {
      throw new RangeError(`the terms count blocks of ${terms.blockSizeTokens} tokens but the profile's full-attention block is ${blockSizeTokens} tokens`);
    }
    const units = blocks(Math.max(0, cdiv(t, blockSizeTokens) - Math.floor(destinationHitTokens / blockSizeTokens)));
    // groupPayload itself moves nothing at all when no full-attention block is missing.
    const fixed = fixedBytesOf(groupPayload(profile, t, destinationHitTokens));
    return withMissing(terms, { units, fixedBytes: fixed });
  }
  if (isGroupedProfile(profile)) throw new RangeError("token transfer terms need the linear profile they were priced from, got a grouped profile");
  const b = linearBlockSize(options);
  const units = tokens(Math.max(0, cdiv(t, b) - Math.floor(destinationHitTokens / b)) * b);
  return withMissing(terms, { units, fixedBytes: bytes(0) });
}

/** `{ ...terms, missing }` (the same keys in the same order) as one literal (see sourceTerms). */
function withMissing(terms: BlockTransferTerms, missing: NonNullable<BlockTransferTerms["missing"]>): BlockTransferTerms;
function withMissing(terms: TokenTransferTerms, missing: NonNullable<TokenTransferTerms["missing"]>): TokenTransferTerms;
function withMissing(terms: TransferTerms, missing: { readonly units: number; readonly fixedBytes: Bytes }): TransferTerms {
  if (terms.unit === "block") {
    return {
      mode: terms.mode,
      bandwidthGbps: terms.bandwidthGbps,
      backoffTokens: terms.backoffTokens,
      transferredTokens: terms.transferredTokens,
      unit: terms.unit,
      blockSizeTokens: terms.blockSizeTokens,
      promptUnits: terms.promptUnits,
      bytesPerUnit: terms.bytesPerUnit,
      fixedBytes: terms.fixedBytes,
      missing: { units: blocks(missing.units), fixedBytes: missing.fixedBytes },
    };
  }
  return {
    mode: terms.mode,
    bandwidthGbps: terms.bandwidthGbps,
    backoffTokens: terms.backoffTokens,
    transferredTokens: terms.transferredTokens,
    unit: terms.unit,
    promptUnits: terms.promptUnits,
    bytesPerUnit: terms.bytesPerUnit,
    fixedBytes: terms.fixedBytes,
    missing: { units: tokens(missing.units), fixedBytes: missing.fixedBytes },
  };
}

/**
 * The bytes the terms' mode charges. `full_prompt`: promptUnits x bytesPerUnit + fixedBytes.
 * `destination_missing`: missing.units x bytesPerUnit + missing.fixedBytes, or the full-prompt
 * payload while the destination is not yet known.
 */
export function payloadBytes(terms: TransferTerms): Bytes {
  if (terms.mode === "destination_missing" && terms.missing !== undefined) {
    return bytes(timesBytes(terms.missing.units, terms.bytesPerUnit) + terms.missing.fixedBytes);
  }
  return bytes(timesBytes(terms.promptUnits, terms.bytesPerUnit) + terms.fixedBytes);
}

/** The fixed bytes the terms' mode charges (the part of `payloadBytes` not priced per unit). */
export function chargedFixedBytes(terms: TransferTerms): Bytes {
  return terms.mode === "destination_missing" && terms.missing !== undefined ? terms.missing.fixedBytes : terms.fixedBytes;
}

/** payloadBytes / (GB/s x 10^9) x 1000 ms; undefined when the terms have no bandwidth. */
export function transferDelayMs(terms: TransferTerms): Millis | undefined {
  if (terms.bandwidthGbps === undefined) return undefined;
  return delayMsForBytes(payloadBytes(terms), terms.bandwidthGbps);
}
