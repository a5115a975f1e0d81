import { cdiv } from "@kvsim/profile-schema";
import { BlockPool, NULL_BLOCK, type PoolOps } from "./block-pool.js";
import type {
  BlockKeyView,
  AllocateRequest,
  DestinationReservation,
  KvCacheManagerApi,
  KvEvent,
  KvPoolOptions,
  KvSequence,
  OutputTokenIds,
  PoolMetrics,
  GroupPages,
  PrefillChunking,
  PrefixHit,
  PromptTokens,
} from "./contract.js";
import { emptyLists, FRESH, type SingleTypeManager } from "./single-type-manager.js";
import { checkCount, hitAlignment, hitTypes, managerFor, type HitType } from "./group-managers.js";
import { asPromptImpl, type PromptBase } from "./prompt-tokens.js";
import type { BlockHashView } from "./hashing.js";
import { Sequence } from "./sequence.js";
import { rangeFailure } from "./errors.js";
import { pushBlock, reserveBlocks } from "./block-table.js";

/** A hit found by this manager: its length and, per group, the blocks it reuses. */
class Hit implements PrefixHit {
  constructor(
    readonly tokens: number,
    readonly blocks: readonly (readonly number[])[],
    readonly owner: object,
  ) {}
}

const NO_BLOCKS: readonly number[] = [];

/** Hit blocks whose keys are checked per batch, and the scratch for their int32 halves. */
const VALIDATE_BATCH = 1024;
const validateKeys = new Int32Array(2 * VALIDATE_BATCH);

/**
 * What one step needs, computed before anything changes. One per manager, rewritten by every
 * `plan` (a plan is read at once by its caller, never kept): no object per step.
 */
interface StepPlan {
  hit: Hit | undefined;
  /** Tokens computed before the step, the hit included (vLLM's C). */
  computed: number;
  /** Tokens covered after the step (C + n). */
  total: number;
  /** Slots held beyond `total` by attention groups (speculative decoding; 0 otherwise). */
  lookahead: number;
  /** Pages taken from the free queue, evictable hit blocks included. */
  need: number;
  /** Pages the step's remove-skipped would return to the free queue. */
  releasable: number;
  /** Some Mamba-type group takes 0.32.0 checkpoint blocks in this step (`allocateSlots` lists them). */
  checkpoints: boolean;
}

/** True when a reservation plan holds a hit block (an entry above NULL_BLOCK; FRESH is below it). */
function holdsHitBlock(plan: readonly number[]): boolean {
  for (const b of plan) if (b > NULL_BLOCK) return true;
  return false;
}

/** Internals for tests of this package (not exported from the barrel). */
export const poolOf = (m: KvCacheManager): PoolOps => internals.get(m)!;
const internals = new WeakMap<KvCacheManager, PoolOps>();

/**
 * One rank's KV cache manager: a pool of P pages shared by every cache group, one manager per
 * group kind, prefix hits by vLLM's hybrid fixed point, all-or-nothing allocation.
 */
export class KvCacheManager implements KvCacheManagerApi {
  readonly prefillChunking: PrefillChunking;
  private readonly pool: PoolOps;
  private readonly managers: SingleTypeManager[];
  private readonly types: HitType[];
  private readonly alignment: number;
  private readonly simpleHybrid: boolean;
  private readonly caching: boolean;
  private readonly fullAttentionIndex: number;
  /** A full-attention or window group that never caches makes every hit 0. */
  private readonly hitImpossible: boolean;
  /** The hit of 0 tokens (its lists are empty and never written): shared, not made per lookup. */
  private readonly zeroHit: Hit;
  /** The last `plan` (see StepPlan). */
  private readonly stepPlan: StepPlan = { hit: undefined, computed: 0, total: 0, lookahead: 0, need: 0, releasable: 0, checkpoints: false };

  constructor(options: KvPoolOptions) {
    const { groups, numPages } = options;
    if (groups.length === 0) throw new RangeError("a pool needs at least one cache group");
    checkCount("numPages", numPages, 2);
    this.caching = options.enablePrefixCaching;
    // Full-attention groups cache in runs that hits walk from block 0 (prefix-index.ts).
    // Surviving mutants: KP-88 (MUTANTS.md).
    const linked = groups.map((g) => {
      // Stryker disable next-line ConditionalExpression,EqualityOperator,BooleanLiteral: KP-89
      const cacheable = g.prefix_cacheable !== false;
      return g.kind === "full_attention" && this.caching && cacheable;
    });
    this.pool = this.createPool(numPages, groups.length, options.collectEvents === true, linked);
    this.pool.listener = options.blockListener;
    internals.set(this, this.pool);
    this.managers = groups.map((g, i) => managerFor(this.pool, g, i, this.caching, options.vllmVersion));
    this.types = hitTypes(this.managers);
    this.alignment = hitAlignment(this.types);
    // Stryker disable next-line ConditionalExpression: KP-93
    this.simpleHybrid = this.types.length === 2 && this.types[0]!.fullAttention;
    this.fullAttentionIndex = this.managers.findIndex((m) => m.kind === "full_attention");
    // Surviving mutants: KP-94 (MUTANTS.md).
    // Stryker disable next-line ConditionalExpression,MethodExpression,ArrowFunction: KP-95
    this.hitImpossible = this.managers.some((m) => (m.kind === "full_attention" || m.kind === "window") && !m.caches);
    this.zeroHit = new Hit(0, emptyLists(this.managers.length), this);
    const aligned = this.managers.flatMap((m) => (m.checkpoints === undefined ? [] : [m.checkpoints]));
    this.prefillChunking = aligned.length === 0 ? "any" : aligned.every((c) => c.checkpointBlocks > 0) ? "whole_blocks_before_final" : "align_split";
  }

  /** The pool of pages (tests substitute a straightforward reference to compare results). */
  protected createPool(numPages: number, numGroups: number, collectEvents: boolean, linkedGroups: readonly boolean[]): PoolOps {
    return new BlockPool(numPages, numGroups, collectEvents, linkedGroups);
  }

  createSequence(id: string, prompt: PromptTokens, outputTokenIds?: OutputTokenIds): KvSequence {
    return new Sequence(id, asPromptImpl(prompt), this, this.managers.length, this.pool.collectsEvents, outputTokenIds);
  }

  private own(seq: KvSequence): Sequence {
    if (!(seq instanceof Sequence) || seq.owner !== this) throw new Error(`sequence ${seq.id} was not created by this manager`);
    return seq;
  }

  findPrefixHit(seq: KvSequence): PrefixHit {
    const s = this.own(seq);
    return this.hitFor(s.numTokens - 1, s, undefined);
  }

  lookupKeys(prompt: PromptTokens, blockSize: number): BlockKeyView {
    const p = asPromptImpl(prompt);
    return this.pool.collectsEvents ? p.chain(blockSize) : p.keys(blockSize);
  }

  peekPrefixHitTokens(prompt: PromptTokens): number {
    const p = asPromptImpl(prompt);
    return this.hitFor(p.length - 1, undefined, p).tokens;
  }

  /**
   * The hashes a hit search reads at `blockSize`, at least `maxBlocks` of them when there are: a
   * sequence's own chain, or else a bare prompt's (real hashes when the pool reports KV events,
   * its cheaper lookup keys otherwise). Two arguments rather than a callback: a lookup runs on
   * every step a waiting head is retried, and a closure per lookup was garbage.
   */
  private hitView(s: Sequence | undefined, p: PromptBase | undefined, blockSize: number, maxBlocks: number): BlockHashView {
    if (s !== undefined) return s.chain(blockSize).ensure(maxBlocks);
    return this.pool.collectsEvents ? p!.chain(blockSize) : p!.keys(blockSize);
  }

  /** vLLM's hybrid fixed point (docs/rules/vllm-scheduling.md §4.4) for a hit of at most `maxLength` tokens of sequence `s` (or, without one, prompt `p`). */
  private hitFor(maxLength: number, s: Sequence | undefined, p: PromptBase | undefined): Hit {
    const zero = this.zeroHit;
    // Fast paths: without caching every attention group is non-caching (hitImpossible) and every
    // state group a ring, a non-caching attention group holds no cached block, and maxLength 0 leaves
    // no whole block to search; the search below returns zero in each case.
    // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator: KP-96
    if (!this.caching || this.hitImpossible || maxLength <= 0) return zero;
    if (this.types.length === 0) return zero;
    const lists: number[][][] = [];
    let hitLength = maxLength;
    for (;;) {
      let cur = hitLength;
      for (let k = 0; k < this.types.length; k++) {
        const t = this.types[k]!;
        const b = t.manager.blockSize;
        const prev = lists[k];
        // Surviving mutants: KP-97 (MUTANTS.md).
        if (t.fullAttention && prev !== undefined) {
          // Cut only when longer: assigning an array's length, even its own, is a runtime call.
          const keep = Math.floor(cur / b);
          // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-98
          for (const l of prev) if (l.length > keep) l.length = keep;
        } else {
          // Stryker disable next-line ArithmeticOperator: KP-99
          lists[k] = t.manager.findLongestCacheHit(this.hitView(s, p, b, Math.floor(cur / b)), cur, this.alignment, t.groups);
        }
        cur = lists[k]![0]!.length * b;
      }
      if (cur >= hitLength) break;
      hitLength = cur;
      // Full attention and one other type: a second round would find the same length (the other
      // type's hit ends inside its own search bound). Other mixes run rounds to the fixed point
      // (hit-and-free.test.ts).
      // Stryker disable next-line ConditionalExpression: KP-100
      if (this.simpleHybrid) break;
    }
    // Stryker disable next-line ConditionalExpression: KP-101
    if (hitLength === 0) return zero;
    const blocks = emptyLists(this.managers.length);
    for (let k = 0; k < this.types.length; k++) {
      const t = this.types[k]!;
      const n = hitLength / t.manager.blockSize;
      // The searches' lists are this lookup's own: cut in place rather than copied.
      t.groups.forEach((g, j) => {
        const l = lists[k]![j]!;
        // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-102
        if (l.length > n) l.length = n;
        blocks[g] = l;
      });
    }
    return new Hit(hitLength, blocks, this);
  }

  private hitOf(s: Sequence, hit: PrefixHit | undefined): Hit | undefined {
    if (hit === undefined || hit.tokens === 0) return undefined;
    if (!(hit instanceof Hit) || hit.owner !== this) throw new Error("a prefix hit must come from this manager's findPrefixHit");
    // Surviving mutants: KP-103 (MUTANTS.md).
    if (s.tracked || s.reservedTokens >= 0) throw new Error(`sequence ${s.id} already holds blocks: a hit is taken only at first admission`);
    // The hit's blocks must still hold their keys: nothing may have evicted them since the lookup.
    // (A loop, not forEach: a waiting head with a hit is planned again on every step it waits.)
    for (let g = 0; g < hit.blocks.length; g++) {
      const l = hit.blocks[g]!;
      const chain = s.chain(this.managers[g]!.blockSize);
      // The keys as int32 halves, read in batches (never boxed).
      // Stryker disable next-line EqualityOperator: KP-104
      for (let from = 0; from < l.length; from += VALIDATE_BATCH) {
        const to = Math.min(l.length, from + VALIDATE_BATCH);
        chain.blockKeysInto(from, to, validateKeys);
        for (let i = from; i < to; i++) {
          const b = l[i]!;
          if (b !== NULL_BLOCK && !this.pool.holdsKey(b, g, validateKeys[2 * (i - from)]!, validateKeys[2 * (i - from) + 1]!)) {
            throw new Error("stale prefix hit: a hit block was evicted since findPrefixHit");
          }
        }
      }
    }
    return hit;
  }

  /** The step's plan, computed without changing anything. */
  private plan(s: Sequence, request: AllocateRequest): StepPlan {
    const { computedTokens, newTokens } = request;
    checkCount("computedTokens", computedTokens, 0);
    checkCount("newTokens", newTokens, 1);
    // Stryker disable next-line EqualityOperator: KP-105
    if (s.reservedTokens >= 0) throw new Error(`sequence ${s.id} has a pending destination reservation: activate it first`);
    const hit = this.hitOf(s, request.hit);
    const computed = computedTokens + (hit?.tokens ?? 0);
    const total = computed + newTokens;
    if (total > s.numTokens) throw rangeFailure("sequence {0}: {1} computed + {2} new exceeds its {3} tokens", s.id, computed, newTokens, s.numTokens);
    const lookahead = request.lookaheadTokens ?? 0;
    checkCount("lookaheadTokens", lookahead, 0);
    let need = 0;
    let releasable = 0;
    let checkpoints = false;
    for (let g = 0; g < this.managers.length; g++) {
      const m = this.managers[g]!;
      const st = s.groups[g]!;
      // An untracked sequence holds no block (a reserved one was refused above): nothing to skip.
      releasable += m.releasableSkipped(st, computed);
      need += m.numBlocksToAllocate(st, s.tracked, lookahead === 0 || !m.takesLookahead ? total : total + lookahead, hit?.blocks[g] ?? NO_BLOCKS, computed);
      // Surviving mutants: KP-106 (MUTANTS.md).
      const cps = m.checkpoints;
      if (cps !== undefined) {
        // Only counted here: a plan may be refused or only asked for its pages (a waiting head is
        // planned on every step it waits); allocateSlots lists the blocks once the step fits.
        const k = cps.checkpointCount(computed, total, s.numPromptTokens);
        // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-107
        if (k > 0) {
          need += k;
          checkpoints = true;
        }
      }
    }
    const p = this.stepPlan;
    p.hit = hit;
    p.computed = computed;
    p.total = total;
    p.lookahead = lookahead;
    p.need = need;
    p.releasable = releasable;
    p.checkpoints = checkpoints;
    return p;
  }

  pagesNeeded(seq: KvSequence, request: AllocateRequest): number {
    return this.plan(this.own(seq), request).need;
  }

  allocateSlots(seq: KvSequence, request: AllocateRequest): boolean {
    const s = this.own(seq);
    const p = this.plan(s, request);
    // vLLM frees skipped blocks before its capacity check; so do we, but only when it passes.
    if (p.need > this.pool.numFree + p.releasable) return false;
    const n = this.managers.length;
    for (let g = 0; g < n; g++) {
      const m = this.managers[g]!;
      const st = s.groups[g]!;
      if (s.tracked) this.pool.free(m.removeSkippedBlocks(st, p.computed));
      else m.allocateNewComputedBlocks(st, p.hit?.blocks[g] ?? NO_BLOCKS, p.computed);
    }
    // Hit blocks of every group are touched before any fresh block is taken, so none is evicted.
    for (let g = 0; g < n; g++) {
      const m = this.managers[g]!;
      m.allocateNewBlocks(s.groups[g]!, p.lookahead === 0 || !m.takesLookahead ? p.total : p.total + p.lookahead);
    }
    if (p.checkpoints) {
      for (let g = 0; g < n; g++) {
        const cps = this.managers[g]!.checkpoints;
        if (cps === undefined) continue;
        const cp = cps.checkpointPlan(p.computed, p.total, s.numPromptTokens);
        // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-108
        if (cp.length === 0) continue;
        const st = s.groups[g]!;
        st.checkpoints = this.pool.takeFree(cp.length, g);
        st.checkpointHashIdx = cp;
      }
    }
    s.tracked = true;
    s.allocatedTokens = p.total;
    return true;
  }

  quietDecodeSteps(seq: KvSequence, computedTokens: number): number {
    const s = this.own(seq);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-109
    if (s.reservedTokens >= 0) return 0;
    if (!s.tracked || computedTokens !== s.numTokens - 1 || computedTokens > s.allocatedTokens) return 0;
    let quiet = Number.MAX_SAFE_INTEGER;
    for (let g = 0; g < this.managers.length; g++) {
      // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-110
      if (quiet <= 0) break;
      quiet = Math.min(quiet, this.managers[g]!.quietDecodeSteps(s.groups[g]!, computedTokens));
    }
    return quiet;
  }

  advanceQuietDecode(seq: KvSequence, computedTokens: number): void {
    const s = this.own(seq);
    if (!s.tracked || computedTokens > s.numTokens || computedTokens < s.allocatedTokens) {
      throw rangeFailure(
        "sequence {0}: cannot advance a quiet decode to {1} tokens (allocated {2} of {3})",
        s.id,
        computedTokens,
        s.allocatedTokens,
        s.numTokens,
      );
    }
    s.allocatedTokens = computedTokens;
  }

  commitComputed(seq: KvSequence, computedTokens: number): void {
    const s = this.own(seq);
    checkCount("computedTokens", computedTokens, 0);
    if (computedTokens > s.allocatedTokens) throw rangeFailure("sequence {0}: {1} computed exceeds the {2} allocated", s.id, computedTokens, s.allocatedTokens);
    // Surviving mutants: KP-111 (MUTANTS.md).
    // Stryker disable next-line ConditionalExpression: KP-112
    if (!this.caching) return;
    for (let g = 0; g < this.managers.length; g++) {
      const m = this.managers[g]!;
      // Stryker disable next-line ConditionalExpression: KP-113
      if (!m.caches) continue;
      // Stryker disable next-line ArithmeticOperator: KP-114
      const hashes = s.chain(m.blockSize).ensure(Math.floor(computedTokens / m.blockSize));
      m.cacheBlocks(s.groups[g]!, hashes, computedTokens);
    }
  }

  free(seq: KvSequence): void {
    const s = this.own(seq);
    this.managers.forEach((m, g) => {
      const st = s.groups[g]!;
      m.freeAll(st);
      st.reset();
    });
    s.tracked = false;
    s.allocatedTokens = 0;
    s.reservedTokens = -1;
  }

  releaseSourceSkipped(seq: KvSequence, computedTokens: number): number {
    const s = this.own(seq);
    checkCount("computedTokens", computedTokens, 0);
    let freed = 0;
    this.managers.forEach((m, g) => (freed += this.pool.free(m.releaseForSource(s.groups[g]!, computedTokens))));
    return freed;
  }

  reserveDestination(seq: KvSequence, transferredTokens: number): DestinationReservation | undefined {
    const s = this.own(seq);
    checkCount("transferredTokens", transferredTokens, 1);
    // Stryker disable next-line EqualityOperator: KP-115
    if (s.tracked || s.reservedTokens >= 0) throw new Error(`sequence ${s.id} already holds blocks on this rank`);
    if (transferredTokens > s.numTokens) throw new RangeError(`sequence ${s.id}: ${transferredTokens} transferred exceeds its ${s.numTokens} tokens`);
    const hit = this.hitFor(Math.min(s.numTokens - 1, transferredTokens), s, undefined);
    // Pushed, not mapped: an optimised map builds a holey array, the interpreter a packed one (see emptyLists).
    const plans: number[][] = [];
    for (let g = 0; g < this.managers.length; g++) plans.push(this.managers[g]!.planReservation(transferredTokens, hit.blocks[g]!, hit.tokens));
    let need = 0;
    for (const plan of plans) for (const b of plan) if (b === FRESH || this.pool.isEvictable(b)) need++;
    if (need > this.pool.numFree) return undefined;
    // Only plans holding hit blocks are filtered and touched (most hold none; touching none is a no-op).
    // Surviving mutants: KP-116 (MUTANTS.md).
    // Stryker disable next-line MethodExpression,ConditionalExpression,EqualityOperator: KP-117
    for (const plan of plans) if (holdsHitBlock(plan)) this.pool.touch(plan.filter((b) => b > NULL_BLOCK));
    let reservedPages = 0;
    // Plain loops below: a reservation is made per handoff, for every group.
    for (let g = 0; g < plans.length; g++) {
      const plan = plans[g]!;
      const st = s.groups[g]!;
      const m = this.managers[g]!;
      // The plan becomes the table: its entries up to the FRESH suffix, then the fresh blocks
      // taken in the suffix's place (the table grows once, to the plan's size).
      let kept = plan.length;
      while (kept > 0 && plan[kept - 1] === FRESH) kept--;
      reserveBlocks(st, plan.length);
      let real = 0;
      for (let i = 0; i < kept; i++) {
        const b = plan[i]!;
        if (b === FRESH) throw new Error(`reservation plan invariant: group ${g} has a FRESH entry before a kept one`);
        if (b !== NULL_BLOCK) real++;
        pushBlock(st, b);
      }
      const fresh = plan.length - kept;
      this.pool.takeFreeInto(fresh, st, g);
      st.real = real + fresh;
      // Surviving mutants: KP-118 (MUTANTS.md).
      // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-119
      st.numCached = m.kind === "mamba" || m.kind === "ring" ? 0 : Math.min(hit.tokens / m.blockSize, st.numBlocks);
      reservedPages += st.real;
    }
    s.reservedTokens = transferredTokens;
    const fa = this.managers[this.fullAttentionIndex];
    const missing = fa === undefined ? 0 : cdiv(transferredTokens, fa.blockSize) - hit.tokens / fa.blockSize;
    return { hitTokens: hit.tokens, missingFullAttentionBlocks: missing, reservedPages };
  }

  activateDestination(seq: KvSequence, transferredTokens: number): void {
    const s = this.own(seq);
    if (s.reservedTokens !== transferredTokens) {
      throw new Error(`sequence ${s.id}: no reservation of ${transferredTokens} tokens to activate (reserved: ${s.reservedTokens})`);
    }
    s.reservedTokens = -1;
    s.tracked = true;
    s.allocatedTokens = transferredTokens;
    this.commitComputed(s, transferredTokens);
  }

  heldBlocks(seq: KvSequence): readonly number[] {
    return this.own(seq).heldBlocks();
  }

  takeEvents(): KvEvent[] {
    return this.pool.takeEvents();
  }

  metrics(): PoolMetrics {
    return this.pool.metrics();
  }

  groupPages(): GroupPages {
    return this.pool.groupPages();
  }
}
