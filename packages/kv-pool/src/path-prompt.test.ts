import { describe, expect, it } from "vitest";
import { computeBlockHashes } from "./hashing.js";
import type { PromptTokens } from "./contract.js";
import { PathPrompt, createPathPrompt, createPromptTokens, promptPrefix } from "./prompt-tokens.js";
import { admit, group, manager } from "./test-helpers.js";

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

  it("builds no token array until asked, not even to hash an output block that holds its last tokens", () => {
    const p = new PathPrompt(Uint32Array.from([1, 2, 3]), 11, 4);
    p.keys(2).blockHi(4);
    // 11 tokens at block size 4: block 2 is the prompt's tokens 8..10 ([3, 3, 3]) and output 0.
    const m = manager(8, [group("full_attention", 4)]);
    const seq = m.createSequence("a", p, (k) => 40 + k);
    seq.appendOutputs(1);
    expect(admit(m, seq)).toEqual({ ok: true, hit: 0 });
    expect(Reflect.get(p, "materialized")).toBeUndefined();
    // The block was cached under the key of those tokens: a path prompt built from its tokens
    // (the same ids, tokens read once) and the same output finds all 3 blocks (12 tokens, asked
    // with one more).
    const q = new PathPrompt(Uint32Array.from([1, 2, 3]), 11, 4);
    expect(q.tokens).toHaveLength(11);
    const probe = m.createSequence("b", q, (k) => 40 + k);
    probe.appendOutputs(2);
    expect(m.findPrefixHit(probe).tokens).toBe(12);
  });
});

// Which keys a pool looks path prompts up by. Without KV events, path keys (a path
// prompt matches path prompts of the same ids, not a token prompt of equal tokens); with events,
// the real hashes (every prompt of equal tokens matches).
describe("path prompts in a pool", () => {
  const FA4 = group("full_attention", 4);
  // ids [5, 7, 9] at unit 4, 12 tokens: 5 5 5 5 | 7 7 7 7 | 9 9 9 9.
  const path = (): PromptTokens => createPathPrompt(Uint32Array.from([5, 7, 9]), 12, 4);
  const tokens = (): PromptTokens => createPromptTokens(Uint32Array.from([5, 5, 5, 5, 7, 7, 7, 7, 9, 9, 9, 9, 1]));

  for (const events of [false, true]) {
    it(`a committed path prompt is found by an equal path prompt${events ? " and by a token prompt of its tokens (events on)" : ", not by a token prompt (events off)"}`, () => {
      const m = manager(16, [FA4], { events });
      expect(admit(m, m.createSequence("a", path()))).toEqual({ ok: true, hit: 0 }); // 3 blocks cached
      // An equal path prompt: at most 12 - 1 = 11 tokens, floor(11 / 4) = 2 blocks = 8 tokens.
      expect(m.peekPrefixHitTokens(path())).toBe(8);
      expect(m.findPrefixHit(m.createSequence("b", path())).tokens).toBe(8);
      // The 13-token prompt of the same 12 tokens and a 1: at most 12 tokens, 3 blocks, when the
      // pool looks up real hashes; none by path keys.
      expect(m.peekPrefixHitTokens(tokens())).toBe(events ? 12 : 0);
      expect(m.findPrefixHit(m.createSequence("c", tokens())).tokens).toBe(events ? 12 : 0);
    });
  }
});
