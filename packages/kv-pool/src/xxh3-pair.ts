/**
 * XXH3-64 with seed 1337 of exactly 16 bytes, [a as LE u64, b as LE u64], computed on 32-bit
 * halves: the chain step of block hashing (hashing.ts) without a native call or any BigInt.
 *
 * This is the XXH3 specification's path for inputs of 9 to 16 bytes:
 *   bitflip1 = (secret[24..32) XOR secret[32..40)) + seed
 *   bitflip2 = (secret[40..48) XOR secret[48..56)) - seed
 *   lo = a XOR bitflip1, hi = b XOR bitflip2            (a: the first 8 bytes, b: the last 8)
 *   acc = 16 + byteswap64(lo) + hi + fold(lo x hi)      (fold: low 64 bits XOR high 64 bits of the 128-bit product)
 *   avalanche: acc ^= acc >> 37; acc *= 0x165667919E3779F9; acc ^= acc >> 32
 * all modulo 2^64, the secret being XXH3's default one (little-endian u64 words at byte 24-55).
 * Its tests compare it with @node-rs/xxhash's native XXH3 on fixed and random inputs.
 */

const SEED = 1337n;
const MASK64 = (1n << 64n) - 1n;
/** XXH3's default secret, bytes 24-55, as little-endian u64 words. */
const SECRET_24 = 0x1f67b3b7a4a44072n;
const SECRET_32 = 0x78e5c0cc4ee679cbn;
const SECRET_40 = 0x2172ffcc7dd05a82n;
const SECRET_48 = 0x8e2443f7744608b8n;
const BITFLIP1 = ((SECRET_24 ^ SECRET_32) + SEED) & MASK64;
const BITFLIP2 = ((SECRET_40 ^ SECRET_48) - SEED) & MASK64;
const BF1_HI = Number(BITFLIP1 >> 32n);
const BF1_LO = Number(BITFLIP1 & 0xffffffffn);
const BF2_HI = Number(BITFLIP2 >> 32n);
const BF2_LO = Number(BITFLIP2 & 0xffffffffn);
/** The avalanche multiplier 0x165667919E3779F9. */
const PRIME_HI = 0x16566791;
const PRIME_LO = 0x9e3779f9;
const TWO_32 = 0x1_0000_0000;

/** High 32 bits of the 64-bit product of two u32 (16-bit limbs keep every partial sum exact). */
export function mulHigh32(a: number, b: number): number {
  const a0 = a & 0xffff;
  const a1 = a >>> 16;
  const b0 = b & 0xffff;
  const b1 = b >>> 16;
  const low = a0 * b0;
  const mid1 = a1 * b0;
  const mid2 = a0 * b1;
  const carry = ((low >>> 16) + (mid1 & 0xffff) + (mid2 & 0xffff)) >>> 16;
  return (a1 * b1 + (mid1 >>> 16) + (mid2 >>> 16) + carry) >>> 0;
}

function byteSwap32(v: number): number {
  return (((v & 0xff) << 24) | ((v & 0xff00) << 8) | ((v >>> 8) & 0xff00) | (v >>> 24)) >>> 0;
}

/**
 * Writes XXH3-64(seed 1337) of the 16 bytes [a LE u64, b LE u64] to out[at] (high half) and
 * out[at + 1] (low half). a = aHi x 2^32 + aLo, b likewise; every half is a u32, or the int32 of
 * the same 32 bits (each is read only through `^`, which takes the 32 bits either way): hot
 * callers pass `x | 0`, which V8 passes without allocating where a u32 above 2^31 is boxed.
 */
export function xxh3PairInto(aHi: number, aLo: number, bHi: number, bLo: number, out: Uint32Array, at: number): void {
  // input_lo (x) and input_hi (y) of the specification.
  const xHi = (aHi ^ BF1_HI) >>> 0;
  const xLo = (aLo ^ BF1_LO) >>> 0;
  const yHi = (bHi ^ BF2_HI) >>> 0;
  const yLo = (bLo ^ BF2_LO) >>> 0;

  // 128-bit product x * y as four 32-bit words w0 (lowest) .. w3, from four 32 x 32 products.
  const w0 = Math.imul(xLo, yLo) >>> 0;
  const t1 = mulHigh32(xLo, yLo) + (Math.imul(xLo, yHi) >>> 0) + (Math.imul(xHi, yLo) >>> 0);
  const t2 = mulHigh32(xLo, yHi) + mulHigh32(xHi, yLo) + (Math.imul(xHi, yHi) >>> 0) + Math.floor(t1 / TWO_32);
  const w1 = t1 >>> 0;
  const w2 = t2 >>> 0;
  const w3 = (mulHigh32(xHi, yHi) + Math.floor(t2 / TWO_32)) >>> 0;
  const foldHi = (w1 ^ w3) >>> 0;
  const foldLo = (w0 ^ w2) >>> 0;

  // acc = 16 + byteswap64(x) + y + fold: byteswap64 swaps the halves and the bytes in each.
  const sumLo = 16 + byteSwap32(xHi) + yLo + foldLo;
  let hi = (byteSwap32(xLo) + yHi + foldHi + Math.floor(sumLo / TWO_32)) >>> 0;
  let lo = sumLo >>> 0;

  // Avalanche. acc >> 37 is (0, hi >>> 5); the product keeps its low 64 bits.
  lo = (lo ^ (hi >>> 5)) >>> 0;
  const mLo = Math.imul(lo, PRIME_LO) >>> 0;
  hi = (mulHigh32(lo, PRIME_LO) + Math.imul(lo, PRIME_HI) + Math.imul(hi, PRIME_LO)) >>> 0;
  lo = (mLo ^ hi) >>> 0;
  out[at] = hi;
  out[at + 1] = lo;
}
