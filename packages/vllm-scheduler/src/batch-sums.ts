/** Readers of a step batch's optional speculative-decoding sums (shared by the timing models). */
import type { StepBatch } from "./timing-model.js";

/**
 * Tokens the decode rows of `batch` compute: `decodeTokens` when given (a batch filled in place
 * starts it at 0, so 0 also means "one per row").
 */
export const decodeTokensOf = (batch: StepBatch): number =>
  batch.decodeTokens !== undefined && batch.decodeTokens > 0 ? batch.decodeTokens : batch.decodeRows;

/** The decode rows' causal pairs: `decodeAttentionPairs` when given and not 0, else the KV tokens. */
export const decodePairsOf = (batch: StepBatch): number =>
  batch.decodeAttentionPairs !== undefined && batch.decodeAttentionPairs > 0 ? batch.decodeAttentionPairs : batch.decodeKvTokens;
