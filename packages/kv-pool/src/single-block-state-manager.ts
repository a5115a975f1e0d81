import type { CacheGroup } from "@kvsim/profile-schema";
import type { PoolOps } from "./block-pool.js";
import type { BlockHashView } from "./hashing.js";
import type { GroupState } from "./sequence.js";
import { ALWAYS_QUIET, emptyLists, FRESH, NONE, reversedReal, type SingleTypeManager } from "./single-type-manager.js";

/**
 * One block for the request's life, never cached: a non-cacheable state (a ring), and a
 * Mamba-type state with prefix caching off (vLLM's "none" mode). Never constrains a hit.
 */
export class SingleBlockStateManager implements SingleTypeManager {
  readonly kind = "ring";
  readonly takesLookahead = true;
  readonly checkpoints = undefined;
  // Stryker disable next-line BooleanLiteral: KP-143
  readonly caches = false;
  readonly blockSize: number;
  readonly hitTypeKey = undefined;

  constructor(
    private readonly pool: PoolOps,
    readonly groupIndex: number,
    group: CacheGroup,
  ) {
    this.blockSize = group.block_size_tokens;
  }

  skippedTokens(): number {
    return 0;
  }

  findLongestCacheHit(_hashes: BlockHashView, _maxLength: number, _alignment: number, groups: readonly number[]): number[][] {
    return emptyLists(groups.length);
  }

  numBlocksToAllocate(state: GroupState, tracked: boolean): number {
    // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator: KP-144
    return tracked && state.numBlocks > 0 ? 0 : 1;
  }

  allocateNewComputedBlocks(): void {
    // A ring is rebuilt by the computation; a hit reuses none of its blocks.
  }

  allocateNewBlocks(state: GroupState): void {
    if (state.numBlocks > 0) return;
    this.pool.takeFreeInto(1, state, this.groupIndex);
    state.real = 1;
  }

  skippedBlocks(): number[] {
    return NONE;
  }

  releasableSkipped(): number {
    return 0;
  }

  removeSkippedBlocks(): number[] {
    return NONE;
  }

  cacheBlocks(): void {
    // Never cached.
  }

  releaseForSource(): number[] {
    return NONE;
  }

  freeOrder(state: GroupState): number[] {
    return reversedReal(state);
  }

  freeAll(state: GroupState): number {
    return this.pool.freeTableTailFirst(state, NONE);
  }

  planReservation(): number[] {
    return [FRESH];
  }

  quietDecodeSteps(state: GroupState): number {
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-145
    return state.numBlocks > 0 ? ALWAYS_QUIET : 0;
  }
}
