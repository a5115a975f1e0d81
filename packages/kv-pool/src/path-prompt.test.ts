import { describe, expect, it } from "vitest";
import { computeBlockHashes } from "./hashing.js";
import { PathPrompt, createPathPrompt, promptPrefix } from "./prompt-tokens.js";

describe("createPathPrompt", () => {
  it("ids [5, 7, 9] of 4 tokens each, 10 tokens: 5 5 5 5 7 7 7 7 9 9", () => {
    const p = createPathPrompt(Uint32Array.from([5, 7, 9]), 10, 4);
    expect(p.length).toBe(10);
    expect(Array.from(p.tokens)).toEqual([5, 5, 5, 5, 7, 7, 7, 7, 9, 9]);
    // Its real hashes are the tokens' (floor(10 / 4) = 2 full blocks).
    expect(p.blockHashes(4)).toEqual(computeBlockHashes(p.tokens, 4).map((h) => h.blockHash));
    const q = promptPrefix(p, 6);
    expect([q.length, Array.from(q.tokens)]).toEqual([6, [5, 5, 5, 5, 7, 7]]);
  });

  it("refuses a length beyond ids x unit and ids that are not u32", () => {
    expect(() => createPathPrompt(Uint32Array.from([1, 2]), 9, 4)).toThrow(RangeError);
    expect(() => createPathPrompt(Uint32Array.from([1]), 1, 0)).toThrow(RangeError);
  });

  it("builds no token array until asked", () => {
    const p = new PathPrompt(Uint32Array.from([1, 2, 3]), 12, 4);
    p.keys(2).blockHi(5);
    expect(p.tail(10)).toEqual({ head: Uint32Array.from([3, 3]), headStart: 10 });
    expect(Reflect.get(p, "materialized")).toBeUndefined();
  });
});
