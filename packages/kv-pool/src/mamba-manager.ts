import type { CacheGroup } from "@kvsim/profile-schema";
import { cdiv } from "@kvsim/profile-schema";
import { NULL_BLOCK, type PoolOps } from "./block-pool.js";
import { tellCached } from "./attention-manager.js";
import { blockHashHi, blockHashLo, type BlockHashView } from "./hashing.js";
import { NO_CHECKPOINTS, type GroupState } from "./sequence.js";
import { pushBlock, reserveBlocks } from "./block-table.js";
import { emptyLists, FRESH, lookup, NONE, nullBlocks, reversedReal, type Checkpoints, type SingleTypeManager } from "./single-type-manager.js";

/** Caches one block that holds the state at the end of table block `index`. */
function cacheOne(pool: PoolOps, groupIndex: number, block: number, index: number, hashes: BlockHashView): void {
  // A duplicate copy (cacheBlockKey false) emits nothing, events on or off (manager-caching-and-hits.test.ts).
  const hi = blockHashHi(hashes, index);
  const lo = blockHashLo(hashes, index);
  const first = pool.cacheBlockKey(block, groupIndex, hi, lo, NULL_BLOCK);
  if (pool.listener !== undefined) tellCached(pool.listener, groupIndex, hi, lo, index);
  if (first && pool.collectsEvents) {
    pool.emitStored(groupIndex, index === 0 ? null : hashes.blockHash(index - 1), [
      { blockHash: hashes.blockHash(index), tokensHash: hashes.tokensHash(index) },
    ]);
  }
}

/**
 * Mamba-type state in vLLM's "align" mode: the table has cdiv(T, B) entries, null except the
 * running state block (last) and, until passed, the previous one. A state that ends exactly on a
 * block boundary is cached under that block's hash (a checkpoint). On vLLM 0.32.0 a group with
 * `prefill_checkpoint_blocks` = k takes k extra blocks in the chunk that reaches the end of the
 * prompt, holding the states at the last k boundaries inside the chunk.
 */
export class MambaManager implements SingleTypeManager, Checkpoints {
  readonly kind = "mamba";
  readonly caches = true;
  readonly takesLookahead = false;
  readonly checkpoints: Checkpoints = this;
  readonly blockSize: number;
  readonly hitTypeKey: string;

  constructor(
    private readonly pool: PoolOps,
    readonly groupIndex: number,
    group: CacheGroup,
    /** Checkpoint blocks per prompt-ending chunk (0 unless vLLM 0.32.0). */
    readonly checkpointBlocks: number,
  ) {
    this.blockSize = group.block_size_tokens;
    this.hitTypeKey = `mamba/${group.block_size_tokens}`;
  }

  skippedTokens(computed: number): number {
    return Math.max(0, computed - 1);
  }

  findLongestCacheHit(hashes: BlockHashView, maxLength: number, alignment: number, groups: readonly number[]): number[][] {
    const b = this.blockSize;
    for (let i = Math.min(Math.floor(maxLength / b), hashes.length) - 1; i >= 0; i--) {
      if (((i + 1) * b) % alignment !== 0) continue;
      const hit = lookup(this.pool, groups, hashes, i);
      if (hit === undefined) continue;
      // Pushed, not mapped: packed like every other search's lists (see emptyLists).
      const out: number[][] = [];
      for (const blk of hit) {
        const l = nullBlocks(i + 1);
        l[i] = blk;
        out.push(l);
      }
      return out;
    }
    return emptyLists(groups.length);
  }

  numBlocksToAllocate(state: GroupState, tracked: boolean, numTokens: number, hitBlocks: readonly number[]): number {
    const required = cdiv(numTokens, this.blockSize);
    if (tracked) return required > state.numBlocks ? 1 : 0;
    let evictable = 0;
    for (const blk of hitBlocks) if (this.pool.isEvictable(blk)) evictable++;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-139
    return (required > hitBlocks.length ? 1 : 0) + evictable;
  }

  allocateNewComputedBlocks(state: GroupState, hitBlocks: readonly number[]): void {
    reserveBlocks(state, hitBlocks.length);
    for (const blk of hitBlocks) {
      pushBlock(state, blk);
      if (blk !== NULL_BLOCK) state.real++;
    }
    this.pool.touchTable(state);
    state.numCached = state.numBlocks;
  }

  allocateNewBlocks(state: GroupState, numTokens: number): void {
    const required = cdiv(numTokens, this.blockSize);
    const len = state.numBlocks;
    if (required <= len) return;
    // The running block (or a hit's state block) becomes the previous state: the new running
    // block starts from it, so it is kept until the computed prefix has passed it. An empty table
    // has none (-1). The last entry of a table is never null (a running, hit or reserved state
    // block), and a null one would be safe: the release (collect) skips a null previous state.
    state.prevStateIdx = len - 1;
    reserveBlocks(state, required - len);
    for (let i = len; i < required - 1; i++) pushBlock(state, NULL_BLOCK);
    this.pool.takeFreeInto(1, state, this.groupIndex);
    state.real++;
  }

  /** How many checkpoint blocks a chunk [computed, numTokens) takes: `checkpointPlan(...).length`, without the list. */
  checkpointCount(computed: number, numTokens: number, numPromptTokens: number): number {
    return computed >= numPromptTokens || numTokens < numPromptTokens ? 0 : this.checkpointBlocks;
  }

  /**
   * Checkpoint boundaries for a chunk [computed, numTokens): the last k block boundaries strictly
   * inside it (the state at its end lives in the running block). Returns, latest first, the block
   * index each checkpoint caches, or -1 where the boundary is not inside the chunk.
   */
  checkpointPlan(computed: number, numTokens: number, numPromptTokens: number): number[] {
    // Without checkpoint blocks (k = 0) the loop below returns [] as well.
    if (computed >= numPromptTokens || numTokens < numPromptTokens) return [];
    const top = cdiv(numTokens, this.blockSize) - 1;
    const out: number[] = [];
    for (let j = 0; j < this.checkpointBlocks; j++) {
      const m = top - j;
      // m x B > C >= 0 implies m > 0: the boundary is a block's end, block m - 1.
      out.push(m * this.blockSize > computed ? m - 1 : -1);
    }
    return out;
  }

  private collect(state: GroupState, computed: number, apply: boolean): number[] {
    const p = state.prevStateIdx;
    const passed = p >= 0 && p < cdiv(computed, this.blockSize) - 1 && state.blocks[p] !== NULL_BLOCK;
    // Stryker disable next-line ConditionalExpression: KP-140
    if (!passed && state.checkpoints.length === 0) return NONE;
    const out: number[] = [];
    if (passed) {
      out.push(state.blocks[p]!);
      if (apply) {
        state.blocks[p] = NULL_BLOCK;
        state.real--;
        state.prevStateIdx = -1;
      }
    }
    for (const c of state.checkpoints) out.push(c);
    if (apply) {
      state.checkpoints = NO_CHECKPOINTS;
      state.checkpointHashIdx = NO_CHECKPOINTS;
    }
    return out;
  }

  /** The passed previous state block and the last chunk's checkpoint blocks. */
  skippedBlocks(state: GroupState, computed: number): number[] {
    return this.collect(state, computed, false);
  }

  releasableSkipped(state: GroupState, computed: number): number {
    const p = state.prevStateIdx;
    let n = 0;
    // The blocks of collect, counted instead of listed.
    if (p >= 0 && p < cdiv(computed, this.blockSize) - 1 && state.blocks[p] !== NULL_BLOCK && this.pool.refCount(state.blocks[p]!) === 1) n++;
    for (const c of state.checkpoints) if (this.pool.refCount(c) === 1) n++;
    return n;
  }

  removeSkippedBlocks(state: GroupState, computed: number): number[] {
    return this.collect(state, computed, true);
  }

  cacheBlocks(state: GroupState, hashes: BlockHashView, computed: number): void {
    const b = this.blockSize;
    // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator: KP-141
    if (computed > 0 && computed % b === 0) {
      const i = computed / b - 1;
      // Entries past numBlocks are capacity, not table entries.
      const blk = i < state.numBlocks ? state.blocks[i] : undefined;
      if (blk !== undefined && blk !== NULL_BLOCK && !this.pool.isHashed(blk) && i < hashes.length) cacheOne(this.pool, this.groupIndex, blk, i, hashes);
    }
    // A plain loop: a callback here would allocate its closure on every commit of every step.
    const checkpoints = state.checkpoints;
    for (let j = 0; j < checkpoints.length; j++) {
      const blk = checkpoints[j]!;
      const i = state.checkpointHashIdx[j]!;
      if (i >= 0 && (i + 1) * b <= computed && !this.pool.isHashed(blk) && i < hashes.length) cacheOne(this.pool, this.groupIndex, blk, i, hashes);
    }
  }

  /** Keeps only the running block (the last table entry); checkpoints go too. */
  releaseForSource(state: GroupState): number[] {
    const out: number[] = [];
    for (let i = state.numBlocks - 2; i >= 0; i--) {
      const blk = state.blocks[i]!;
      if (blk === NULL_BLOCK) continue;
      out.push(blk);
      state.blocks[i] = NULL_BLOCK;
      state.real--;
    }
    state.prevStateIdx = -1;
    out.push(...state.checkpoints);
    state.checkpoints = NO_CHECKPOINTS;
    state.checkpointHashIdx = NO_CHECKPOINTS;
    return out;
  }

  /** Table tail first, then the checkpoint blocks (latest boundary first). */
  freeOrder(state: GroupState): number[] {
    const out = reversedReal(state);
    out.push(...state.checkpoints);
    return out;
  }

  freeAll(state: GroupState): number {
    return this.pool.freeTableTailFirst(state, state.checkpoints);
  }

  quietDecodeSteps(state: GroupState, computed: number): number {
    if (state.checkpoints.length > 0) return 0;
    const b = this.blockSize;
    // A new running block when cdiv(computed + k + 1, B) > len.
    let quiet = state.numBlocks * b - computed;
    // cacheBlocks looks at the running block when computed + k + 1 is a multiple of B.
    quiet = Math.min(quiet, (b - ((computed + 1) % b)) % b);
    const p = state.prevStateIdx;
    // The previous state block is released once cdiv(computed + k, B) - 1 > p. After a commit
    // computed > (p + 1) x B and the bound is <= 0; asked between a step's allocation and its commit
    // it can be 1 (manager-caching-and-hits.test.ts).
    // Stryker disable next-line ConditionalExpression: KP-142
    if (p >= 0 && state.blocks[p] !== NULL_BLOCK) quiet = Math.min(quiet, (p + 1) * b - computed + 1);
    return Math.max(0, quiet);
  }

  /** cdiv(T, B) entries, the last one a fresh block for the transferred state. */
  planReservation(tokens: number): number[] {
    const plan = nullBlocks(cdiv(tokens, this.blockSize));
    plan[plan.length - 1] = FRESH;
    return plan;
  }
}
