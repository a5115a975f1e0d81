import type { CacheGroup } from "@kvsim/profile-schema";
import { cdiv } from "@kvsim/profile-schema";
import { NULL_BLOCK, type PoolOps, type StoredBlock } from "./block-pool.js";
import { blockHashHi, blockHashLo, PackedHashView, type BlockHashView } from "./hashing.js";
import { NO_CHECKPOINTS, type GroupState } from "./sequence.js";
import { pushBlock, reserveBlocks, type BlockTable } from "./block-table.js";

/** The common "nothing to release" answer, shared so a decode step allocates nothing. */
const NONE: number[] = [];

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
const ALWAYS_QUIET = Number.MAX_SAFE_INTEGER;

/** Blocks holding block i's hash of `hashes` in every group of `groups`, or undefined when any misses. */
function lookup(pool: PoolOps, groups: readonly number[], hashes: BlockHashView, i: number): number[] | undefined {
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
function nullBlocks(n: number): number[] {
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
class KeyScratch {
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
    if (pool.cacheBlockKey(b, groupIndex, blockHashHi(hashes, i), blockHashLo(hashes, i), parent) && pool.collectsEvents) {
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

/** Caches one block that holds the state at the end of table block `index`. */
function cacheOne(pool: PoolOps, groupIndex: number, block: number, index: number, hashes: BlockHashView): void {
  // A duplicate copy (cacheBlockKey false) emits nothing, events on or off (manager-caching-and-hits.test.ts).
  if (pool.cacheBlockKey(block, groupIndex, blockHashHi(hashes, index), blockHashLo(hashes, index), NULL_BLOCK) && pool.collectsEvents) {
    pool.emitStored(groupIndex, index === 0 ? null : hashes.blockHash(index - 1), [
      { blockHash: hashes.blockHash(index), tokensHash: hashes.tokensHash(index) },
    ]);
  }
}

function reversedReal(table: BlockTable): number[] {
  const blocks = table.blocks;
  const out: number[] = [];
  for (let i = table.numBlocks - 1; i >= 0; i--) if (blocks[i] !== NULL_BLOCK) out.push(blocks[i]!);
  return out;
}

/** Full attention and window groups: vLLM's generic accounting with a skipped-token function. */
abstract class AttentionManager implements SingleTypeManager {
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
