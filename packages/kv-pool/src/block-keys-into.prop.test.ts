import fc from "fast-check";
import { propRuns } from "./test-helpers.js";
import { describe, expect, it } from "vitest";
import type { PackedHashView } from "./hashing.js";
import { KvCacheManager } from "./kv-cache-manager.js";
import { asPromptImpl, createPathPrompt, createPromptTokens } from "./prompt-tokens.js";
import { Sequence } from "./sequence.js";
import { xxh3PairInto } from "./xxh3-pair.js";

/** What blockKeysInto must write: blockHi / blockLo of each block, as int32 (the same 32 bits). */
function expected(view: PackedHashView, from: number, to: number): number[] {
  const out: number[] = [];
  for (let i = from; i < to; i++) out.push(view.blockHi(i) | 0, view.blockLo(i) | 0);
  return out;
}

function written(view: PackedHashView, from: number, to: number): number[] {
  // One spare pair past the end: nothing may be written there.
  const out = new Int32Array(2 * (to - from) + 2).fill(7);
  view.blockKeysInto(from, to, out);
  expect(Array.from(out.subarray(2 * (to - from)))).toEqual([7, 7]);
  return Array.from(out.subarray(0, 2 * (to - from)));
}

/** A range [from, to) of 0..n from two numbers in 0..1. */
const range = (n: number, a: number, b: number): [number, number] => {
  const x = Math.floor(a * (n + 1));
  const y = Math.floor(b * (n + 1));
  return [Math.min(x, y), Math.max(x, y)];
};

const ids = fc.array(fc.integer({ min: 0, max: 0xffff_ffff }), { minLength: 1, maxLength: 12 });
const unit01 = fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true });

describe("blockKeysInto writes each view's block hash halves as int32", () => {
  it("path keys (fmix32 inline), token chains, and a sequence's chain across its prompt and its outputs", () => {
    fc.assert(
      fc.property(
        ids,
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 20 }),
        unit01,
        unit01,
        (path, unit, blockSize, outputs, a, b) => {
          const length = path.length * unit;
          const pathKeys = asPromptImpl(createPathPrompt(Uint32Array.from(path), length, unit)).keys(blockSize);
          const [f1, t1] = range(pathKeys.length, a, b);
          expect(written(pathKeys, f1, t1)).toEqual(expected(pathKeys, f1, t1));

          const tokens = asPromptImpl(createPromptTokens(Uint32Array.from({ length }, (_, k) => path[Math.floor(k / unit)]!))).chain(blockSize);
          const [f2, t2] = range(tokens.length, a, b);
          expect(written(tokens, f2, t2)).toEqual(expected(tokens, f2, t2));

          // A sequence over the path prompt, `outputs` tokens appended: its chain is the path keys
          // then hashed output blocks.
          const m = new KvCacheManager({
            numPages: 8,
            groups: [{ name: "a", kind: "full_attention", num_layers: 1, block_size_tokens: blockSize }],
            enablePrefixCaching: true,
            vllmVersion: "0.32.0",
          });
          const s = m.createSequence("s", createPathPrompt(Uint32Array.from(path), length, unit));
          if (!(s instanceof Sequence)) throw new Error("a KvCacheManager's sequences are Sequence instances");
          for (let k = 0; k < outputs; k++) s.appendToken(k);
          const chain = s.chain(blockSize).ensure(Number.MAX_SAFE_INTEGER);
          const [f3, t3] = range(chain.length, a, b);
          expect(written(chain, f3, t3)).toEqual(expected(chain, f3, t3));
        },
      ),
      { seed: 4242, numRuns: propRuns(300) },
    );
  });
});

/** MurmurHash3's 32-bit finalizer, written out here from its definition (the test's own copy). */
function fmix(x: number): number {
  x = (x ^ (x >>> 16)) >>> 0;
  x = Math.imul(x, 0x85eb_ca6b) >>> 0;
  x = (x ^ (x >>> 13)) >>> 0;
  x = Math.imul(x, 0xc2b2_ae35) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}

describe("path keys follow their documented formula, whatever order prompts of several lengths come in", () => {
  it("block i ending at token end, in unit j = floor((end - 1) / unit): (P[j] hi ^ fmix32(end), P[j] lo ^ fmix32(end ^ 0x9e3779b9))", () => {
    // P[j] = XXH3(P[j - 1], ids[j]) from the seed 0x243f6a88:85a308d3 (prompt-tokens.ts). Prompts
    // of random lengths and block sizes are made one after another, so the end mixes that the
    // views share per block size are grown while shorter views still read the older table.
    const prompt = fc.record({
      path: fc.array(fc.integer({ min: 0, max: 0xffff_ffff }), { minLength: 1, maxLength: 40 }),
      unit: fc.integer({ min: 1, max: 9 }),
      cut: unit01,
    });
    fc.assert(
      fc.property(fc.array(prompt, { minLength: 1, maxLength: 6 }), fc.integer({ min: 1, max: 5 }), (prompts, blockSize) => {
        const views = prompts.map(({ path, unit, cut }) => {
          const length = path.length * unit - Math.floor(cut * unit);
          const keys = new Uint32Array(2 * path.length);
          let hi = 0x243f_6a88;
          let lo = 0x85a3_08d3;
          path.forEach((id, j) => {
            xxh3PairInto(hi | 0, lo | 0, 0, id | 0, keys, 2 * j);
            hi = keys[2 * j]!;
            lo = keys[2 * j + 1]!;
          });
          return { view: asPromptImpl(createPathPrompt(Uint32Array.from(path), length, unit)).keys(blockSize), keys, unit };
        });
        for (const { view, keys, unit } of views) {
          const want: number[] = [];
          for (let i = 0; i < view.length; i++) {
            const end = (i + 1) * blockSize;
            const j = Math.floor((end - 1) / unit);
            want.push((keys[2 * j]! ^ fmix(end)) | 0, (keys[2 * j + 1]! ^ fmix((end ^ 0x9e37_79b9) >>> 0)) | 0);
          }
          expect(written(view, 0, view.length)).toEqual(want);
          expect(Array.from({ length: view.length }, (_, i) => [view.blockHi(i), view.blockLo(i)]).flat()).toEqual(want.map((w) => w >>> 0));
        }
      }),
      { seed: 977, numRuns: propRuns(200) },
    );
  });
});
