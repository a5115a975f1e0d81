import type { BlockHash, PromptTokens } from "./contract.js";
import { HashChain } from "./hashing.js";

const EMPTY = new Uint32Array(0);

/** A prompt with its chained block hashes memoised per block size (shared by every rank). */
export class PromptTokensImpl implements PromptTokens {
  private readonly chains = new Map<number, HashChain>();
  private readonly bigints = new Map<number, readonly BlockHash[]>();

  constructor(readonly tokens: Uint32Array) {}

  /** Block and tokens hashes of every full block at `blockSize`, computed on first use. */
  chain(blockSize: number): HashChain {
    let c = this.chains.get(blockSize);
    if (c === undefined) {
      if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
      const t = this.tokens;
      const n = Math.floor(t.length / blockSize);
      c = new HashChain(n);
      c.extend({ head: t, headLength: t.length, tail: EMPTY }, blockSize, n, null, 0);
      this.chains.set(blockSize, c);
    }
    return c;
  }

  blockHashes(blockSize: number): readonly BlockHash[] {
    let out = this.bigints.get(blockSize);
    if (out === undefined) {
      const c = this.chain(blockSize);
      out = Array.from({ length: c.length }, (_, i) => c.blockHash(i));
      this.bigints.set(blockSize, out);
    }
    return out;
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
