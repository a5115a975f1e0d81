import { xxh3PairInto } from "./xxh3-pair.js";

/**
 * One step of a path prompt's key chain, P[j] = XXH3(P[j - 1], id), with a cache of steps shared
 * by every path prompt of the thread. Requests of a trace share prefixes (on the public Mooncake
 * trace 121,877 hash ids, 43,924 distinct), so most steps were already taken by an earlier
 * prompt: the cache answers them with a few loads and compares instead of the hash, which in a
 * process's first replay runs mostly unoptimised (in a first P/D replay's CPU profile the hash,
 * its helper and the prompt's constructor took some 65 ms, against 10 in a second replay).
 *
 * Direct-mapped on the id's low bits; a slot holds the id and the parent key it was computed
 * from, and answers only a step with exactly those inputs, so the keys are the hash's, whatever
 * was cached before. Allocated on the first step: 16,384 slots of 5 words (320 KiB). 65,536
 * slots (1.25 MiB) saved a first P/D replay 25 M instructions more, but with them or 32,768 the
 * aggregated bench under callgrind met one more mark-compact (docs/design/performance.md §9).
 */
const SLOT_BITS = 14;
const SLOTS = 1 << SLOT_BITS;
const MASK = SLOTS - 1;
/** Words per slot: id, parent key high and low halves, key high and low halves. */
const WORDS = 5;

let steps: Uint32Array | undefined;

function allocate(): Uint32Array {
  const s = new Uint32Array(WORDS * SLOTS);
  // An empty slot's id has other low bits than the slot's own (~slot), so no id matches it.
  for (let slot = 0; slot < SLOTS; slot++) s[slot * WORDS] = ~slot >>> 0;
  return s;
}

/**
 * Writes P = XXH3(parent, id) as the 16 bytes [parent LE u64, id LE u64] (see xxh3PairInto) to
 * out[at] (high half) and out[at + 1] (low half). `parentHi`, `parentLo` and `id` are u32.
 */
export function pathKeyStepInto(parentHi: number, parentLo: number, id: number, out: Uint32Array, at: number): void {
  const s = steps ?? (steps = allocate());
  const base = (id & MASK) * WORDS;
  if (s[base] === id && s[base + 1] === parentHi && s[base + 2] === parentLo) {
    out[at] = s[base + 3]!;
    out[at + 1] = s[base + 4]!;
    return;
  }
  // As int32 (the same bits; see xxh3PairInto): no heap number per call for halves above 2^31.
  xxh3PairInto(parentHi | 0, parentLo | 0, 0, id | 0, out, at);
  s[base] = id;
  s[base + 1] = parentHi;
  s[base + 2] = parentLo;
  s[base + 3] = out[at]!;
  s[base + 4] = out[at + 1]!;
}
