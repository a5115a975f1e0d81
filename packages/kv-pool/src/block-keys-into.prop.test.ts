import fc from "fast-check";
import { propRuns } from "./test-helpers.js";
import { describe, expect, it } from "vitest";
import type { PackedHashView } from "./hashing.js";
import { KvCacheManager } from "./kv-cache-manager.js";
import { asPromptImpl, createPathPrompt, createPromptTokens } from "./prompt-tokens.js";
import { Sequence } from "./sequence.js";

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
      fc.property(ids, fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 0, max: 20 }), unit01, unit01, (path, unit, blockSize, outputs, a, b) => {
        const length = path.length * unit;
        const pathKeys = asPromptImpl(createPathPrompt(Uint32Array.from(path), length, unit)).keys(blockSize);
        const [f1, t1] = range(pathKeys.length, a, b);
        expect(written(pathKeys, f1, t1)).toEqual(expected(pathKeys, f1, t1));

        const tokens = asPromptImpl(createPromptTokens(Uint32Array.from({ length }, (_, k) => path[Math.floor(k / unit)]!))).chain(blockSize);
        const [f2, t2] = range(tokens.length, a, b);
        expect(written(tokens, f2, t2)).toEqual(expected(tokens, f2, t2));

        // A sequence over the path prompt, `outputs` tokens appended: its chain is the path keys
        // then hashed output blocks.
        const m = new KvCacheManager({ numPages: 8, groups: [{ name: "a", kind: "full_attention", num_layers: 1, block_size_tokens: blockSize }], enablePrefixCaching: true, vllmVersion: "0.32.0" });
        const s = m.createSequence("s", createPathPrompt(Uint32Array.from(path), length, unit));
        if (!(s instanceof Sequence)) throw new Error("a KvCacheManager's sequences are Sequence instances");
        for (let k = 0; k < outputs; k++) s.appendToken(k);
        const chain = s.chain(blockSize).ensure(Number.MAX_SAFE_INTEGER);
        const [f3, t3] = range(chain.length, a, b);
        expect(written(chain, f3, t3)).toEqual(expected(chain, f3, t3));
      }),
      { seed: 4242, numRuns: propRuns(300) },
    );
  });
});
