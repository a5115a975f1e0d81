import type { BlockHash } from "./contract.js";

// Stryker disable next-line ConditionalExpression: KP-71
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** Scratch for converting between a BigInt hash and its 32-bit halves without allocating. */
const whole = new BigUint64Array(1);
const halves = new Uint32Array(whole.buffer);
const LO = LITTLE_ENDIAN ? 0 : 1;
// Stryker disable next-line ArithmeticOperator: KP-72
const HI = 1 - LO;

/** The high 32 bits of a 64-bit hash. */
export function hashHi(hash: BlockHash): number {
  whole[0] = hash;
  return halves[HI]!;
}

/** The low 32 bits of a 64-bit hash. */
export function hashLo(hash: BlockHash): number {
  whole[0] = hash;
  return halves[LO]!;
}

/** The 64-bit hash hi x 2^32 + lo (hi and lo are u32). */
export function joinHash(hi: number, lo: number): BlockHash {
  halves[HI] = hi;
  halves[LO] = lo;
  return whole[0]!;
}
