import type { CacheGroup } from "@kvsim/profile-schema";
import { cdiv } from "@kvsim/profile-schema";
import { NULL_BLOCK, type PoolOps } from "./block-pool.js";
import type { BlockHashView } from "./hashing.js";
import type { GroupState } from "./sequence.js";
import { AttentionManager } from "./attention-manager.js";
import { lookup, nullBlocks } from "./single-type-manager.js";

/**
 * Sliding window and convolution (window W): S(C) = max(0, C - W + 1); blocks wholly below the
 * window are nulled and freed; a hit needs the cdiv(W - 1, B) blocks before its end.
 */
export class WindowManager extends AttentionManager {
  readonly kind = "window";
  private readonly window: number;

  constructor(pool: PoolOps, groupIndex: number, group: CacheGroup, caches: boolean) {
    super(pool, groupIndex, group, caches);
    if (group.window_tokens === undefined) throw new RangeError(`group ${group.name} (${group.kind}) needs window_tokens`);
    this.window = group.window_tokens;
  }

  skippedTokens(computed: number): number {
    return Math.max(0, computed - this.window + 1);
  }

  /**
   * The walk at computed c looks at entry min(floor(S(c) / B), len) - 1 (S the skipped tokens):
   * quiet while that entry stays the same null (or none). Bounded by the next time it moves.
   */
  protected override quietSkipSteps(state: GroupState, computed: number): number {
    const b = this.blockSize;
    const s = computed - this.window + 1;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-137
    const idx = s > 0 ? Math.min(Math.floor(s / b), state.numBlocks) - 1 : -1;
    if (idx >= 0 && state.blocks[idx] !== NULL_BLOCK) return 0;
    // S reaches the next multiple of B after k = next - s steps; the walk may then see a block.
    const next = (Math.floor(Math.max(s, 0) / b) + 1) * b;
    return next - s;
  }

  findLongestCacheHit(hashes: BlockHashView, maxLength: number, alignment: number, groups: readonly number[]): number[][] {
    const b = this.blockSize;
    const need = cdiv(this.window - 1, b);
    const max = Math.min(Math.floor(maxLength / b), hashes.length);
    // Pushed, not mapped: packed like every other search's lists (see emptyLists).
    const out: number[][] = [];
    while (out.length < groups.length) out.push(nullBlocks(max));
    let run = 0;
    let found = false;
    for (let i = max - 1; i >= 0; i--) {
      const hit = lookup(this.pool, groups, hashes, i);
      if (hit === undefined) {
        run = 0;
        continue;
      }
      // The rightmost block of a run must end on an alignment boundary.
      if (run === 0 && ((i + 1) * b) % alignment !== 0) continue;
      hit.forEach((blk, k) => (out[k]![i] = blk));
      run++;
      if (run >= need) {
        for (const l of out) l.length = i + run;
        found = true;
        break;
      }
    }
    if (!found) {
      // Only a run reaching block 0 is a hit, cut to the alignment.
      for (const l of out) l.length = run;
      // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-138
      while (out[0]!.length > 0 && (out[0]!.length * b) % alignment !== 0) for (const l of out) l.pop();
    }
    return out;
  }
}
