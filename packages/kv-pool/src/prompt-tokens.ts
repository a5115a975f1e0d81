import type { BlockHash, PromptHashes, PromptTokens } from "./contract.js";
import { HashChain } from "./hashing.js";

const EMPTY = new Uint32Array(0);

/** A prompt's memoised chains, one per block size, without its tokens. */
class PromptHashesImpl implements PromptHashes {
  readonly kind = "prompt-hashes";
  readonly chains = new Map<number, HashChain>();
}

/** Where a prompt's leading hashes may come from instead of being computed. */
type Source =
  | { readonly kind: "shared"; readonly hashes: PromptHashesImpl; readonly tokens: number }
  | { readonly kind: "prefix"; readonly of: PromptTokensImpl };

/** A prompt with its chained block hashes memoised per block size (shared by every rank). */
export class PromptTokensImpl implements PromptTokens {
  readonly hashes = new PromptHashesImpl();
  private bigints: Map<number, readonly BlockHash[]> | undefined;

  constructor(
    readonly tokens: Uint32Array,
    private readonly source?: Source,
  ) {}

  /** Block and tokens hashes of every full block at `blockSize`, computed on first use. */
  chain(blockSize: number): HashChain {
    let c = this.hashes.chains.get(blockSize);
    if (c === undefined) {
      if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
      const t = this.tokens;
      const n = Math.floor(t.length / blockSize);
      c = new HashChain(n);
      const src = this.source;
      if (src?.kind === "prefix") {
        // A prefix of a prompt: its blocks are the first n of the whole prompt's (computed if needed).
        c.copyPrefix(src.of.chain(blockSize), n);
      } else if (src !== undefined) {
        // Blocks inside the shared tokens equal the other prompt's, when that one has hashed them.
        const other = src.hashes.chains.get(blockSize);
        if (other !== undefined) c.copyPrefix(other, Math.min(Math.floor(src.tokens / blockSize), other.length, n));
      }
      c.extend({ head: t, headLength: t.length, tail: EMPTY }, blockSize, n, null, 0);
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
 * A prompt's memoised block hashes without its tokens: holding it keeps the hashes (4 words per
 * block), not the prompt, alive. For `createPromptTokens(tokens, { hashes, tokens })`.
 */
export function promptHashes(prompt: PromptTokens): PromptHashes {
  return asPromptImpl(prompt).hashes;
}

/** The prompt's first `numTokens` tokens as a prompt whose hashes come from the whole prompt's. */
export function promptPrefix(prompt: PromptTokens, numTokens: number): PromptTokens {
  if (!Number.isSafeInteger(numTokens) || numTokens < 0 || numTokens > prompt.tokens.length) {
    throw new RangeError(`numTokens must be an integer in 0..${prompt.tokens.length}, got ${numTokens}`);
  }
  return new PromptTokensImpl(prompt.tokens.subarray(0, numTokens), { kind: "prefix", of: asPromptImpl(prompt) });
}

/** Our implementation of a prompt, wrapping a foreign `PromptTokens` if needed. */
export function asPromptImpl(prompt: PromptTokens): PromptTokensImpl {
  return prompt instanceof PromptTokensImpl ? prompt : new PromptTokensImpl(prompt.tokens);
}
