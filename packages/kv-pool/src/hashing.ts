import { xxh3 } from "@node-rs/xxhash";
import type { BlockHash } from "./contract.js";
import { hashHi, hashLo, joinHash } from "./hash-halves.js";
import { xxh3PairInto } from "./xxh3-pair.js";

/** XXH3-64 seed shared with the Dynamo router (docs/rules/dynamo.md §6.3). */
const SEED = 1337n;

// Stryker disable next-line all: KP-73
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Read access to the chained hashes of a token sequence at one block size. */
export interface BlockHashView {
  /** Full blocks hashed so far. */
  readonly length: number;
  blockHash(i: number): BlockHash;
  tokensHash(i: number): BlockHash;
}

/**
 * A view whose hashes are stored as 32-bit halves: the pool reads them without a BigInt.
 * `blockHash` and `tokensHash` join the halves (events, tests).
 */
export abstract class PackedHashView implements BlockHashView {
  abstract readonly length: number;
  abstract blockHi(i: number): number;
  abstract blockLo(i: number): number;
  abstract tokensHi(i: number): number;
  abstract tokensLo(i: number): number;

  blockHash(i: number): BlockHash {
    return joinHash(this.blockHi(i), this.blockLo(i));
  }

  tokensHash(i: number): BlockHash {
    return joinHash(this.tokensHi(i), this.tokensLo(i));
  }

  /**
   * Writes the block hashes of blocks [from, to) as int32 halves: out[2k] the high and
   * out[2k + 1] the low half of block from + k (the same bits as blockHi / blockLo). Read from a
   * typed array, the halves are never boxed (an int32 outside the 31-bit small-integer range is a
   * heap number whenever it crosses a function boundary). Each view writes them its own way.
   */
  abstract blockKeysInto(from: number, to: number, out: Int32Array): void;
}

/**
 * High half of block i's hash: read directly from a packed view, split from the BigInt otherwise.
 */
export function blockHashHi(view: BlockHashView, i: number): number {
  // Surviving mutants: KP-74 (MUTANTS.md).
  return view instanceof PackedHashView ? view.blockHi(i) : hashHi(view.blockHash(i));
}

/** Low half of block i's hash (see blockHashHi). */
export function blockHashLo(view: BlockHashView, i: number): number {
  return view instanceof PackedHashView ? view.blockLo(i) : hashLo(view.blockHash(i));
}

/**
 * Tokens as a head (the prompt, or its end: `head[0]` is token `headStart`) and a tail (appended
 * outputs, from token `headLength` on), read without concatenating.
 */
export interface TokenSource {
  readonly head: ArrayLike<number>;
  readonly headStart: number;
  readonly headLength: number;
  readonly tail: ArrayLike<number>;
}

/** Words per block in a chain: block hash high, low, tokens hash high, low. */
const WORDS = 4;

/**
 * A growing chain of block hashes at one block size, packed in one Uint32Array (four words per
 * block), so a prompt's chain costs no object per block.
 */
export class HashChain extends PackedHashView {
  private words: Uint32Array;
  private count = 0;

  constructor(capacity = 4) {
    super();
    // Stryker disable next-line MethodExpression,ArithmeticOperator: KP-75
    this.words = new Uint32Array(WORDS * Math.max(capacity, 1));
  }

  get length(): number {
    return this.count;
  }

  blockHi(i: number): number {
    return this.words[WORDS * i]!;
  }

  blockLo(i: number): number {
    return this.words[WORDS * i + 1]!;
  }

  override blockKeysInto(from: number, to: number, out: Int32Array): void {
    const w = this.words;
    for (let i = from; i < to; i++) {
      out[2 * (i - from)] = w[WORDS * i]!;
      out[2 * (i - from) + 1] = w[WORDS * i + 1]!;
    }
  }

  tokensHi(i: number): number {
    return this.words[WORDS * i + 2]!;
  }

  tokensLo(i: number): number {
    return this.words[WORDS * i + 3]!;
  }

  /** Starts an empty chain with the first `numBlocks` blocks of `source` (equal tokens give equal hashes). */
  copyPrefix(source: HashChain, numBlocks: number): void {
    if (this.count !== 0) throw new Error("hash chain invariant: copyPrefix on a non-empty chain");
    if (numBlocks > source.count) throw new RangeError(`copyPrefix of ${numBlocks} blocks from a chain of ${source.count}`);
    // Stryker disable next-line all: KP-76
    if (WORDS * numBlocks > this.words.length) this.words = new Uint32Array(WORDS * numBlocks);
    this.words.set(source.words.subarray(0, WORDS * numBlocks));
    this.count = numBlocks;
  }

  /**
   * Extends the chain to `numBlocks` full blocks of `source` (which must hold that many tokens);
   * block i continues from block i - 1, or from `parent` (another chain's last block, or none)
   * when the chain is empty. `offset` is the absolute block index of the chain's first block.
   * With `lookupKeys`, a block's tokens hash is `tokensKeyInto`'s (no native call): keys for a
   * pool that reports no KV events, equal exactly when the tokens are, like the real ones.
   */
  extend(
    source: TokenSource,
    blockSize: number,
    numBlocks: number,
    parent: { chain: PackedHashView; index: number } | null,
    offset: number,
    lookupKeys = false,
  ): void {
    // Stryker disable next-line EqualityOperator: KP-77
    if (numBlocks <= this.count) return;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-78
    if (WORDS * numBlocks > this.words.length) {
      const grown = new Uint32Array(WORDS * Math.max(numBlocks, 2 * this.count));
      grown.set(this.words.subarray(0, WORDS * this.count));
      this.words = grown;
    }
    const hasher = hasherFor(blockSize);
    const w = this.words;
    let has = this.count > 0 || parent !== null;
    let pHi = 0;
    let pLo = 0;
    if (this.count > 0) {
      pHi = w[WORDS * (this.count - 1)]!;
      pLo = w[WORDS * (this.count - 1) + 1]!;
    } else if (parent !== null) {
      pHi = parent.chain.blockHi(parent.index);
      pLo = parent.chain.blockLo(parent.index);
    }
    // Stryker disable next-line EqualityOperator: KP-79
    for (let i = this.count; i < numBlocks; i++) {
      const at = WORDS * i;
      if (lookupKeys) tokensKeyInto(source, (offset + i) * blockSize, blockSize, w, at + 2);
      else hasher.tokensHash(source, (offset + i) * blockSize, w, at + 2);
      if (has) {
        // Block i hashes [parent LE u64, tokens hash LE u64].
        // Halves passed as int32 (`| 0`, the same bits; see xxh3PairInto): a u32 above 2^31 is a heap number when passed.
        xxh3PairInto(pHi | 0, pLo | 0, w[at + 2]! | 0, w[at + 3]! | 0, w, at);
      } else {
        // Block 0's hash is its tokens hash.
        w[at] = w[at + 2]!;
        w[at + 1] = w[at + 3]!;
        has = true;
      }
      pHi = w[at]!;
      pLo = w[at + 1]!;
    }
    this.count = numBlocks;
  }
}

/** Where `tokensKeyInto`'s fold starts (any constant: keys only need to be equal for equal tokens). */
const TOKENS_KEY_SEED_HI = 0x1319_8a2e;
const TOKENS_KEY_SEED_LO = 0x0370_7344;
/** Marks a run step of `tokensKeyInto` (hex digits 33-48 of pi's fraction, after the seed's). */
const RUN_TAG_HI = 0xa409_3822;
const RUN_TAG_LO = 0x299f_31d0;

/**
 * A 64-bit lookup key for the `blockSize` tokens from `start` of `source`, written to out[at]
 * (high) and out[at + 1] (low): XXH3 of 16 bytes (`xxh3PairInto`) folded over the block from a
 * fixed seed, one step per run of four or more equal tokens, else per four tokens. With the key so
 * far K = (hi, lo), at token j:
 *
 *   * when tokens j .. j + 3 are in the block and equal (v), the run of v from j (L tokens, to the
 *     block's end at most) folds as K = XXH3[(hi ^ RUN_TAG_HI, lo ^ L), (v, RUN_TAG_LO)];
 *   * otherwise tokens (a, b, c, d) from j (0 past the block's end) fold as
 *     K = XXH3[(hi ^ c, lo ^ d), (a, b)], and j moves on by four.
 *
 * How the block splits into steps depends on its tokens only, and for a given K each step's 16
 * bytes determine what it covers (a quad whose tokens read (v, RUN_TAG_LO, RUN_TAG_HI, L) aside,
 * a 2^-64 chance per step for tokens that are not built to hit it): equal tokens give equal keys,
 * and different ones differ but for 64-bit collisions, like the real tokens hash. Every block of a
 * chain has the same size, so padding with 0 makes no two blocks equal. A path prompt's tail, runs
 * of hundreds of equal tokens, then costs a few calls instead of one per two tokens.
 */
export function tokensKeyInto(source: TokenSource, start: number, blockSize: number, out: Uint32Array, at: number): void {
  const { head, tail, headLength, headStart } = source;
  let hi = TOKENS_KEY_SEED_HI | 0;
  let lo = TOKENS_KEY_SEED_LO | 0;
  const end = start + blockSize;
  let k = start;
  while (k < end) {
    const a = k < headLength ? head[k - headStart]! : tail[k - headLength]!;
    let b = 0;
    let c = 0;
    let d = 0;
    if (k + 1 < end) b = k + 1 < headLength ? head[k + 1 - headStart]! : tail[k + 1 - headLength]!;
    if (k + 2 < end) c = k + 2 < headLength ? head[k + 2 - headStart]! : tail[k + 2 - headLength]!;
    if (k + 3 < end) d = k + 3 < headLength ? head[k + 3 - headStart]! : tail[k + 3 - headLength]!;
    if (k + 3 < end && b === a && c === a && d === a) {
      let n = k + 4;
      while (n < end && (n < headLength ? head[n - headStart]! : tail[n - headLength]!) === a) n++;
      // As int32 (see extend): no heap number per call for halves or tokens above 2^31.
      xxh3PairInto(hi ^ RUN_TAG_HI, lo ^ (n - k), a | 0, RUN_TAG_LO | 0, out, at);
      k = n;
    } else {
      xxh3PairInto(hi ^ c, lo ^ d, a | 0, b | 0, out, at);
      k += 4;
    }
    hi = out[at]! | 0;
    lo = out[at + 1]! | 0;
  }
  out[at] = hi;
  out[at + 1] = lo;
}

/**
 * Hashes full blocks of one block size. Owns a scratch buffer (no Buffer per hash) and remembers
 * the tokens hash of the last block it saw, so a run of identical blocks (common in synthetic
 * traces) is hashed once: the copy into the scratch doubles as the comparison.
 */
class BlockHasher {
  private readonly words: Uint32Array;
  private readonly bytes: Uint8Array;
  private hasLast = false;
  private lastHi = 0;
  private lastLo = 0;

  constructor(readonly blockSize: number) {
    this.words = new Uint32Array(blockSize);
    // Stryker disable next-line ArithmeticOperator: KP-80
    this.bytes = LITTLE_ENDIAN ? new Uint8Array(this.words.buffer) : new Uint8Array(blockSize * 4);
  }

  /** Writes the tokens hash of `blockSize` tokens from `start` to out[at] (high), out[at + 1] (low). */
  tokensHash(source: TokenSource, start: number, out: Uint32Array, at: number): void {
    const words = this.words;
    let same = this.hasLast;
    const { head, tail, headLength, headStart } = source;
    // Stryker disable next-line EqualityOperator: KP-81
    for (let j = 0; j < this.blockSize; j++) {
      const k = start + j;
      const v = k < headLength ? head[k - headStart]! : tail[k - headLength]!;
      // Stryker disable next-line ConditionalExpression: KP-82
      if (words[j] !== v) {
        words[j] = v;
        same = false;
      }
    }
    // Stryker disable next-line ConditionalExpression: KP-83
    if (!same) {
      // Stryker disable next-line all: KP-84
      if (!LITTLE_ENDIAN) {
        const view = new DataView(this.bytes.buffer);
        // Stryker disable next-line all: KP-85
        for (let j = 0; j < this.blockSize; j++) view.setUint32(j * 4, words[j]!, true);
      }
      const h = xxh3.xxh64(this.bytes, SEED);
      this.lastHi = hashHi(h);
      this.lastLo = hashLo(h);
      // Stryker disable next-line BooleanLiteral: KP-86
      this.hasLast = true;
    }
    out[at] = this.lastHi;
    out[at + 1] = this.lastLo;
  }
}

const hashers = new Map<number, BlockHasher>();

function hasherFor(blockSize: number): BlockHasher {
  let h = hashers.get(blockSize);
  // Stryker disable next-line ConditionalExpression: KP-87
  if (h === undefined) {
    h = new BlockHasher(blockSize);
    hashers.set(blockSize, h);
  }
  return h;
}

const EMPTY: ArrayLike<number> = new Uint32Array(0);

/**
 * Chained block hashes of the full blocks of `tokens` (a trailing partial block gets none):
 * XXH3-64 with seed 1337 over the little-endian u32 token ids, chained with the parent's hash.
 */
export function computeBlockHashes(tokens: ArrayLike<number>, blockSize: number): { tokensHash: BlockHash; blockHash: BlockHash }[] {
  if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (!Number.isInteger(t) || t < 0 || t > 0xffffffff) throw new RangeError(`token ${i} (${t}) is not a u32 token id`);
  }
  const n = Math.floor(tokens.length / blockSize);
  const chain = new HashChain(n);
  chain.extend({ head: tokens, headStart: 0, headLength: tokens.length, tail: EMPTY }, blockSize, n, null, 0);
  return Array.from({ length: n }, (_, i) => ({ tokensHash: chain.tokensHash(i), blockHash: chain.blockHash(i) }));
}
