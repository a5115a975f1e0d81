import { NULL_BLOCK, type PoolOps } from "./block-pool.js";
import { blockHashHi, blockHashLo, type BlockHashView } from "./hashing.js";
import type { GroupState } from "./sequence.js";
import type { BlockTable } from "./block-table.js";

/*
 * What every cache group's manager is (vLLM's single-type managers), and the small helpers they
 * share. One file per kind: attention-manager.ts (full attention and window, with
 * full-attention-manager.ts and window-manager.ts), mamba-manager.ts, single-block-state-manager.ts.
 */

/** The common "nothing to release" answer, shared so a decode step allocates nothing. */
export const NONE: number[] = [];

/** A reservation plan entry: a fresh block to take from the free queue. */
export const FRESH = -1;

/**
 * One cache group's block accounting (the shape of vLLM's single-type managers). Every method
 * works on one sequence's `GroupState`; the caller sequences them so a failed allocation
 * changes nothing.
 */
export interface SingleTypeManager {
  readonly groupIndex: number;
  readonly blockSize: number;
  readonly kind: "full_attention" | "window" | "mamba" | "ring";
  /** True when the group's computed blocks become cache entries (prefix caching on and cacheable). */
  readonly caches: boolean;
  /**
   * Groups with equal keys are searched together (a block hits only if cached in all of them);
   * undefined for a group that never constrains a hit (a non-cacheable state ring).
   */
  readonly hitTypeKey: string | undefined;
  /**
   * Whether a step's lookahead slots (speculative drafts) take blocks in this group: they do in
   * attention groups; a Mamba-type state keeps one state per sequence whatever the lookahead.
   */
  readonly takesLookahead: boolean;
  /** The group's prefill checkpoints (a Mamba-type state in vLLM's align mode), or undefined when it keeps none. */
  readonly checkpoints: Checkpoints | undefined;
  /** Tokens of a computed prefix that no longer need KV (vLLM's get_num_skipped_tokens). */
  skippedTokens(computed: number): number;
  /** Per group of `groups`: the hit blocks (NULL_BLOCK for skipped positions), all of one length. */
  findLongestCacheHit(hashes: BlockHashView, maxLength: number, alignment: number, groups: readonly number[]): number[][];
  /** Pages a step up to `numTokens` takes from the free queue (evictable hit blocks included). */
  numBlocksToAllocate(state: GroupState, tracked: boolean, numTokens: number, hitBlocks: readonly number[], totalComputed: number): number;
  /** First admission: skipped nulls, then the hit blocks after them, touched. */
  allocateNewComputedBlocks(state: GroupState, hitBlocks: readonly number[], totalComputed: number): void;
  /** Takes the blocks up to `numTokens` from the free queue. */
  allocateNewBlocks(state: GroupState, numTokens: number): void;
  /** The blocks `removeSkippedBlocks(state, computed)` would release, in free order (changes nothing). */
  skippedBlocks(state: GroupState, computed: number): number[];
  /**
   * How many of `skippedBlocks(state, computed)` hold their last reference (reference count 1):
   * the pages remove-skipped would give back. Builds no list (a step's plan asks on every step).
   */
  releasableSkipped(state: GroupState, computed: number): number;
  /** vLLM's remove_skipped_blocks: nulls the blocks that no longer matter; returns them in free order. */
  removeSkippedBlocks(state: GroupState, computed: number): number[];
  /** Makes newly computed blocks cache-visible; emits `stored` runs through the pool. */
  cacheBlocks(state: GroupState, hashes: BlockHashView, computed: number): void;
  /** Source completion (docs/rules/grouped-pd.md §3): nulls what the transfer does not need; returns it. */
  releaseForSource(state: GroupState, computed: number): number[];
  /** Every real block, tail first (finish or preemption). */
  freeOrder(state: GroupState): number[];
  /** Frees `freeOrder(state)` without building it; returns how many pages went back to the free queue. */
  freeAll(state: GroupState): number;
  /**
   * A destination's table for `tokens` transferred tokens over a local hit: FRESH, NULL_BLOCK or a
   * hit block, the FRESH entries last (the reservation takes them from the free queue in one go,
   * appended to this very array, which becomes the table). A new, packed array.
   */
  planReservation(tokens: number, hitBlocks: readonly number[], hitTokens: number): number[];
  /**
   * How many single-token steps of a tracked sequence in a row, the first computing token
   * `computed` (computed -> computed + 1), leave this group untouched: its step allocates, frees
   * and caches nothing and changes no field of `state`. A lower bound is fine (0 is always right).
   */
  quietDecodeSteps(state: GroupState, computed: number): number;
}

/**
 * A Mamba-type group in vLLM's align mode keeps, besides the running state, the states at the
 * block boundaries of a prompt's final chunk, so a later prompt sharing the prefix can resume from
 * them. The pool asks each group for these while planning and allocating a step.
 */
export interface Checkpoints {
  /** Checkpoint blocks per prompt-ending chunk (0 unless vLLM 0.32.0 with prefix caching). */
  readonly checkpointBlocks: number;
  /** How many checkpoint blocks the chunk [computed, numTokens) takes: `checkpointPlan(...).length`, without the list. */
  checkpointCount(computed: number, numTokens: number, numPromptTokens: number): number;
  /** For the chunk [computed, numTokens): the block index each checkpoint caches, latest first (-1 where the boundary is not inside the chunk). */
  checkpointPlan(computed: number, numTokens: number, numPromptTokens: number): number[];
}

/** No bound: the group never changes on a single-token step. */
export const ALWAYS_QUIET = Number.MAX_SAFE_INTEGER;

/** Blocks holding block i's hash of `hashes` in every group of `groups`, or undefined when any misses. */
export function lookup(pool: PoolOps, groups: readonly number[], hashes: BlockHashView, i: number): number[] | undefined {
  const hi = blockHashHi(hashes, i) | 0;
  const lo = blockHashLo(hashes, i) | 0;
  const out: number[] = [];
  for (const g of groups) {
    const b = pool.findFirst(g, NULL_BLOCK, hi, lo);
    if (b === NULL_BLOCK) return undefined;
    out.push(b);
  }
  return out;
}

/**
 * n null blocks as a packed array (pushed one by one: `new Array(n).fill(0)` is holey). Block
 * lists and tables of every manager are then of one kind, so the code that reads them stays
 * optimised for that kind instead of going back to the compiler when it meets the other.
 */
export function nullBlocks(n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(NULL_BLOCK);
  return out;
}

/**
 * n empty block lists, pushed into a packed array. Not `groups.map(() => [])`: Array.prototype.map
 * builds a packed array when run by the interpreter but a holey one once its caller is optimised,
 * so the readers of these lists (hitFor, plan, allocateSlots) met two maps and were deoptimised.
 */
export function emptyLists(n: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < n; i++) out.push([]);
  return out;
}

/**
 * A reusable buffer for the int32 halves of block hashes (two per block), grown on demand. Each
 * manager owns its own, so managers of different pools (a sweep's threads, tests side by side)
 * never share one, and a hot loop reads a typed array instead of boxing keys.
 */
export class KeyScratch {
  private keys: Int32Array;

  constructor(blocks: number) {
    // Stryker disable next-line ArithmeticOperator: KP-120
    this.keys = new Int32Array(2 * blocks);
  }

  /** A buffer holding at least `blocks` blocks' halves; what it held before is not kept. */
  forBlocks(blocks: number): Int32Array {
    // Stryker disable next-line EqualityOperator: KP-122
    if (2 * blocks > this.keys.length) {
      // Stryker disable next-line ArithmeticOperator: KP-123
      this.keys = new Int32Array(Math.max(2 * blocks, 2 * this.keys.length));
    }
    return this.keys;
  }
}

/** The real blocks of a table, tail first. */
export function reversedReal(table: BlockTable): number[] {
  const blocks = table.blocks;
  const out: number[] = [];
  for (let i = table.numBlocks - 1; i >= 0; i--) if (blocks[i] !== NULL_BLOCK) out.push(blocks[i]!);
  return out;
}
