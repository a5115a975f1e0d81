import type { CacheGroup } from "@kvsim/profile-schema";
import { cdiv } from "@kvsim/profile-schema";
import { NULL_BLOCK, type PoolOps, type StoredBlock } from "./block-pool.js";
import { blockHashHi, blockHashLo, PackedHashView, type BlockHashView } from "./hashing.js";
import type { BlockListener } from "./contract.js";
import type { GroupState } from "./sequence.js";
import { pushBlock, reserveBlocks } from "./block-table.js";
import { FRESH, KeyScratch, NONE, reversedReal, type SingleTypeManager } from "./single-type-manager.js";

const oneKey = new Int32Array(2);

/** Tells a listener of one cached block. */
export function tellCached(listener: BlockListener, group: number, hi: number, lo: number, index: number): void {
  oneKey[0] = hi;
  oneKey[1] = lo;
  listener.cached(group, oneKey, 1, index);
}

/** Caches table entries [numCached, computed / B): consecutive new keys form one `stored` run. */
function cacheFullBlocks(
  pool: PoolOps,
  scratch: KeyScratch,
  groupIndex: number,
  blockSize: number,
  state: GroupState,
  hashes: BlockHashView,
  computed: number,
): void {
  const numFull = Math.min(Math.floor(computed / blockSize), state.numBlocks);
  // vLLM's num_cached_blocks >= num_full_blocks: a commit of fewer full blocks than cached keeps
  // numCached (manager-caching-and-hits.test.ts).
  // Stryker disable next-line EqualityOperator: KP-124
  if (numFull <= state.numCached) return;
  // Stryker disable next-line BlockStatement: KP-125
  if (!pool.collectsEvents && hashes instanceof PackedHashView) {
    // No events to build: the same cache calls in the same order, in one loop inside the pool.
    // Stryker disable next-line ArithmeticOperator: KP-126
    const keys = scratch.forBlocks(numFull - state.numCached);
    hashes.blockKeysInto(state.numCached, numFull, keys);
    pool.cacheTableRun(state, state.numCached, numFull, groupIndex, keys);
    pool.listener?.cached(groupIndex, keys, numFull - state.numCached, state.numCached);
    state.numCached = numFull;
    return;
  }
  let run: StoredBlock[] | undefined;
  let runStart = 0;
  const flush = (): void => {
    if (run !== undefined) pool.emitStored(groupIndex, runStart === 0 ? null : hashes.blockHash(runStart - 1), run);
    run = undefined;
  };
  for (let i = state.numCached; i < numFull; i++) {
    const b = state.blocks[i]!;
    // Surviving mutants: KP-127 (MUTANTS.md).
    if (b === NULL_BLOCK || pool.isHashed(b)) {
      flush();
      continue;
    }
    // A duplicate copy (cacheBlockKey false) stores nothing and ends the run (manager-caching-and-hits.test.ts).
    // Stryker disable next-line ConditionalExpression: KP-128
    const parent = i === 0 ? NULL_BLOCK : state.blocks[i - 1]!;
    const hi = blockHashHi(hashes, i);
    const lo = blockHashLo(hashes, i);
    const first = pool.cacheBlockKey(b, groupIndex, hi, lo, parent);
    if (pool.listener !== undefined) tellCached(pool.listener, groupIndex, hi, lo, i);
    if (first && pool.collectsEvents) {
      if (run === undefined) {
        run = [];
        runStart = i;
      }
      run.push({ blockHash: hashes.blockHash(i), tokensHash: hashes.tokensHash(i) });
    } else {
      flush();
    }
  }
  flush();
  state.numCached = numFull;
}

/** Full attention and window groups: vLLM's generic accounting with a skipped-token function. */
export abstract class AttentionManager implements SingleTypeManager {
  abstract readonly kind: "full_attention" | "window";
  readonly takesLookahead = true;
  readonly checkpoints = undefined;
  readonly blockSize: number;
  readonly hitTypeKey: string;
  /** The hash halves of the blocks one cacheBlocks call caches. */
  private readonly cacheKeys = new KeyScratch(1024);

  constructor(
    protected readonly pool: PoolOps,
    readonly groupIndex: number,
    group: CacheGroup,
    readonly caches: boolean,
  ) {
    this.blockSize = group.block_size_tokens;
    this.hitTypeKey = `${group.kind}/${group.block_size_tokens}/${group.window_tokens ?? 0}/${caches}`;
  }

  abstract skippedTokens(computed: number): number;
  abstract findLongestCacheHit(hashes: BlockHashView, maxLength: number, alignment: number, groups: readonly number[]): number[][];

  numBlocksToAllocate(state: GroupState, tracked: boolean, numTokens: number, hitBlocks: readonly number[], totalComputed: number): number {
    const required = cdiv(numTokens, this.blockSize);
    if (tracked) return Math.max(required - state.numBlocks, 0);
    const skipped = Math.floor(this.skippedTokens(totalComputed) / this.blockSize);
    const fresh = Math.max(required - Math.max(skipped, hitBlocks.length), 0);
    let evictable = 0;
    for (let i = skipped; i < hitBlocks.length; i++) if (this.pool.isEvictable(hitBlocks[i]!)) evictable++;
    return fresh + evictable;
  }

  allocateNewComputedBlocks(state: GroupState, hitBlocks: readonly number[], totalComputed: number): void {
    const skipped = Math.floor(this.skippedTokens(totalComputed) / this.blockSize);
    // The table grows once, to the hit's size.
    reserveBlocks(state, Math.max(skipped, hitBlocks.length));
    for (let i = 0; i < skipped; i++) pushBlock(state, NULL_BLOCK);
    for (let i = skipped; i < hitBlocks.length; i++) {
      const b = hitBlocks[i]!;
      pushBlock(state, b);
      // Stryker disable next-line ConditionalExpression: KP-129
      if (b !== NULL_BLOCK) state.real++;
    }
    this.pool.touchTable(state);
    state.numCached = state.numBlocks;
  }

  allocateNewBlocks(state: GroupState, numTokens: number): void {
    const n = cdiv(numTokens, this.blockSize) - state.numBlocks;
    // A step needing fewer blocks than held (n < 0) takes none (manager-caching-and-hits.test.ts).
    // Stryker disable next-line EqualityOperator: KP-130
    if (n <= 0) return;
    this.pool.takeFreeInto(n, state, this.groupIndex);
    state.real += n;
  }

  private walkSkipped(state: GroupState, computed: number, apply: boolean): number[] {
    const skippedTokens = this.skippedTokens(computed);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-131
    if (skippedTokens <= 0) return NONE;
    let out = NONE;
    for (let i = Math.min(Math.floor(skippedTokens / this.blockSize), state.numBlocks) - 1; i >= 0; i--) {
      const b = state.blocks[i]!;
      if (b === NULL_BLOCK) break;
      if (out === NONE) out = [];
      out.push(b);
      if (apply) state.blocks[i] = NULL_BLOCK;
    }
    if (apply) state.real -= out.length;
    return out;
  }

  skippedBlocks(state: GroupState, computed: number): number[] {
    return this.walkSkipped(state, computed, false);
  }

  releasableSkipped(state: GroupState, computed: number): number {
    const skippedTokens = this.skippedTokens(computed);
    if (skippedTokens <= 0) return 0;
    let n = 0;
    // The walk of walkSkipped, counting instead of listing.
    for (let i = Math.min(Math.floor(skippedTokens / this.blockSize), state.numBlocks) - 1; i >= 0; i--) {
      const b = state.blocks[i]!;
      if (b === NULL_BLOCK) break;
      if (this.pool.refCount(b) === 1) n++;
    }
    return n;
  }

  removeSkippedBlocks(state: GroupState, computed: number): number[] {
    return this.walkSkipped(state, computed, true);
  }

  cacheBlocks(state: GroupState, hashes: BlockHashView, computed: number): void {
    if (this.caches) cacheFullBlocks(this.pool, this.cacheKeys, this.groupIndex, this.blockSize, state, hashes, computed);
  }

  releaseForSource(state: GroupState, computed: number): number[] {
    return this.removeSkippedBlocks(state, computed);
  }

  freeOrder(state: GroupState): number[] {
    return reversedReal(state);
  }

  freeAll(state: GroupState): number {
    return this.pool.freeTableTailFirst(state, NONE);
  }

  quietDecodeSteps(state: GroupState, computed: number): number {
    const b = this.blockSize;
    const len = state.numBlocks;
    // Step k allocates when cdiv(computed + k + 1, B) > len: quiet while computed + k + 1 <= len x B.
    let quiet = len * b - computed;
    // Step k caches (or just moves numCached) once floor((computed + k + 1) / B) passes numCached.
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-132
    if (this.caches && state.numCached < len) quiet = Math.min(quiet, (state.numCached + 1) * b - computed - 1);
    return Math.max(0, Math.min(quiet, this.quietSkipSteps(state, computed)));
  }

  /** Single-token steps before the skipped-token walk could release a block. */
  protected abstract quietSkipSteps(state: GroupState, computed: number): number;

  planReservation(tokens: number, hitBlocks: readonly number[], hitTokens: number): number[] {
    const n = cdiv(tokens, this.blockSize);
    const skipped = Math.floor(this.skippedTokens(tokens) / this.blockSize);
    const hit = hitTokens / this.blockSize;
    const plan: number[] = [];
    for (let i = 0; i < n; i++) {
      if (i < skipped) plan.push(NULL_BLOCK);
      // The hit's list has exactly hit entries, and none at or above `skipped` is null: a window
      // hit of L blocks is null only below L - cdiv(W - 1, B) = floor((L x B - W + 1) / B), which
      // is at most floor((T - W + 1) / B) for T >= L x B; a full-attention hit has no null entry.
      else if (i < hit) plan.push(hitBlocks[i]!);
      else plan.push(FRESH);
    }
    return plan;
  }
}
