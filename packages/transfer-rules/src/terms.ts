import type { Blocks, Bytes, Tokens, TransferMode } from "@kvsim/profile-schema";

/**
 * The transfer terms of one handoff (docs/rules/grouped-pd.md §6). Block and token units are distinct
 * types, and fixed bytes (window and state groups) are kept apart from the per-unit payload.
 *
 * `missing` is filled once the destination is known: the units it lacks and the fixed bytes it
 * still needs (zero on a full destination hit).
 */
interface TermsBase {
  readonly mode: TransferMode;
  /** Decimal GB/s (10^9 B/s); undefined means "no modelled delay". Never 0. */
  readonly bandwidthGbps: number | undefined;
  /** Prompt tokens the prefill does not compute (1 for a Mamba-type model, else 0). */
  readonly backoffTokens: Tokens;
  /** Tokens the prefill computes and hands over: T = N - backoff. */
  readonly transferredTokens: Tokens;
  /** Bytes of one unit (one full-attention block summed over full-attention groups, or one token). */
  readonly bytesPerUnit: Bytes;
  /** Bytes charged once per handoff for a full-prompt transfer (window and state groups). */
  readonly fixedBytes: Bytes;
}

/** A grouped source: counts full-attention blocks of `blockSizeTokens` tokens. */
export interface BlockTransferTerms extends TermsBase {
  readonly unit: "block";
  readonly blockSizeTokens: Tokens;
  readonly promptUnits: Blocks;
  readonly missing?: { readonly units: Blocks; readonly fixedBytes: Bytes };
}

/** A linear source: counts tokens at `kv_bytes_per_token`. It never carries a block size. */
export interface TokenTransferTerms extends TermsBase {
  readonly unit: "token";
  readonly blockSizeTokens?: never;
  readonly promptUnits: Tokens;
  readonly missing?: { readonly units: Tokens; readonly fixedBytes: Bytes };
}

export type TransferTerms = BlockTransferTerms | TokenTransferTerms;
