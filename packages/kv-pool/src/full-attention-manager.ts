import { NULL_BLOCK } from "./block-pool.js";
import { PackedHashView, blockHashHi, blockHashLo, type BlockHashView } from "./hashing.js";
import { AttentionManager } from "./attention-manager.js";
import { ALWAYS_QUIET, KeyScratch } from "./single-type-manager.js";

/** Full attention: every block is kept; a hit is the leading run of cached blocks. */
export class FullAttentionManager extends AttentionManager {
  readonly kind = "full_attention";
  /** The hash halves a hit search reads, in growing batches. */
  private readonly hitKeys = new KeyScratch(4096);

  skippedTokens(): number {
    return 0;
  }

  protected quietSkipSteps(): number {
    return ALWAYS_QUIET;
  }

  /**
   * Per group of a search, the blocks walked so far, written by index over earlier searches' (the
   * arrays only grow). A waiting head with a hit is looked up again on every step it waits:
   * pushing a long hit into fresh lists regrew them block by block each time; the result is now
   * one exact-size copy per group.
   */
  private readonly walked: number[][] = [];

  findLongestCacheHit(hashes: BlockHashView, maxLength: number, alignment: number, groups: readonly number[]): number[][] {
    const walked = this.walked;
    const found: number[] = [];
    while (found.length < groups.length) found.push(NULL_BLOCK);
    while (walked.length < groups.length) walked.push([]);
    let len = 0;
    const max = Math.min(Math.floor(maxLength / this.blockSize), hashes.length);
    const pool = this.pool;
    // A packed view's keys are read in growing batches into a typed array (as int32, never boxed);
    // the batches double, so at most about as many keys are computed as the hit has blocks.
    const packed = hashes instanceof PackedHashView ? hashes : undefined;
    let keys = this.hitKeys.forBlocks(0);
    let keysFrom = 0;
    let keysTo = 0;
    let batch = 32;
    // Walk the leading run: each block is looked up from the previous one's first copy (its run link).
    walk: for (let i = 0; i < max; i++) {
      // As int32 (the pool compares them so).
      let hi: number;
      let lo: number;
      if (packed !== undefined) {
        // Stryker disable next-line ConditionalExpression: KP-133
        if (i === keysTo) {
          keysFrom = i;
          keysTo = Math.min(max, i + batch);
          // Stryker disable next-line ArithmeticOperator: KP-134
          keys = this.hitKeys.forBlocks(keysTo - keysFrom);
          packed.blockKeysInto(keysFrom, keysTo, keys);
          // Stryker disable next-line MethodExpression: KP-135
          batch = Math.min(2 * batch, 4096);
        }
        hi = keys[2 * (i - keysFrom)]!;
        lo = keys[2 * (i - keysFrom) + 1]!;
      } else {
        hi = blockHashHi(hashes, i) | 0;
        lo = blockHashLo(hashes, i) | 0;
      }
      for (let k = 0; k < groups.length; k++) {
        const b = pool.findFirst(groups[k]!, found[k]!, hi, lo);
        if (b === NULL_BLOCK) break walk;
        found[k] = b;
      }
      // Index len is at most each list's length: an overwrite or an append (the lists stay packed).
      for (let k = 0; k < groups.length; k++) walked[k]![len] = found[k]!;
      len++;
    }
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-136
    while (len > 0 && (len * this.blockSize) % alignment !== 0) len--;
    const out: number[][] = [];
    for (let k = 0; k < groups.length; k++) out.push(walked[k]!.slice(0, len));
    return out;
  }
}
