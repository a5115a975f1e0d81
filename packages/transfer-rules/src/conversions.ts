import { blocks, cdiv, tokens, type Blocks, type Tokens } from "@kvsim/profile-schema";

/**
 * Explicit conversions between block and token counts. The branded types refuse a block count
 * where a token count is expected; these are the only sanctioned ways across.
 */

/** Tokens held by `count` whole blocks of `blockSizeTokens` tokens. */
export function blocksToTokens(count: Blocks, blockSizeTokens: Tokens): Tokens {
  return tokens(count * blockSizeTokens);
}

/** Blocks that cover `count` tokens, a partly filled last block included: cdiv(count, B). */
export function tokensToBlocksCeil(count: Tokens, blockSizeTokens: Tokens): Blocks {
  return blocks(cdiv(count, blockSizeTokens));
}

/** Whole blocks inside `count` tokens (a partial block does not count): floor(count / B). */
export function tokensToBlocksFloor(count: Tokens, blockSizeTokens: Tokens): Blocks {
  if (blockSizeTokens <= 0) throw new RangeError(`block size must be positive, got ${blockSizeTokens}`);
  return blocks(Math.floor(count / blockSizeTokens));
}
