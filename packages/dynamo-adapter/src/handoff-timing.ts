import {
  blocks,
  bytes,
  cdiv,
  isGroupedProfile,
  millis,
  tokens,
  type Blocks,
  type InputIssue,
  type Millis,
  type Profile,
  type Tokens,
  type TransferMode,
} from "@kvsim/profile-schema";
import {
  blocksToTokens,
  checkBandwidth,
  delayMsForBytes,
  sourceTerms,
  transferProfileIssues,
  type BlockTransferTerms,
  type TokenTransferTerms,
  type TransferTerms,
} from "@kvsim/transfer-rules";
import type { Conversion } from "./engine-args.js";
import { describeJson } from "./json-u64.js";

/**
 * kvsim `TransferTerms` <-> Dynamo's `HandoffTransferTiming` (docs/rules/dynamo.md §5.3
 * and §5.5; docs/rules/grouped-pd.md §6). Three quantities stay apart: a token count,
 * bytes per token, and a fixed per-request byte term. Block units become tokens only when exact.
 */

/** Dynamo's current timing shape: the fixed bytes travel in `kv_bytes_per_request`. */
export interface HandoffTransferTiming {
  readonly mode: TransferMode;
  /** Tokens. For a grouped source: prompt blocks x block size (exact bytes, not the prompt length). */
  readonly full_prompt_tokens: number;
  /** Bytes per token; null: no per-token term. */
  readonly kv_bytes_per_token: number | null;
  /** Bytes charged once per handoff (window and state groups). */
  readonly kv_bytes_per_request: number;
  /** Decimal GB/s (10^9 B/s); null: no modelled delay. Never 0. */
  readonly bandwidth_gb_s: number | null;
}

/** Dynamo's legacy four-field shape: no fixed bytes. */
export interface LegacyHandoffTransferTiming {
  readonly mode: TransferMode;
  readonly full_prompt_tokens: number;
  readonly kv_bytes_per_token: number | null;
  readonly bandwidth_gb_s: number | null;
}

/**
 * The destination side of one transfer: Dynamo's `DestinationReserved.transferable_prompt_tokens`
 * (missing full-attention blocks x block size, or block-rounded missing tokens) and, as a kvsim
 * extension, the fixed bytes this destination still needs (0 on a full destination hit, where
 * vLLM moves nothing). A plain Dynamo peer omits `kv_bytes_per_request`.
 */
export interface DestinationTransfer {
  readonly transferable_prompt_tokens: number;
  readonly kv_bytes_per_request?: number;
}

/**
 * What the Dynamo shapes leave out and the reverse conversion needs: the unit, and for blocks the
 * block size and the transferred and backoff tokens (blocks x block size only bounds them).
 */
export type TermsShape =
  { readonly unit: "token" } | { readonly unit: "block"; readonly blockSizeTokens: Tokens; readonly transferredTokens: Tokens; readonly backoffTokens: Tokens };

/** The shape of given terms, for the reverse conversion. */
export function termsShape(terms: TransferTerms): TermsShape {
  return terms.unit === "token"
    ? { unit: "token" }
    : { unit: "block", blockSizeTokens: terms.blockSizeTokens, transferredTokens: terms.transferredTokens, backoffTokens: terms.backoffTokens };
}

/** Bytes per token of block terms, when bytes per block divide exactly by the block size. */
function exactBytesPerToken(terms: BlockTransferTerms): Conversion<number> {
  const b = terms.blockSizeTokens;
  if (terms.bytesPerUnit % b !== 0) {
    return {
      ok: false,
      reason:
        `a grouped source counts full-attention blocks of ${b} tokens at ${terms.bytesPerUnit} B per block, which is not a whole number of bytes per token ` +
        `(${terms.bytesPerUnit} / ${b} = ${terms.bytesPerUnit / b}); block units are never passed as tokens inexactly`,
    };
  }
  return { ok: true, value: terms.bytesPerUnit / b };
}

/**
 * The source's timing in Dynamo's current shape (what `SourceHeld.transfer_timing` carries).
 * Token terms map one to one. Block terms become tokens only when exact: full_prompt_tokens =
 * prompt blocks x block size and kv_bytes_per_token = bytes per block / block size, which must be
 * a whole number (GLM-5.3-Flash: 13,045,120 / 2,176 = 5,995); otherwise the conversion fails.
 * Fixed bytes go to kv_bytes_per_request; no bandwidth is null, never 0.
 */
export function toDynamoTiming(terms: TransferTerms): Conversion<HandoffTransferTiming> {
  const timing = (fullPromptTokens: number, bytesPerToken: number): HandoffTransferTiming => ({
    mode: terms.mode,
    full_prompt_tokens: fullPromptTokens,
    kv_bytes_per_token: bytesPerToken,
    kv_bytes_per_request: terms.fixedBytes,
    bandwidth_gb_s: terms.bandwidthGbps ?? null,
  });
  if (terms.unit === "token") return { ok: true, value: timing(terms.promptUnits, terms.bytesPerUnit) };
  const perToken = exactBytesPerToken(terms);
  if (!perToken.ok) return perToken;
  return { ok: true, value: timing(terms.promptUnits * terms.blockSizeTokens, perToken.value) };
}

/**
 * Why a profile's handoffs have no exact Dynamo timing, as issues on the profile's fields (empty
 * when they have; a linear profile always has): a grouped profile whose full-attention bytes per
 * block do not divide by the block size. The issue is placed on the first full-attention group's
 * `transfer_bytes_per_block`. A profile that cannot price a handoff at all is
 * `transferProfileIssues`'s to report.
 */
export function dynamoTimingIssues(profile: Profile): InputIssue[] {
  if (!isGroupedProfile(profile) || transferProfileIssues(profile).length > 0) return [];
  const probe = toDynamoTiming(sourceTerms(profile, tokens(1), { mode: "full_prompt" }));
  if (probe.ok) return [];
  const first = profile.kv_cache_groups.findIndex((g) => g.kind === "full_attention");
  return [{ path: `kv_cache_groups[${first}].transfer_bytes_per_block`, message: `has no exact Dynamo transfer timing: ${probe.reason}` }];
}

/**
 * The source's timing in Dynamo's legacy four-field shape, only when it loses nothing: token units
 * and no fixed bytes. Otherwise the reason names the quantity the legacy shape would lose.
 */
export function toLegacyTiming(terms: TransferTerms): Conversion<LegacyHandoffTransferTiming> {
  const lost: string[] = [];
  if (terms.fixedBytes > 0) {
    lost.push(`the fixed bytes (${terms.fixedBytes} B per request of window and state groups; the legacy shape has no kv_bytes_per_request)`);
  }
  if (terms.unit === "block") {
    lost.push(`the block units (the source counts full-attention blocks of ${terms.blockSizeTokens} tokens; the legacy shape counts tokens)`);
  }
  if (lost.length > 0) return { ok: false, reason: `the legacy four-field timing would lose ${lost.join(" and ")}` };
  return {
    ok: true,
    value: { mode: terms.mode, full_prompt_tokens: terms.promptUnits, kv_bytes_per_token: terms.bytesPerUnit, bandwidth_gb_s: terms.bandwidthGbps ?? null },
  };
}

/**
 * The destination side in Dynamo's units, for terms whose destination is known: missing blocks x
 * block size (or the block-rounded missing tokens), and the fixed bytes still needed.
 */
export function toDestinationTransfer(terms: TransferTerms): Conversion<Required<DestinationTransfer>> {
  if (terms.missing === undefined) return { ok: false, reason: "the terms have no destination yet (missing is unset)" };
  const transferable = terms.unit === "block" ? transferablePromptTokens(terms.missing.units, terms.blockSizeTokens) : terms.missing.units;
  return { ok: true, value: { transferable_prompt_tokens: transferable, kv_bytes_per_request: terms.missing.fixedBytes } };
}

/** Missing full-attention blocks x block size: Dynamo's transferable_prompt_tokens for a grouped destination. */
export function transferablePromptTokens(missingBlocks: Blocks, blockSizeTokens: Tokens): Tokens {
  return blocksToTokens(missingBlocks, blockSizeTokens);
}

const isCount = (n: unknown, min: number): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= min;

/**
 * kvsim terms from Dynamo's timing (current or legacy shape; a missing kv_bytes_per_request is 0,
 * as Dynamo's serde default) and, when known, the destination side. The inverse of
 * `toDynamoTiming` + `toDestinationTransfer` for terms of the given shape.
 */
export function fromDynamoTiming(
  timing: HandoffTransferTiming | LegacyHandoffTransferTiming,
  shape: TermsShape,
  destination?: DestinationTransfer,
): Conversion<TransferTerms> {
  const fail = (reason: string): Conversion<TransferTerms> => ({ ok: false, reason });
  const fixed = "kv_bytes_per_request" in timing ? timing.kv_bytes_per_request : 0;
  if (!isCount(timing.full_prompt_tokens, 0)) return fail(`full_prompt_tokens must be an integer >= 0, got ${describeJson(timing.full_prompt_tokens)}`);
  if (!isCount(fixed, 0)) return fail(`kv_bytes_per_request must be an integer >= 0, got ${describeJson(fixed)}`);
  const bpt = timing.kv_bytes_per_token;
  if (bpt === null) return fail("kv_bytes_per_token is null: kvsim terms always price the prompt per unit");
  if (!isCount(bpt, 1)) return fail(`kv_bytes_per_token must be an integer > 0, got ${describeJson(bpt)}`);
  const bw = timing.bandwidth_gb_s;
  if (bw !== null) {
    const why = checkBandwidth(bw);
    if (why !== undefined) return fail(`bandwidth_gb_s: ${why}`);
  }
  const base = { mode: timing.mode, bandwidthGbps: bw ?? undefined, fixedBytes: bytes(fixed) };
  if (destination !== undefined) {
    if (!isCount(destination.transferable_prompt_tokens, 0))
      return fail(`transferable_prompt_tokens must be an integer >= 0, got ${describeJson(destination.transferable_prompt_tokens)}`);
    if (destination.kv_bytes_per_request !== undefined && !isCount(destination.kv_bytes_per_request, 0)) {
      return fail(`destination kv_bytes_per_request must be an integer >= 0, got ${describeJson(destination.kv_bytes_per_request)}`);
    }
  }
  const missingFixed = (units: number) => bytes(destination?.kv_bytes_per_request ?? (units === 0 ? 0 : fixed));

  if (shape.unit === "token") {
    const terms: TokenTransferTerms = {
      ...base,
      unit: "token",
      backoffTokens: tokens(0),
      transferredTokens: tokens(timing.full_prompt_tokens),
      promptUnits: tokens(timing.full_prompt_tokens),
      bytesPerUnit: bytes(bpt),
    };
    if (destination === undefined) return { ok: true, value: terms };
    const units = destination.transferable_prompt_tokens;
    return { ok: true, value: { ...terms, missing: { units: tokens(units), fixedBytes: missingFixed(units) } } };
  }

  const b = shape.blockSizeTokens;
  if (timing.full_prompt_tokens % b !== 0) return fail(`full_prompt_tokens ${timing.full_prompt_tokens} is not a whole number of ${b}-token blocks`);
  const promptUnits = timing.full_prompt_tokens / b;
  if (promptUnits !== cdiv(shape.transferredTokens, b)) {
    return fail(
      `full_prompt_tokens ${timing.full_prompt_tokens} is ${promptUnits} blocks but ${shape.transferredTokens} transferred tokens need cdiv(${shape.transferredTokens}, ${b}) = ${cdiv(shape.transferredTokens, b)}`,
    );
  }
  const perBlock = bpt * b;
  if (!Number.isSafeInteger(perBlock)) return fail(`kv_bytes_per_token ${bpt} x ${b} tokens exceeds 2^53 bytes per block`);
  const terms: BlockTransferTerms = {
    ...base,
    unit: "block",
    blockSizeTokens: b,
    backoffTokens: shape.backoffTokens,
    transferredTokens: shape.transferredTokens,
    promptUnits: blocks(promptUnits),
    bytesPerUnit: bytes(perBlock),
  };
  if (destination === undefined) return { ok: true, value: terms };
  const t = destination.transferable_prompt_tokens;
  if (t % b !== 0) return fail(`transferable_prompt_tokens ${t} is not a whole number of ${b}-token blocks`);
  return { ok: true, value: { ...terms, missing: { units: blocks(t / b), fixedBytes: missingFixed(t / b) } } };
}

/**
 * The timing to charge for one transfer. Dynamo charges kv_bytes_per_request even when no token
 * is missing; kvsim (like vLLM) moves nothing on a full destination hit (docs/rules/decisions.md §13). So in
 * destination_missing mode the request bytes become the destination's own figure when it sends
 * one, else 0 when nothing is missing; in full_prompt mode the source's timing stands.
 */
export function transferTimingFor(timing: HandoffTransferTiming, destination: DestinationTransfer): HandoffTransferTiming {
  if (timing.mode !== "destination_missing") return timing;
  const request = destination.kv_bytes_per_request ?? (destination.transferable_prompt_tokens === 0 ? 0 : timing.kv_bytes_per_request);
  return request === timing.kv_bytes_per_request ? timing : { ...timing, kv_bytes_per_request: request };
}

/**
 * The delay exactly as Dynamo's coordinator computes it from these fields (the
 * `kv_bytes_per_request` revision): tokens = full_prompt_tokens (full_prompt, or no destination
 * yet) or transferable_prompt_tokens (destination_missing); bytes = tokens x kv_bytes_per_token +
 * kv_bytes_per_request, charged even when no token is missing; delay = bytes / (GB/s x 10^9) x
 * 1000. Undefined when there is no bandwidth, or no per-token rate and no request bytes (Dynamo's
 * None). A legacy timing has no request bytes. Throws on a bandwidth of 0 (Dynamo refuses it too).
 */
export function dynamoDelayMs(timing: HandoffTransferTiming | LegacyHandoffTransferTiming, destination?: DestinationTransfer): Millis | undefined {
  const request = "kv_bytes_per_request" in timing ? timing.kv_bytes_per_request : 0;
  if (timing.bandwidth_gb_s === null) return undefined;
  if (timing.kv_bytes_per_token === null && request === 0) return undefined;
  const toks = timing.mode === "destination_missing" && destination !== undefined ? destination.transferable_prompt_tokens : timing.full_prompt_tokens;
  const total = toks * (timing.kv_bytes_per_token ?? 0) + request;
  if (!Number.isSafeInteger(total)) throw new RangeError(`payload of ${toks} x ${timing.kv_bytes_per_token} + ${request} bytes exceeds 2^53 bytes`);
  return delayMsForBytes(bytes(total), timing.bandwidth_gb_s);
}

/**
 * What the handoff costs in kvsim's semantics: Dynamo's formula over `transferTimingFor`, so a full
 * destination hit in destination_missing mode moves nothing. Equals transfer-rules'
 * `transferDelayMs` of the terms the two shapes came from.
 */
export function handoffDelayMs(timing: HandoffTransferTiming | LegacyHandoffTransferTiming, destination?: DestinationTransfer): Millis | undefined {
  if (destination === undefined || !("kv_bytes_per_request" in timing)) return dynamoDelayMs(timing, destination);
  return dynamoDelayMs(transferTimingFor(timing, destination), destination);
}

/**
 * The delay to put in Dynamo's `StartTransfer.delay_ms` for one transfer: the setup latency (paid
 * once, before the first byte) plus `handoffDelayMs`; no modelled bytes delay counts as 0 ms, as
 * Dynamo's coordinator does. Dynamo's `HandoffTransferTiming` has no latency field, so the latency
 * travels only here.
 */
export function startTransferDelayMs(
  timing: HandoffTransferTiming | LegacyHandoffTransferTiming,
  destination: DestinationTransfer | undefined,
  setupLatencyMs: number,
): Millis {
  if (!(setupLatencyMs >= 0) || !Number.isFinite(setupLatencyMs)) throw new RangeError(`setup latency must be finite and >= 0 ms, got ${setupLatencyMs}`);
  const wire = handoffDelayMs(timing, destination) ?? 0;
  return millis(setupLatencyMs === 0 ? wire : setupLatencyMs + wire);
}

const MODES: Readonly<Record<string, TransferMode>> = {
  full_prompt: "full_prompt",
  FullPrompt: "full_prompt",
  destination_missing: "destination_missing",
  DestinationMissing: "destination_missing",
};

const TIMING_KEYS = new Set(["mode", "full_prompt_tokens", "kv_bytes_per_token", "kv_bytes_per_request", "bandwidth_gb_s"]);

/**
 * Reads a `HandoffTransferTiming` from parsed JSON, current or legacy shape (a missing
 * kv_bytes_per_request reads as 0, as Dynamo's serde default; a missing or null per-token rate or
 * bandwidth is absent). Refuses unknown keys, a bandwidth of 0 (spell "off" as null) and
 * non-integer counts, naming the field.
 */
export function parseHandoffTiming(value: unknown): Conversion<HandoffTransferTiming> {
  const fail = (reason: string): Conversion<HandoffTransferTiming> => ({ ok: false, reason });
  if (typeof value !== "object" || value === null || Array.isArray(value)) return fail("transfer_timing must be an object");
  const o = value as Record<string, unknown>;
  for (const key of Object.keys(o)) if (!TIMING_KEYS.has(key)) return fail(`transfer_timing.${key}: unknown key`);
  const mode = typeof o.mode === "string" && Object.hasOwn(MODES, o.mode) ? MODES[o.mode] : undefined;
  if (mode === undefined) return fail(`transfer_timing.mode must be full_prompt or destination_missing, got ${describeJson(o.mode)}`);
  if (!isCount(o.full_prompt_tokens, 0)) return fail(`transfer_timing.full_prompt_tokens must be an integer >= 0, got ${describeJson(o.full_prompt_tokens)}`);
  const bpt = o.kv_bytes_per_token ?? null;
  if (bpt !== null && !isCount(bpt, 1)) return fail(`transfer_timing.kv_bytes_per_token must be an integer > 0 or null, got ${describeJson(bpt)}`);
  const request = o.kv_bytes_per_request ?? 0;
  if (!isCount(request, 0)) return fail(`transfer_timing.kv_bytes_per_request must be an integer >= 0, got ${describeJson(request)}`);
  const bw = o.bandwidth_gb_s ?? null;
  if (bw !== null) {
    if (typeof bw !== "number") return fail(`transfer_timing.bandwidth_gb_s must be a number or null, got ${describeJson(bw)}`);
    const why = checkBandwidth(bw);
    if (why !== undefined) return fail(`transfer_timing.bandwidth_gb_s: ${why}`);
  }
  return { ok: true, value: { mode, full_prompt_tokens: o.full_prompt_tokens, kv_bytes_per_token: bpt, kv_bytes_per_request: request, bandwidth_gb_s: bw } };
}
