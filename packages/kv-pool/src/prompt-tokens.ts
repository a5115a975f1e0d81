import type { BlockHash, PromptTokens } from "./contract.js";
import { extendChain, type HashChain } from "./hashing.js";

const EMPTY = new Uint32Array(0);

/** A prompt with its chained block hashes memoised per block size (shared by every rank). */
export class PromptTokensImpl implements PromptTokens {
  private readonly chains = new Map<number, HashChain>();

  constructor(readonly tokens: Uint32Array) {}

  /** Block and tokens hashes of every full block at `blockSize`, computed on first use. */
  chain(blockSize: number): HashChain {
    let c = this.chains.get(blockSize);
    if (c === undefined) {
      if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
      c = { blockHashes: [], tokensHashes: [] };
      const t = this.tokens;
      extendChain(c, { head: t, headLength: t.length, tail: EMPTY }, blockSize, Math.floor(t.length / blockSize), null, 0);
      this.chains.set(blockSize, c);
    }
    return c;
  }

  blockHashes(blockSize: number): readonly BlockHash[] {
    return this.chain(blockSize).blockHashes;
  }
}

/** Wraps a prompt's token ids; block hashes are computed once per block size, on first use. */
export function createPromptTokens(tokens: Uint32Array): PromptTokens {
  return new PromptTokensImpl(tokens);
}

/** Our implementation of a prompt, wrapping a foreign `PromptTokens` if needed. */
export function asPromptImpl(prompt: PromptTokens): PromptTokensImpl {
  return prompt instanceof PromptTokensImpl ? prompt : new PromptTokensImpl(prompt.tokens);
}
