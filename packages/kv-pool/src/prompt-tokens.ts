import type { BlockHash, PromptHashes, PromptTokens } from "./contract.js";
import { HashChain, PackedHashView } from "./hashing.js";
import { pathKeyStepInto } from "./path-key-steps.js";
import { rangeFailure } from "./errors.js";
import { BySize } from "./by-size.js";

const EMPTY = new Uint32Array(0);

/** A prompt's memoised chains, one per block size, without its tokens. */
class PromptHashesImpl implements PromptHashes {
  readonly kind = "prompt-hashes";
  readonly chains = new BySize<HashChain>();
}

/** Where a prompt's leading hashes may come from instead of being computed. */
type Source = { readonly kind: "shared"; readonly hashes: PromptHashesImpl; readonly tokens: number } | { readonly kind: "prefix"; readonly of: PromptBase };

/** What the pool needs of a prompt: its length, its real chains and its lookup keys. */
export abstract class PromptBase implements PromptTokens {
  readonly hashes = new PromptHashesImpl();
  private bigints: Map<number, readonly BlockHash[]> | undefined;

  abstract readonly length: number;
  abstract readonly tokens: Uint32Array;
  protected abstract readonly source: Source | undefined;

  /**
   * The keys the prefix cache looks blocks up by when no KV event needs the real hashes: the real
   * chain for token prompts, cheaper keys for path prompts (equal exactly when the tokens are).
   */
  abstract keys(blockSize: number): PackedHashView;

  /** Real (XXH3, Dynamo's) block and tokens hashes of every full block at `blockSize`, on first use. */
  chain(blockSize: number): HashChain {
    let c = this.hashes.chains.get(blockSize);
    if (c === undefined) {
      if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
      const n = Math.floor(this.length / blockSize);
      c = new HashChain(n);
      const src = this.source;
      if (src?.kind === "prefix") {
        // A prefix of a prompt: its blocks are the first n of the whole prompt's (computed if needed).
        c.copyPrefix(src.of.chain(blockSize), n);
      } else if (src !== undefined) {
        // Blocks inside the shared tokens equal the other prompt's, when that one has hashed them.
        const other = src.hashes.chains.get(blockSize);
        // Surviving mutants: KP-146 (MUTANTS.md).
        if (other !== undefined) c.copyPrefix(other, Math.min(Math.floor(src.tokens / blockSize), other.length, n));
      }
      // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-147
      if (c.length < n) {
        const t = this.tokens;
        c.extend({ head: t, headStart: 0, headLength: t.length, tail: EMPTY }, blockSize, n, null, 0);
      }
      this.hashes.chains.set(blockSize, c);
    }
    return c;
  }

  blockHashes(blockSize: number): readonly BlockHash[] {
    this.bigints ??= new Map();
    let out = this.bigints.get(blockSize);
    if (out === undefined) {
      const c = this.chain(blockSize);
      out = Array.from({ length: c.length }, (_, i) => c.blockHash(i));
      this.bigints.set(blockSize, out);
    }
    return out;
  }

  /** The first `numTokens` tokens as a prompt of the same kind whose hashes come from this one's. */
  abstract prefix(numTokens: number): PromptBase;
}

/** A prompt given by its token ids. */
class PromptTokensImpl extends PromptBase {
  protected readonly source: Source | undefined;

  constructor(
    readonly tokens: Uint32Array,
    source?: Source,
  ) {
    super();
    this.source = source;
  }

  get length(): number {
    return this.tokens.length;
  }

  keys(blockSize: number): PackedHashView {
    return this.chain(blockSize);
  }

  prefix(numTokens: number): PromptBase {
    return new PromptTokensImpl(this.tokens.subarray(0, numTokens), { kind: "prefix", of: this });
  }
}

/** Where a path prompt's key chain starts (any constant: keys only need to be equal for equal paths). */
const PATH_SEED_HI = 0x243f_6a88;
const PATH_SEED_LO = 0x85a3_08d3;

function fmix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85eb_ca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2_ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/**
 * A prompt given as a path of ids, each standing for `unit` equal tokens (a Mooncake trace's
 * hash ids, interned to token values): token k is ids[floor(k / unit)]. No token array exists
 * unless someone asks for `tokens` or for the real hashes (a pool that collects KV events).
 *
 * Its lookup keys: a key per path prefix, P[j] = XXH3(P[j - 1], ids[j]) (64 bits), and for a
 * block ending at token L the key (P[j], L) mixed to 64 bits, j the last id the block touches.
 * Two path prompts with the same unit have equal keys for a block exactly when their tokens up to
 * the block's end are equal (up to 64-bit collisions, as for real hashes), so hits, and every
 * result, are those of the real hashes; only the work is less (no tokens, one mix per block).
 */
export class PathPrompt extends PromptBase {
  protected readonly source: Source | undefined;
  private materialized: Uint32Array | undefined;
  /** P[j] for every id, two words (high, low) each. */
  private readonly pathKeys: Uint32Array;
  private readonly keyViews = new BySize<PathKeyView>();

  constructor(
    /** The token value of each unit of tokens. */
    readonly ids: Uint32Array,
    readonly length: number,
    readonly unit: number,
    pathKeys?: Uint32Array,
    of?: PathPrompt,
  ) {
    super();
    if (!Number.isSafeInteger(unit) || unit < 1) throw new RangeError(`unit must be a positive integer, got ${unit}`);
    if (!Number.isSafeInteger(length) || length < 0 || length > ids.length * unit) {
      throw new RangeError(`length must be an integer in 0..${ids.length * unit} (ids x unit), got ${length}`);
    }
    this.source = of === undefined ? undefined : { kind: "prefix", of };
    if (pathKeys === undefined) {
      pathKeys = new Uint32Array(2 * ids.length);
      let hi = PATH_SEED_HI;
      let lo = PATH_SEED_LO;
      // Stryker disable next-line EqualityOperator: KP-148
      for (let j = 0; j < ids.length; j++) {
        pathKeyStepInto(hi, lo, ids[j]!, pathKeys, 2 * j);
        hi = pathKeys[2 * j]!;
        lo = pathKeys[2 * j + 1]!;
      }
    }
    this.pathKeys = pathKeys;
  }

  /** The tokens, built on first use (nothing on the replay's hot path asks for them). */
  get tokens(): Uint32Array {
    if (this.materialized === undefined) {
      const t = new Uint32Array(this.length);
      // Stryker disable next-line EqualityOperator,ArithmeticOperator: KP-149
      for (let j = 0; j * this.unit < this.length; j++) {
        // Stryker disable next-line MethodExpression: KP-150
        t.fill(this.ids[j]!, j * this.unit, Math.min(this.length, (j + 1) * this.unit));
      }
      this.materialized = t;
    }
    return this.materialized;
  }

  keys(blockSize: number): PackedHashView {
    let v = this.keyViews.get(blockSize);
    if (v === undefined) {
      if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
      v = new PathKeyView(this.pathKeys, blockSize, Math.floor(this.length / blockSize), this.unit);
      this.keyViews.set(blockSize, v);
    }
    return v;
  }

  prefix(numTokens: number): PromptBase {
    const used = Math.ceil(numTokens / this.unit);
    return new PathPrompt(this.ids.subarray(0, used), numTokens, this.unit, this.pathKeys.subarray(0, 2 * used), this);
  }
}

/**
 * Per block size, the two end mixes of block i at [2i] and [2i + 1]: fmix32(end) and
 * fmix32(end ^ 0x9e3779b9), end = (i + 1) x blockSize (int32 bits). Every path prompt's key of
 * block i mixes the same end, so the mixes are computed once per block size for the longest
 * prompt seen, not once per block of every prompt. Grown (replaced) when a longer prompt comes;
 * a view keeps the array it was given, which covers its own blocks.
 */
const endMixes = new Map<number, Int32Array>();

function endMixesFor(blockSize: number, numBlocks: number): Int32Array {
  const have = endMixes.get(blockSize);
  if (have !== undefined && have.length >= 2 * numBlocks) return have;
  // At least twice the blocks the old table covered (its length is two words per block).
  const n = Math.max(numBlocks, have?.length ?? 0, 64);
  const mix = new Int32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const end = (i + 1) * blockSize;
    mix[2 * i] = fmix32(end);
    mix[2 * i + 1] = fmix32(end ^ 0x9e37_79b9);
  }
  endMixes.set(blockSize, mix);
  return mix;
}

/** The lookup keys of a path prompt's blocks, computed when read (the last one is remembered). */
class PathKeyView extends PackedHashView {
  /**
   * The block whose key hi / lo hold; -1 for none. So a read of block -1 before any other returns
   * 0 instead of throwing: no caller asks for a negative block (the managers' walks start at 0, a
   * sequence's parent index is length - 1 only when length > 0), and the view is not exported.
   */
  private last = -1;
  /**
   * Block `last`'s key: [0] the high half, [1] the low. In a typed array, not two fields: a field
   * born 0 (a small integer) changed representation at the first half >= 2^31, which deprecated
   * the views' map and deoptimised the code reading them.
   */
  private readonly key = new Uint32Array(2);
  /** The end mixes of blocks 0 .. length - 1 (see `endMixesFor`). */
  private readonly mix: Int32Array;

  constructor(
    private readonly pathKeys: Uint32Array,
    private readonly blockSize: number,
    readonly length: number,
    private readonly unit: number,
  ) {
    super();
    this.mix = endMixesFor(blockSize, length);
  }

  private compute(i: number): void {
    if (i === this.last) return;
    if (i < 0 || i >= this.length) throw rangeFailure("block {0} outside 0..{1}", i, this.length - 1);
    const j = Math.floor(((i + 1) * this.blockSize - 1) / this.unit);
    this.key[0] = this.pathKeys[2 * j]! ^ this.mix[2 * i]!;
    this.key[1] = this.pathKeys[2 * j + 1]! ^ this.mix[2 * i + 1]!;
    this.last = i;
  }

  blockHi(i: number): number {
    this.compute(i);
    return this.key[0]!;
  }

  blockLo(i: number): number {
    this.compute(i);
    return this.key[1]!;
  }

  /**
   * compute(i) for each block, written straight to `out`: the path key index j = floor((end - 1) /
   * unit) advances with the blocks (no division per block), the end mixes come from the table.
   */
  override blockKeysInto(from: number, to: number, out: Int32Array): void {
    if (from < 0 || to > this.length) throw rangeFailure("blocks {0}..{1} outside 0..{2}", from, to - 1, this.length - 1);
    const keys = this.pathKeys;
    const mix = this.mix;
    const bs = this.blockSize;
    const u = this.unit;
    let end = (from + 1) * bs;
    let j = Math.floor((end - 1) / u);
    // The first token past unit j: block i reads unit j while its end is at most this.
    let unitEnd = (j + 1) * u;
    for (let i = from; i < to; i++, end += bs) {
      while (end > unitEnd) {
        j++;
        unitEnd += u;
      }
      out[2 * (i - from)] = keys[2 * j]! ^ mix[2 * i]!;
      out[2 * (i - from) + 1] = keys[2 * j + 1]! ^ mix[2 * i + 1]!;
    }
  }

  /** Lookup keys have no tokens hash (only KV events need one, and then the real chain is used). */
  tokensHi(): number {
    return 0;
  }

  tokensLo(): number {
    return 0;
  }
}

/**
 * Wraps a prompt's token ids; block hashes are computed once per block size, on first use.
 * With `shared`, the caller states that the first `shared.tokens` tokens equal those of the
 * prompt whose `promptHashes` were given: the hashes of those whole blocks are copied from it
 * (when it has computed them for the block size) instead of recomputed. Equal tokens give equal
 * hashes, so this changes no value, only the work.
 */
export function createPromptTokens(tokens: Uint32Array, shared?: { readonly hashes: PromptHashes; readonly tokens: number }): PromptTokens {
  if (shared === undefined) return new PromptTokensImpl(tokens);
  if (!(shared.hashes instanceof PromptHashesImpl)) throw new TypeError("shared.hashes must come from promptHashes()");
  if (!Number.isSafeInteger(shared.tokens) || shared.tokens < 0 || shared.tokens > tokens.length) {
    throw new RangeError(`shared.tokens must be an integer in 0..${tokens.length}, got ${shared.tokens}`);
  }
  return new PromptTokensImpl(tokens, { kind: "shared", hashes: shared.hashes, tokens: shared.tokens });
}

/**
 * A prompt of `length` tokens given as a path of ids, each repeated for `unit` tokens (the last
 * one may be cut short): token k is ids[floor(k / unit)]. This is how a Mooncake trace's hash ids
 * become a prompt (`unit` = trace_block_size) without building its tokens: a pool that collects
 * no KV events looks its blocks up by path keys, equal exactly when the tokens are; one that does
 * builds the tokens and hashes them for real. Path prompts match each other (same `unit`), not
 * token prompts with equal tokens, unless the pool collects events.
 */
export function createPathPrompt(ids: Uint32Array, length: number, unit: number): PromptTokens {
  // A Uint32Array holds only u32 values: only another array (a JavaScript caller's) is checked.
  const given: ArrayLike<number> = ids;
  if (!(given instanceof Uint32Array)) {
    for (let j = 0; j < given.length; j++) {
      const v = given[j]!;
      if (!Number.isInteger(v) || v < 0 || v > 0xffff_ffff) throw new RangeError(`id ${j} (${v}) is not a u32 token id`);
    }
  }
  return new PathPrompt(ids, length, unit);
}

/**
 * A prompt's memoised block hashes without its tokens: holding it keeps the hashes (4 words per
 * block), not the prompt, alive. For `createPromptTokens(tokens, { hashes, tokens })`.
 */
export function promptHashes(prompt: PromptTokens): PromptHashes {
  return asPromptImpl(prompt).hashes;
}

/** The prompt's first `numTokens` tokens as a prompt whose hashes come from the whole prompt's. */
export function promptPrefix(prompt: PromptTokens, numTokens: number): PromptTokens {
  if (!Number.isSafeInteger(numTokens) || numTokens < 0 || numTokens > prompt.length) {
    throw new RangeError(`numTokens must be an integer in 0..${prompt.length}, got ${numTokens}`);
  }
  return asPromptImpl(prompt).prefix(numTokens);
}

/** Our implementation of a prompt, wrapping a foreign `PromptTokens` if needed. */
export function asPromptImpl(prompt: PromptTokens): PromptBase {
  return prompt instanceof PromptBase ? prompt : new PromptTokensImpl(prompt.tokens);
}
