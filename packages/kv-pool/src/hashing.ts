import { xxh3 } from "@node-rs/xxhash";
import type { BlockHash } from "./contract.js";

/** XXH3-64 seed shared with the Dynamo router (dynamo-mocker.md section 6.3). */
const SEED = 1337n;

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * Hashes full blocks of one block size. Owns a scratch buffer (no Buffer per hash) and remembers
 * the tokens hash of the last block it saw, so a run of identical blocks (common in synthetic
 * traces) is hashed once: the copy into the scratch doubles as the comparison.
 */
class BlockHasher {
  private readonly words: Uint32Array;
  private readonly bytes: Uint8Array;
  private lastTokensHash: BlockHash | undefined;
  private readonly pair = new Uint8Array(16);
  private readonly pairView = new DataView(this.pair.buffer);

  constructor(readonly blockSize: number) {
    this.words = new Uint32Array(blockSize);
    this.bytes = LITTLE_ENDIAN ? new Uint8Array(this.words.buffer) : new Uint8Array(blockSize * 4);
  }

  /** Tokens hash of `blockSize` tokens read through `tokenAt(start + j)`. */
  tokensHash(source: TokenSource, start: number): BlockHash {
    const words = this.words;
    let same = this.lastTokensHash !== undefined;
    const { head, tail, headLength } = source;
    for (let j = 0; j < this.blockSize; j++) {
      const k = start + j;
      const v = k < headLength ? head[k]! : tail[k - headLength]!;
      if (words[j] !== v) {
        words[j] = v;
        same = false;
      }
    }
    if (same) return this.lastTokensHash!;
    if (!LITTLE_ENDIAN) {
      const view = new DataView(this.bytes.buffer);
      for (let j = 0; j < this.blockSize; j++) view.setUint32(j * 4, words[j]!, true);
    }
    const h = xxh3.xxh64(this.bytes, SEED);
    this.lastTokensHash = h;
    return h;
  }

  /** Sequence hash of a block: its tokens hash for block 0, else XXH3 over [parent LE, tokens LE]. */
  chain(parent: BlockHash | null, tokensHash: BlockHash): BlockHash {
    if (parent === null) return tokensHash;
    this.pairView.setBigUint64(0, parent, true);
    this.pairView.setBigUint64(8, tokensHash, true);
    return xxh3.xxh64(this.pair, SEED);
  }
}

/** Tokens as a head (the prompt) and a tail (appended outputs), read without concatenating. */
export interface TokenSource {
  readonly head: ArrayLike<number>;
  readonly headLength: number;
  readonly tail: ArrayLike<number>;
}

const hashers = new Map<number, BlockHasher>();

function hasherFor(blockSize: number): BlockHasher {
  let h = hashers.get(blockSize);
  if (h === undefined) {
    h = new BlockHasher(blockSize);
    hashers.set(blockSize, h);
  }
  return h;
}

/** A growing chain of block hashes at one block size. */
export interface HashChain {
  readonly blockHashes: BlockHash[];
  readonly tokensHashes: BlockHash[];
}

/**
 * Extends `chain` to `numBlocks` full blocks of `source` (which must hold that many tokens);
 * block i continues from chain block i - 1, or from `parent` when the chain is empty.
 * `offset` is the absolute block index of the chain's first block.
 */
export function extendChain(
  chain: HashChain,
  source: TokenSource,
  blockSize: number,
  numBlocks: number,
  parent: BlockHash | null,
  offset: number,
): void {
  const hasher = hasherFor(blockSize);
  let prev = chain.blockHashes.length > 0 ? chain.blockHashes[chain.blockHashes.length - 1]! : parent;
  for (let i = chain.blockHashes.length; i < numBlocks; i++) {
    const th = hasher.tokensHash(source, (offset + i) * blockSize);
    const bh = hasher.chain(prev, th);
    chain.tokensHashes.push(th);
    chain.blockHashes.push(bh);
    prev = bh;
  }
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
  const chain: HashChain = { blockHashes: [], tokensHashes: [] };
  extendChain(chain, { head: tokens, headLength: tokens.length, tail: EMPTY }, blockSize, Math.floor(tokens.length / blockSize), null, 0);
  return chain.blockHashes.map((blockHash, i) => ({ tokensHash: chain.tokensHashes[i]!, blockHash }));
}
