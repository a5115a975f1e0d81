import { xxh3 } from "@node-rs/xxhash";
import { describe, expect, it } from "vitest";
import { HashChain, computeBlockHashes, tokensKeyInto, type TokenSource } from "./hashing.js";

// Independent oracles, written from the documentation of hashing.ts with the native XXH3:
// * a chained block hash is XXH3-64 (seed 1337) of 16 bytes [parent LE u64, tokens hash LE u64];
// * a lookup key (tokensKeyInto) folds XXH3-64 (seed 1337) from a fixed start, a step per run of
//   four or more equal tokens v (L of them): [key so far XOR (RUN_HI x 2^32 + L) LE u64,
//   v x 2^32 + RUN_LO LE u64]; else a step per four tokens a, b, c, d (0 past the block's end):
//   [key so far XOR (c x 2^32 + d) LE u64, a x 2^32 + b LE u64].
const SEED = 1337n;
/** The fold's fixed start: hex digits 17-32 of pi's fraction (3.243f6a88 85a308d3 13198a2e 03707344...). */
const KEY_START = 0x1319_8a2e_0370_7344n;
/** The run step's tags: the next 16 hex digits of pi's fraction (a4093822 299f31d0). */
const RUN_HI = 0xa409_3822n;
const RUN_LO = 0x299f_31d0n;

/** XXH3-64 (seed 1337) of [a LE u64, b LE u64]. */
const pair = (a: bigint, b: bigint): bigint => {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, a, true);
  view.setBigUint64(8, b, true);
  return xxh3.xxh64(bytes, SEED);
};

/** The lookup key of exactly these tokens (one block), by the documented fold. */
const refKey = (tokens: readonly number[]): bigint => {
  let acc = KEY_START;
  const t = (j: number): bigint => BigInt(tokens[j] ?? 0);
  for (let j = 0; j < tokens.length;) {
    const v = tokens[j]!;
    let n = j;
    while (n < tokens.length && tokens[n] === v) n++;
    if (n - j >= 4) {
      acc = pair(acc ^ ((RUN_HI << 32n) | BigInt(n - j)), (BigInt(v) << 32n) | RUN_LO);
      j = n;
    } else {
      acc = pair(acc ^ ((t(j + 2) << 32n) | t(j + 3)), (t(j) << 32n) | t(j + 1));
      j += 4;
    }
  }
  return acc;
};

const join = (hi: number, lo: number): bigint => (BigInt(hi) << 32n) | BigInt(lo);

/** Tokens 101, 102, ... (all different, so every misplaced read changes a key). */
const seq = (n: number): number[] => Array.from({ length: n }, (_, k) => 101 + k);

/** `tokens` read from token `s` on as a head [s, h) and a tail [h, end): the pool's split of a sequence's tokens. */
const split = (tokens: readonly number[], s: number, h: number): TokenSource => ({
  head: Uint32Array.from(tokens.slice(s, h)),
  headStart: s,
  headLength: h,
  tail: Uint32Array.from(tokens.slice(h)),
});

const keyInto = (source: TokenSource, start: number, blockSize: number): bigint => {
  const out = new Uint32Array(2);
  tokensKeyInto(source, start, blockSize, out, 0);
  return join(out[0]!, out[1]!);
};

describe("tokensKeyInto: the documented fold, read across a head that starts late and a tail", () => {
  it("a block's key is the fold over its own tokens only, odd and even sizes, from any start", () => {
    const t = seq(20);
    const plain: TokenSource = { head: Uint32Array.from(t), headStart: 0, headLength: 20, tail: new Uint32Array(0) };
    for (const bs of [1, 2, 3, 4, 5, 6, 7, 8, 9]) {
      // Blocks at 0 and inside the tokens (tokens follow each block: they must not count).
      for (const start of [0, 5, 10]) expect(keyInto(plain, start, bs)).toBe(refKey(t.slice(start, start + bs)));
    }
    // Hand check of a short end: [7] folds one step (7, 0, 0, 0), as [7, 0] and [7, 0, 0, 0] do: equal keys.
    expect(refKey([7])).toBe(refKey([7, 0]));
    expect(refKey([7])).toBe(refKey([7, 0, 0, 0]));
    // Tokens 3 and 4 of a step are folded into the key so far: swapping them with tokens 1 and 2 changes it.
    expect(refKey([1, 2, 3, 4])).not.toBe(refKey([3, 4, 1, 2]));
    const one = { head: Uint32Array.from([7, 9]), headStart: 0, headLength: 2, tail: new Uint32Array(0) };
    expect(keyInto(one, 0, 1)).toBe(refKey([7, 0]));
  });

  it("folds a run of four or more equal tokens in one step, cut at the block's end, wherever it starts", () => {
    // Runs of 6, 4, 1, 4 and 9 tokens, then a lone 6: every block size and start cuts them differently.
    const t = [3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 1, 2, 2, 2, 2, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6];
    const plain: TokenSource = { head: Uint32Array.from(t), headStart: 0, headLength: t.length, tail: new Uint32Array(0) };
    for (let bs = 1; bs <= t.length; bs++) {
      for (let start = 0; start + bs <= t.length; start++) expect(keyInto(plain, start, bs), `bs ${bs} at ${start}`).toBe(refKey(t.slice(start, start + bs)));
    }
    // The same tokens split between a head and a tail at every point: runs across the split fold as one.
    for (let h = 0; h <= t.length; h++) expect(keyInto(split(t, 0, h), 0, t.length), `split at ${h}`).toBe(refKey(t));
    // Four tokens with one odd one out are a quad wherever it sits; zeros at the end are tokens, not
    // padding: [0, 0, 0] is a quad (0, 0, 0, 0) and no run; a head that starts late reads runs too.
    const u = [7, 8, 7, 7, 9, 9, 8, 9, 6, 5, 5, 6, 4, 4, 4, 4, 4, 0, 0, 0];
    const plainU: TokenSource = { head: Uint32Array.from(u), headStart: 0, headLength: u.length, tail: new Uint32Array(0) };
    for (let bs = 1; bs <= u.length; bs++) {
      for (let start = 0; start + bs <= u.length; start++)
        expect(keyInto(plainU, start, bs), `u: bs ${bs} at ${start}`).toBe(refKey(u.slice(start, start + bs)));
    }
    for (const [s0, h] of [
      [3, 9],
      [6, 15],
      [11, 20],
    ] as const) {
      for (let start = s0; start < u.length; start++)
        expect(keyInto(split(u, s0, h), start, u.length - start), `u: head [${s0}, ${h}) from ${start}`).toBe(refKey(u.slice(start)));
    }
    expect(refKey([0, 0, 0])).toBe(pair(KEY_START, 0n));
    expect(refKey([0, 0, 0, 0])).toBe(pair(KEY_START ^ ((RUN_HI << 32n) | 4n), RUN_LO));
    // Hand checks of the documented steps: [9 x 5] is one run step of L = 5, [9 x 3] one quad (9, 9, 9, 0).
    expect(refKey([9, 9, 9, 9, 9])).toBe(pair(KEY_START ^ ((RUN_HI << 32n) | 5n), (9n << 32n) | RUN_LO));
    expect(refKey([9, 9, 9])).toBe(pair(KEY_START ^ (9n << 32n), (9n << 32n) | 9n));
    // Run lengths tell blocks apart, as do the quads they would otherwise be.
    expect(refKey([9, 9, 9, 9, 9])).not.toBe(refKey([9, 9, 9, 9]));
    expect(refKey([9, 9, 9, 9])).not.toBe(refKey([9, 9, 9, 0]));
    expect(refKey([9, 9, 9, 9, 1])).not.toBe(refKey([9, 9, 9, 9]));
  });

  it("the key does not depend on the token after the block (a short last step reads 0 past the end)", () => {
    const a = { head: Uint32Array.from([1, 2, 3, 4]), headStart: 0, headLength: 4, tail: new Uint32Array(0) };
    const b = { head: Uint32Array.from([1, 2, 3, 5]), headStart: 0, headLength: 4, tail: new Uint32Array(0) };
    expect(keyInto(a, 0, 3)).toBe(keyInto(b, 0, 3));
    const c = { head: Uint32Array.from([1, 2, 3, 4, 6]), headStart: 0, headLength: 5, tail: new Uint32Array(0) };
    expect(keyInto(a, 0, 4)).toBe(keyInto(c, 0, 4));
  });

  it("reads token k at head[k - headStart] before headLength and tail[k - headLength] after, whatever the split", () => {
    const t = seq(24);
    // Sizes that end a four-token step on each of its tokens, and one of two steps.
    for (const bs of [3, 4, 5, 6, 8]) {
      // Heads starting at 2 and 5, ending at 7, 8 and 11: blocks before, across and after the boundary.
      for (const [s, h] of [
        [2, 7],
        [2, 8],
        [5, 11],
        [5, 8],
      ] as const) {
        const src = split(t, s, h);
        for (let start = Math.ceil(s / bs) * bs; start + bs <= 24; start += bs) {
          expect(keyInto(src, start, bs), `bs ${bs} head [${s}, ${h}) block at ${start}`).toBe(refKey(t.slice(start, start + bs)));
        }
      }
    }
  });

  it("writes the key to out[at] (high) and out[at + 1] (low) only, whatever the buffer held", () => {
    const t = seq(6);
    const src = split(t, 0, 6);
    for (const bs of [3, 4]) {
      const out = new Uint32Array(8).fill(0xdead_beef);
      tokensKeyInto(src, 1, bs, out, 3);
      expect(join(out[3]!, out[4]!)).toBe(refKey(t.slice(1, 1 + bs)));
      expect([out[0], out[1], out[2], out[5], out[6], out[7]]).toEqual(new Array(6).fill(0xdead_beef));
    }
  });
});

describe("HashChain.extend with lookup keys: tokens hash is the key, chained like real hashes", () => {
  it("blocks at an absolute offset read their own tokens; block 0 has no parent, later ones chain", () => {
    const t = seq(30);
    for (const bs of [3, 4]) {
      // Offset 2: the chain's blocks 0..3 are absolute blocks 2..5, tokens [2 bs, 6 bs).
      const src = split(t, bs, 2 * bs + 1);
      const c = new HashChain(1);
      c.extend(src, bs, 2, null, 2, true);
      c.extend(src, bs, 4, null, 2, true);
      expect(c.length).toBe(4);
      let parent: bigint | undefined;
      for (let i = 0; i < 4; i++) {
        const abs = 2 + i;
        const key = refKey(t.slice(abs * bs, (abs + 1) * bs));
        expect(c.tokensHash(i), `bs ${bs} block ${i}`).toBe(key);
        const block = parent === undefined ? key : pair(parent, key);
        expect(c.blockHash(i)).toBe(block);
        parent = block;
      }
    }
  });

  it("an empty chain's first block chains on the given parent", () => {
    const t = seq(12);
    const first = new HashChain();
    first.extend(split(t, 0, 12), 3, 1, null, 0, true);
    const c = new HashChain();
    c.extend(split(t, 0, 12), 3, 2, { chain: first, index: 0 }, 1, true);
    const k0 = refKey(t.slice(0, 3));
    const b1 = pair(k0, refKey(t.slice(3, 6)));
    expect(c.blockHash(0)).toBe(b1);
    expect(c.blockHash(1)).toBe(pair(b1, refKey(t.slice(6, 9))));
  });
});

describe("HashChain.extend with real hashes reads a head that starts late", () => {
  it("blocks past a head starting at token s hash as the plain tokens' blocks do", () => {
    // Block size 7 (odd), head from token 9 to 17, tail after: blocks 2..4 (tokens 14..34) cross it.
    const t = seq(35);
    const ref = computeBlockHashes(t, 7);
    const parent = new HashChain();
    parent.extend(split(t, 0, 35), 7, 2, null, 0);
    const c = new HashChain();
    c.extend(split(t, 9, 17), 7, 3, { chain: parent, index: 1 }, 2);
    for (let i = 0; i < 3; i++) expect(c.tokensHash(i)).toBe(ref[2 + i]!.tokensHash);
    expect([0, 1, 2].map((i) => c.blockHash(i))).toEqual(ref.slice(2).map((h) => h.blockHash));
  });
});

describe("HashChain bounds", () => {
  it("extending to fewer blocks than it holds keeps the chain", () => {
    const t = seq(12);
    const c = new HashChain();
    c.extend(split(t, 0, 12), 4, 3, null, 0);
    const before = [0, 1, 2].map((i) => c.blockHash(i));
    c.extend(split(t, 0, 12), 4, 1, null, 0);
    expect(c.length).toBe(3);
    expect([0, 1, 2].map((i) => c.blockHash(i))).toEqual(before);
  });

  it("copyPrefix refuses more blocks than the source holds, and a chain that is not empty", () => {
    const t = seq(8);
    const src = new HashChain();
    src.extend(split(t, 0, 8), 4, 2, null, 0);
    expect(() => {
      new HashChain(4).copyPrefix(src, 3);
    }).toThrow(/^copyPrefix of 3 blocks from a chain of 2$/);
    const full = new HashChain();
    full.copyPrefix(src, 2);
    expect(full.blockHash(1)).toBe(src.blockHash(1));
    expect(() => {
      full.copyPrefix(src, 1);
    }).toThrow(/^hash chain invariant: copyPrefix on a non-empty chain$/);
  });
});
