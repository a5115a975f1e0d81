/**
 * Sampled token ids. A simulator samples no logits, but output tokens feed the block hashes of
 * output blocks (a resumed or later request can hit them), so they must be deterministic: the id of
 * output token `index` of request `requestId` is
 *
 *   h = FNV-1a 32-bit over the UTF-16 code units of requestId (offset 2166136261, prime 16777619)
 *   x = h XOR (index + 1) * 0x9E3779B1 (mod 2^32)
 *   id = murmur3 fmix32(x)  (x ^= x >>> 16; x *= 0x85EBCA6B; x ^= x >>> 13; x *= 0xC2B2AE35; x ^= x >>> 16)
 *
 * as an unsigned 32-bit integer. The same request id gives the same outputs on every rank.
 */
export function requestIdHash(requestId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < requestId.length; i++) {
    h ^= requestId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The token id from a precomputed `requestIdHash`. */
export function tokenIdFromHash(idHash: number, index: number): number {
  let x = (idHash ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** The id of output token `index` (0-based) of `requestId`. */
export function sampledTokenId(requestId: string, index: number): number {
  return tokenIdFromHash(requestIdHash(requestId), index);
}
