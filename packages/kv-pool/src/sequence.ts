import type { KvSequence, OutputTokenIds } from "./contract.js";
import { HashChain, PackedHashView, type TokenSource } from "./hashing.js";
import { PathPrompt, type PromptBase } from "./prompt-tokens.js";
import { rangeFailure } from "./errors.js";
import { BySize } from "./by-size.js";
import { EMPTY_TABLE, releaseTable, type BlockTable } from "./block-table.js";

export type { BlockHashView } from "./hashing.js";

/**
 * A sequence's chain at one block size: the prompt's shared chain plus the blocks completed
 * by output tokens, hashed once each, on first need.
 */
export class SequenceChain extends PackedHashView {
  private readonly ext = new HashChain();
  private readonly baseLength: number;
  private readonly parent: { readonly chain: PackedHashView; readonly index: number } | null;
  private source: TokenSource | undefined;

  constructor(
    private readonly seq: Sequence,
    private readonly base: PackedHashView,
    private readonly blockSize: number,
    /** Output blocks get lookup keys (`tokensKeyInto`), not real hashes: see `Sequence.chain`. */
    private readonly lookupKeys: boolean,
  ) {
    super();
    this.baseLength = base.length;
    this.parent = base.length > 0 ? { chain: base, index: base.length - 1 } : null;
  }

  get length(): number {
    return this.baseLength + this.ext.length;
  }

  blockHi(i: number): number {
    const n = this.baseLength;
    return i < n ? this.base.blockHi(i) : this.ext.blockHi(i - n);
  }

  blockLo(i: number): number {
    const n = this.baseLength;
    return i < n ? this.base.blockLo(i) : this.ext.blockLo(i - n);
  }

  override blockKeysInto(from: number, to: number, out: Int32Array): void {
    const n = this.baseLength;
    const mid = Math.min(Math.max(from, n), to);
    if (from < mid) this.base.blockKeysInto(from, mid, out);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-151
    if (mid < to) this.ext.blockKeysInto(mid - n, to - n, mid === from ? out : out.subarray(2 * (mid - from)));
  }

  tokensHi(i: number): number {
    const n = this.baseLength;
    return i < n ? this.base.tokensHi(i) : this.ext.tokensHi(i - n);
  }

  tokensLo(i: number): number {
    const n = this.baseLength;
    return i < n ? this.base.tokensLo(i) : this.ext.tokensLo(i - n);
  }

  /** Hashes blocks up to `numBlocks` (at most the sequence's full blocks). */
  ensure(numBlocks: number): this {
    const n = this.baseLength;
    const target = Math.min(numBlocks, Math.floor(this.seq.numTokens / this.blockSize));
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-152
    if (target > this.length) {
      // The source and parent are the same at every call (its arrays grow in place, or are the
      // shared ones writeTokens fills just below): reused.
      const src = (this.source ??= this.seq.tokenSource(n * this.blockSize));
      this.seq.writeTokens(this.length * this.blockSize, target * this.blockSize, n * this.blockSize);
      this.ext.extend(src, this.blockSize, target - n, this.parent, n, this.lookupKeys);
    }
    return this;
  }
}

/**
 * The empty checkpoint lists every group starts with and returns to: shared (a sequence has one
 * per group), which is safe because checkpoint lists are only ever replaced whole, never written.
 */
export const NO_CHECKPOINTS: number[] = [];

/** The blocks one sequence holds in one cache group. */
export class GroupState implements BlockTable {
  /** The block table (see BlockTable): entries [0, numBlocks), NULL_BLOCK (0) where a block was skipped or never needed. */
  blocks: Int32Array = EMPTY_TABLE;
  numBlocks = 0;
  /** Non-null entries of the table. */
  real = 0;
  /** Table entries below this index were already offered to the cache. */
  numCached = 0;
  /** Mamba-type: table index of the previous state block still held, -1 when none. */
  // Stryker disable next-line UnaryOperator: KP-153
  prevStateIdx = -1;
  /** 0.32.0 checkpoint blocks, latest boundary first, with the block index each one caches (-1: none). */
  checkpoints: number[] = NO_CHECKPOINTS;
  checkpointHashIdx: number[] = NO_CHECKPOINTS;

  reset(): void {
    releaseTable(this);
    this.real = 0;
    this.numCached = 0;
    // Stryker disable next-line UnaryOperator: KP-154
    this.prevStateIdx = -1;
    this.checkpoints = NO_CHECKPOINTS;
    this.checkpointHashIdx = NO_CHECKPOINTS;
  }
}

/**
 * Where the outputs of sequences with `OutputTokenIds` are written just before their blocks are
 * hashed: output k at index k, only over the range being hashed (entries outside it are stale,
 * from other sequences, and never read). One array for every such sequence, written and read in
 * the same synchronous call, so a sequence stores no output ids. It grows to the longest output
 * hashed so far (8 bytes per output) and is kept for the next sequences.
 */
const GENERATED: number[] = [];

/**
 * Where a path prompt's last tokens (those past its last full block, at most a block's worth) are
 * written just before an output block that holds them is hashed: token k at index k - the token
 * source's start. Shared like GENERATED, so a path prompt builds no array of its tail.
 */
const PROMPT_TAIL: number[] = [];

/**
 * Writes `v` at index `i` of a shared array, keeping it packed: entries up to `i` that it lacks
 * are appended first (as 0; the hash that follows never reads them).
 */
function put(a: number[], i: number, v: number): void {
  // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-155
  while (a.length < i) a.push(0);
  // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-156
  if (i < a.length) a[i] = v;
  else a.push(v);
}

/** One request's tokens and per-group block tables on one rank. */
export class Sequence implements KvSequence {
  readonly numPromptTokens: number;
  /** Output token ids appended by `appendToken` (a plain array: on the V8 heap, so a finished request's tokens are ordinary garbage, not a buffer held outside the heap until a full collection); unused with `outputTokenIds`. */
  private readonly out: number[] = [];
  /** Outputs appended, either way. */
  private numOutputs = 0;
  private readonly chains = new BySize<SequenceChain>();
  readonly groups: GroupState[];
  /** Holds blocks and has computed tokens (a running request): vLLM's "request is tracked". */
  tracked = false;
  /** Tokens covered by the last allocation (C + n). */
  allocatedTokens = 0;
  /** Tokens of a pending destination reservation, -1 when none. */
  reservedTokens = -1;

  constructor(
    readonly id: string,
    readonly prompt: PromptBase,
    readonly owner: object,
    numGroups: number,
    /** Blocks are looked up by their real hashes (the pool collects KV events), not by the prompt's cheaper keys. */
    private readonly realHashes: boolean,
    /** Output k's id, for a sequence whose outputs are appended by count. */
    private readonly outputTokenIds?: OutputTokenIds,
  ) {
    this.numPromptTokens = prompt.length;
    // A loop, not Array.from({ length }, f): that takes the generic array-like path (a lookup and a call per element).
    const groups: GroupState[] = [];
    for (let g = 0; g < numGroups; g++) groups.push(new GroupState());
    this.groups = groups;
  }

  get numTokens(): number {
    return this.numPromptTokens + this.numOutputs;
  }

  appendToken(tokenId: number): void {
    if (this.outputTokenIds !== undefined) throw new Error(`sequence ${this.id} takes its outputs from its output token ids: append them with appendOutputs`);
    if (!Number.isInteger(tokenId) || tokenId < 0 || tokenId > 0xffffffff) throw rangeFailure("token id {0} is not a u32", tokenId);
    this.out.push(tokenId);
    this.numOutputs++;
  }

  appendOutputs(count: number): void {
    if (this.outputTokenIds === undefined) throw new Error(`sequence ${this.id} has no output token ids: append its tokens with appendToken`);
    if (!Number.isSafeInteger(count) || count < 0) throw rangeFailure("output count {0} is not a non-negative integer", count);
    this.numOutputs += count;
  }

  /**
   * Its tokens from `start` on (the prompt's part may hold only those). A path prompt's part and
   * outputs from `outputTokenIds` are read from shared arrays that `writeTokens` fills first.
   */
  tokenSource(start: number): TokenSource {
    const tail = this.outputTokenIds === undefined ? this.out : GENERATED;
    if (this.prompt instanceof PathPrompt) return { head: PROMPT_TAIL, headStart: start, headLength: this.numPromptTokens, tail };
    // A token prompt holds its tokens: read in place.
    return { head: this.prompt.tokens, headStart: 0, headLength: this.numPromptTokens, tail };
  }

  /**
   * Writes the tokens among [from, to) that its token source (made from `sourceStart`) reads
   * from shared arrays: a path prompt's tokens and the outputs of `outputTokenIds`, for a hash of
   * those tokens that follows at once.
   */
  writeTokens(from: number, to: number, sourceStart: number): void {
    const p = this.prompt;
    // Stryker disable next-line MethodExpression: KP-157
    const promptEnd = Math.min(to, this.numPromptTokens);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-158
    if (p instanceof PathPrompt && from < promptEnd) {
      // Token k of a path prompt is ids[floor(k / unit)].
      const pathIds = p.ids;
      const unit = p.unit;
      // Stryker disable next-line EqualityOperator: KP-159
      for (let k = from; k < promptEnd; k++) put(PROMPT_TAIL, k - sourceStart, pathIds[Math.floor(k / unit)]!);
    }
    const ids = this.outputTokenIds;
    if (ids === undefined) return;
    const first = Math.max(from - this.numPromptTokens, 0);
    const end = to - this.numPromptTokens;
    for (let k = first; k < end; k++) {
      const id = ids(k);
      // One compare: true exactly for the integers 0 .. 2^32 - 1 (NaN, fractions, negatives and 2^32 up fail).
      if (id >>> 0 !== id) throw rangeFailure("output token id {0} is not a u32", id);
      put(GENERATED, k, id);
    }
  }

  chain(blockSize: number): SequenceChain {
    let c = this.chains.get(blockSize);
    if (c === undefined) {
      // A path prompt's blocks are looked up by path keys, which no token prompt's block shares:
      // its output blocks can only ever match output blocks of an equal path prompt, so they take
      // cheap lookup keys too (equal exactly when the tokens are). A token prompt's output blocks
      // keep real hashes: a later token prompt holding those outputs must find them.
      // Surviving mutants: KP-160 (MUTANTS.md).
      const lookupKeys = !this.realHashes && this.prompt instanceof PathPrompt;
      c = new SequenceChain(this, this.realHashes ? this.prompt.chain(blockSize) : this.prompt.keys(blockSize), blockSize, lookupKeys);
      this.chains.set(blockSize, c);
    }
    return c;
  }

  /** Real blocks held, per group (checkpoint blocks included). */
  heldBlocks(): number[] {
    // Pushed, not mapped: an optimised map builds a holey array, the interpreter a packed one, and
    // the scheduler's sum over the result was deoptimised on meeting the second.
    const out: number[] = [];
    for (const g of this.groups) out.push(g.real + g.checkpoints.length);
    return out;
  }
}
