/**
 * The public shapes of @kvsim/kv-pool. The scheduler is written against these; the pool
 * implements them (one class per cache-group kind behind one manager, as vLLM's v1 core).
 */
import type { CacheGroup } from "@kvsim/profile-schema";

/**
 * How a rank must cut prefill chunks so a Mamba-type state can be cached (vLLM's "align" mode):
 * * `any` — no constraint (no Mamba-type group, or prefix caching off);
 * * `align_split` — vLLM's `_mamba_block_aligned_split`: a chunk ending before the last block
 *   boundary of the sequence is cut to whole blocks, one crossing it ends exactly on it, the last
 *   chunk runs to the end;
 * * `whole_blocks_before_final` — vLLM 0.32.0 with `prefill_checkpoint_blocks`: a chunk that
 *   reaches the end of the prompt runs unchanged (its checkpoint blocks keep the states at the block
 *   boundaries inside it); any earlier chunk is cut to whole blocks so its end is a checkpoint.
 */
export type PrefillChunking = "any" | "align_split" | "whole_blocks_before_final";

/** A 64-bit block hash (XXH3-64, seed 1337, chained with the parent hash). */
export type BlockHash = bigint;

export interface KvPoolOptions {
  /** P pool pages, the null page 0 included: P - 1 are usable. */
  readonly numPages: number;
  /** Every cache group of the rank, sharing the pool. A linear profile is one full_attention group. */
  readonly groups: readonly CacheGroup[];
  readonly enablePrefixCaching: boolean;
  /** A literal vLLM version; "0.32.0" turns on `prefill_checkpoint_blocks`. */
  readonly vllmVersion: string;
  /** Collect stored/removed events for `takeEvents()`. Off by default (it costs memory). */
  readonly collectEvents?: boolean;
  /** Told of every block the pool caches and every key it evicts (an offload tier below it); see BlockListener. */
  readonly blockListener?: BlockListener;
}

/**
 * Told, in the pool's own key space (the keys `lookupKeys` gives: the real block hashes when the
 * pool collects events, its cheaper lookup keys otherwise), of the blocks a sequence's commit
 * caches, as it caches them (a key already cached included: a write-through store of it only
 * marks it used), and of each key whose last cached copy the pool evicts. No BigInt, no
 * allocation: what an offload tier needs on the replay's hot path.
 */
export interface BlockListener {
  /**
   * Blocks `first` .. `first + count - 1` of a sequence (their indices in its block table) cached in
   * group `group`: block first + i's key is (keys[2i], keys[2i + 1]), high and low int32 halves.
   */
  cached(group: number, keys: Int32Array, count: number, first: number): void;
  /** The last cached copy of (group, hi, lo) was evicted. */
  evicted(group: number, hi: number, lo: number): void;
}

/** A prompt's block keys in the pool's key space, as int32 halves (see BlockListener). */
export interface BlockKeyView {
  /** Whole blocks. */
  readonly length: number;
  blockHi(i: number): number;
  blockLo(i: number): number;
}

/** A prompt's tokens with memoised chained block hashes, shareable by every rank that sees it. */
export interface PromptTokens {
  /** Its number of tokens (read this, not `tokens.length`: a path prompt builds `tokens` only when asked). */
  readonly length: number;
  readonly tokens: Uint32Array;
  /** Hashes of the first floor(len / blockSize) blocks, computed once per block size. */
  blockHashes(blockSize: number): readonly BlockHash[];
}

/**
 * A prompt's memoised block hashes without its tokens (from `promptHashes`): lets a later prompt
 * with the same leading tokens copy them (`createPromptTokens(tokens, { hashes, tokens })`).
 */
export interface PromptHashes {
  readonly kind: "prompt-hashes";
}

/** One request's KV state on one rank: its tokens (prompt + outputs) and per-group block tables. */
export interface KvSequence {
  readonly id: string;
  readonly numPromptTokens: number;
  /** Prompt plus appended output tokens. */
  readonly numTokens: number;
  /**
   * Appends a sampled token; its block gets a hash once full (incrementally, once per block).
   * Refused on a sequence created with `outputTokenIds` (its outputs come from that function).
   */
  appendToken(tokenId: number): void;
  /**
   * Appends the next `count` outputs of a sequence created with `outputTokenIds`: output k is
   * `outputTokenIds(k)`, computed only when a block holding it is hashed (no id is stored).
   */
  appendOutputs(count: number): void;
}

/**
 * The id of output token `index` (0-based) of a sequence, a u32: a pure function of the index,
 * asked for again whenever a block holding that output is hashed.
 */
export type OutputTokenIds = (index: number) => number;

/** A prefix-cache hit found for a sequence. Opaque except for its length. */
export interface PrefixHit {
  /** Whole blocks (lcm-aligned across groups), at most numTokens - 1; 0 when caching is off. */
  readonly tokens: number;
}

export interface AllocateRequest {
  /** Tokens already computed before this step (not counting `hit`). */
  readonly computedTokens: number;
  /** Tokens to compute in this step (> 0). */
  readonly newTokens: number;
  /**
   * Speculative decoding: slots beyond the sequence's tokens (the step's draft tokens and vLLM's
   * `num_lookahead_tokens`) that attention groups hold blocks for too; they are neither computed
   * nor cached. Mamba-type groups ignore them, as vLLM's manager does. 0 when absent.
   */
  readonly lookaheadTokens?: number;
  /** The hit taken at first admission, found in this same step. */
  readonly hit?: PrefixHit;
}

export interface DestinationReservation {
  /** The destination's own prefix hit, in tokens (whole blocks). */
  readonly hitTokens: number;
  /** Full-attention blocks the destination lacks (grouped ranks count in blocks). */
  readonly missingFullAttentionBlocks: number;
  /** Pages reserved, summed over groups. */
  readonly reservedPages: number;
}

export type KvEvent =
  | {
      readonly type: "stored";
      readonly groupIndex: number;
      /** Hash of the block before the first stored block; null at the start of a sequence. */
      readonly parentHash: BlockHash | null;
      readonly blocks: readonly { readonly blockHash: BlockHash; readonly tokensHash: BlockHash }[];
    }
  | { readonly type: "removed"; readonly groupIndex: number; readonly blockHashes: readonly BlockHash[] };

export interface PoolMetrics {
  /** P - 1. */
  readonly usablePages: number;
  /** Pages referenced by at least one sequence. */
  readonly usedPages: number;
  /** Free pages that still hold a cached block (evictable). */
  readonly cachedEvictablePages: number;
  readonly freePages: number;
  /** 1 - free / (P - 1). */
  readonly usage: number;
}

/**
 * The manager of one rank's pool. Every mutating call is all-or-nothing: a call that fails
 * (returns false or undefined) changes nothing.
 */
export interface KvCacheManagerApi {
  /**
   * Starts tracking a request's tokens; allocates nothing. With `outputTokenIds`, outputs are
   * appended by count (`appendOutputs`) and their ids are computed by that function when a block
   * holding them is hashed, so a long decode stores no token ids.
   */
  createSequence(id: string, prompt: PromptTokens, outputTokenIds?: OutputTokenIds): KvSequence;
  /** The longest usable prefix hit for the sequence (hybrid fixed point). Changes nothing. */
  findPrefixHit(seq: KvSequence): PrefixHit;
  /** A prompt's block keys at `blockSize`, in the key space the pool caches under (for a BlockListener's tier). */
  lookupKeys(prompt: PromptTokens, blockSize: number): BlockKeyView;
  /** Hit length in tokens for a prompt not (yet) on this rank, for KV-aware placement. Changes nothing. */
  peekPrefixHitTokens(prompt: PromptTokens): number;
  /** Pages this allocation would take from the free queue (evictable hit blocks included). */
  pagesNeeded(seq: KvSequence, request: AllocateRequest): number;
  /**
   * Allocates the blocks a step needs across all groups (releasing blocks that fell below a window
   * first, as vLLM's remove_skipped_blocks). Returns false, changing nothing, if the pool cannot.
   */
  allocateSlots(seq: KvSequence, request: AllocateRequest): boolean;
  /** After a step: full blocks up to `computedTokens` become cache-visible (stored events). */
  commitComputed(seq: KvSequence, computedTokens: number): void;
  /**
   * For a decode fast path: how many single-token steps in a row, the first from `computedTokens`
   * (which must be the sequence's length - 1) to `computedTokens` + 1, would change nothing in the
   * pool: `allocateSlots(seq, { computedTokens: c, newTokens: 1 })` then `commitComputed(seq, c + 1)`
   * would take, free and cache no block, as long as the caller appends one token per step. A
   * caller may skip both calls for those steps and then call `advanceQuietDecode` once. 0 when
   * the next step is not quiet (or the sequence is not a running one).
   */
  quietDecodeSteps(seq: KvSequence, computedTokens: number): number;
  /** Records quiet single-token steps (see `quietDecodeSteps`) up to `computedTokens` computed, as their calls would have. */
  advanceQuietDecode(seq: KvSequence, computedTokens: number): void;
  /** Frees every block of the sequence, tail first (finish or preemption); forgets it. */
  free(seq: KvSequence): void;
  /**
   * Source completion (docs/rules/grouped-pd.md §3): frees window blocks below the window and every
   * block of a Mamba-type group except the running one; hashed blocks stay cached. Returns pages freed.
   */
  releaseSourceSkipped(seq: KvSequence, computedTokens: number): number;
  /**
   * Destination reservation (docs/rules/grouped-pd.md §4) for `transferredTokens`: the local hit is
   * reused; window groups get in-window blocks, state groups one block. Undefined if it does not fit.
   */
  reserveDestination(seq: KvSequence, transferredTokens: number): DestinationReservation | undefined;
  /** The reserved blocks become the sequence's, computed and cache-visible up to `transferredTokens`. */
  activateDestination(seq: KvSequence, transferredTokens: number): void;
  /** Real (non-null) blocks the sequence holds, per group, in group order. */
  heldBlocks(seq: KvSequence): readonly number[];
  /** How prefill chunks must be cut so Mamba-type states land on block boundaries (see PrefillChunking). */
  readonly prefillChunking: PrefillChunking;
  /** Events collected since the last call (empty unless collectEvents). */
  takeEvents(): KvEvent[];
  metrics(): PoolMetrics;
  /** Per cache group (index order), live counters, O(1): read them, do not keep or write them. */
  groupPages(): GroupPages;
}

/** Per cache group: pages its block tables reference, and free pages still caching its keys (evictable). */
export interface GroupPages {
  readonly used: ArrayLike<number>;
  readonly cached: ArrayLike<number>;
}
