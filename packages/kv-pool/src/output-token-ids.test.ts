import { describe, expect, it } from "vitest";
import { computeBlockHashes } from "./hashing.js";
import { createPathPrompt, createPromptTokens } from "./prompt-tokens.js";
import { admit, group, manager, range, seqOf } from "./test-helpers.js";

// Sequences whose outputs come from an id function (`createSequence(id, prompt, outputTokenIds)`,
// appended by count): the ids are asked for only when a block holding them is hashed, and the
// blocks must hash as if the same ids had been appended one by one.

describe("outputTokenIds", () => {
  it("stores blocks under the real hashes of the prompt and the ids the function gives", () => {
    const m = manager(8, [group("full_attention", 4)], { events: true });
    const seq = m.createSequence("a", createPromptTokens(Uint32Array.of(1, 2, 3, 4)), (k) => 100 + k);
    seq.appendOutputs(4);
    expect(seq.numTokens).toBe(8); // 4 prompt + 4 outputs
    // One step of 8 tokens: 2 full blocks, [1, 2, 3, 4] and the outputs [100, 101, 102, 103].
    expect(admit(m, seq)).toEqual({ ok: true, hit: 0 });
    const stored = m.takeEvents().flatMap((e) => (e.type === "stored" ? e.blocks : []));
    expect(stored).toEqual(computeBlockHashes([1, 2, 3, 4, 100, 101, 102, 103], 4));
  });

  it("a path prompt's tail and its outputs hash as the tokens they stand for (real hashes)", () => {
    const m = manager(16, [group("full_attention", 4)], { events: true });
    // Path [7, 9], 3 tokens per id, 6 tokens: [7, 7, 7, 9, 9, 9]. With 6 outputs: block 0 is
    // [7, 7, 7, 9], block 1 [9, 9, out0, out1] (the prompt's tail and outputs), block 2 [out2 .. out5].
    const seq = m.createSequence("a", createPathPrompt(Uint32Array.of(7, 9), 6, 3), (k) => 0x8000_0000 + k);
    seq.appendOutputs(6);
    expect(admit(m, seq)).toEqual({ ok: true, hit: 0 });
    const stored = m.takeEvents().flatMap((e) => (e.type === "stored" ? e.blocks : []));
    const out = (k: number) => 0x8000_0000 + k;
    expect(stored).toEqual(computeBlockHashes([7, 7, 7, 9, 9, 9, out(0), out(1), out(2), out(3), out(4), out(5)], 4));
  });

  it("a path prompt's tail lands at its own place in the shared array, after a longer tail was written there", () => {
    // First a tail of 7 tokens at block size 8: path [5] x 15 tokens -> block 1 holds tokens 8..14
    // (seven 5s) and output 0. It leaves 7 entries in the shared array.
    const m8 = manager(8, [group("full_attention", 8)], { events: true });
    const long = m8.createSequence("l", createPathPrompt(Uint32Array.of(5), 15, 15), (k) => 1 + k);
    long.appendOutputs(1);
    expect(admit(m8, long)).toEqual({ ok: true, hit: 0 });
    // Then path [7, 0x7777] x 3 at block size 4: its output block [0x7777, 0x7777, out0, out1]
    // starts at token 4, and its prompt tokens 4 and 5 must be read as 0x7777 (an id no other test
    // writes), not what earlier hashes left at the front of the array.
    const m4 = manager(8, [group("full_attention", 4)], { events: true });
    const seq = m4.createSequence("a", createPathPrompt(Uint32Array.of(7, 0x7777), 6, 3), (k) => 100 + k);
    seq.appendOutputs(2);
    expect(admit(m4, seq)).toEqual({ ok: true, hit: 0 });
    const stored = m4.takeEvents().flatMap((e) => (e.type === "stored" ? e.blocks : []));
    expect(stored).toEqual(computeBlockHashes([7, 7, 7, 0x7777, 0x7777, 0x7777, 100, 101], 4));
  });

  it("asks for each output id once, when its block is hashed, and never for outputs of a partial block", () => {
    const m = manager(16, [group("full_attention", 4)]);
    const asked: number[] = [];
    const seq = m.createSequence("a", createPromptTokens(Uint32Array.of(1, 2, 3, 4)), (k) => {
      asked.push(k);
      return 500 + k;
    });
    seq.appendOutputs(6);
    // 10 tokens: blocks 0 (prompt) and 1 (outputs 0..3) are full, outputs 4 and 5 are in a partial block.
    expect(admit(m, seq)).toEqual({ ok: true, hit: 0 });
    expect(asked).toEqual([0, 1, 2, 3]);
    seq.appendOutputs(2);
    // 12 tokens: block 2 (outputs 4..7) is full once computed.
    expect(m.allocateSlots(seq, { computedTokens: 10, newTokens: 2 })).toBe(true);
    m.commitComputed(seq, 12);
    expect(asked).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // A prompt of those 12 tokens and one more finds all 3 blocks (a hit is at most 13 - 1 tokens,
    // floor(12 / 4) = 3 blocks = 12 tokens).
    expect(m.findPrefixHit(seqOf(m, "b", [1, 2, 3, 4, ...range(500, 508), 9])).tokens).toBe(12);
  });

  it("keeps two sequences' outputs apart when their blocks are hashed in turn", () => {
    const m = manager(32, [group("full_attention", 4)]);
    const prompt = [7, 7, 7, 7];
    const a = m.createSequence("a", createPromptTokens(Uint32Array.from(prompt)), (k) => 1000 + k);
    const b = m.createSequence("b", createPromptTokens(Uint32Array.from(prompt)), (k) => 2000 + k);
    // a hashes its outputs 0..3 (block 1), then b its outputs 0..7 (blocks 1, 2), then a its 4..7.
    a.appendOutputs(4);
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    b.appendOutputs(8);
    // b hits the shared prompt block (4 tokens) and computes the other 8.
    expect(admit(m, b)).toEqual({ ok: true, hit: 4 });
    a.appendOutputs(4);
    expect(m.allocateSlots(a, { computedTokens: 8, newTokens: 4 })).toBe(true);
    m.commitComputed(a, 12);
    // Each full run of outputs is found under its own ids: 12 tokens (3 blocks) each, and a mix
    // of the two matches only the prompt block.
    const probe = (outputs: number[]) => m.findPrefixHit(seqOf(m, "p", [...prompt, ...outputs, 1])).tokens;
    expect(probe(range(1000, 1008))).toBe(12);
    expect(probe(range(2000, 2008))).toBe(12);
    expect(probe([...range(1000, 1004), ...range(2004, 2008)])).toBe(8);
    expect(probe([...range(2000, 2004), ...range(1004, 1008)])).toBe(8);
    expect(probe(range(3000, 3008))).toBe(4);
  });

  it("a path prompt's outputs take lookup keys equal to those of the same ids appended one by one", () => {
    const m = manager(16, [group("full_attention", 4)]);
    // Path [7, 9], 3 tokens per id: [7, 7, 7, 9, 9, 9], so output block 1 is [9, 9, out0, out1].
    const a = m.createSequence("a", createPathPrompt(Uint32Array.of(7, 9), 6, 3), (k) => 0xffff_fff0 + k);
    a.appendOutputs(2);
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    const b = m.createSequence("b", createPathPrompt(Uint32Array.of(7, 9), 6, 3));
    for (const t of [0xffff_fff0, 0xffff_fff1, 5]) b.appendToken(t);
    // 9 tokens: at most floor(8 / 4) = 2 blocks, both a's (ids above 2^31 included).
    expect(m.findPrefixHit(b).tokens).toBe(8);
  });

  it("refuses the other way of appending, bad counts, and ids that are not u32", () => {
    const m = manager(8, [group("full_attention", 4)]);
    const gen = m.createSequence("g", createPromptTokens(Uint32Array.of(1)), (k) => k);
    expect(() => {
      gen.appendToken(5);
    }).toThrow(new Error("sequence g takes its outputs from its output token ids: append them with appendOutputs"));
    for (const bad of [-1, 1.5, Number.NaN, Infinity]) {
      expect(() => {
        gen.appendOutputs(bad);
      }).toThrow(new RangeError(`output count ${bad} is not a non-negative integer`));
    }
    gen.appendOutputs(0);
    expect(gen.numTokens).toBe(1);
    const plain = seqOf(m, "p", [1]);
    expect(() => {
      plain.appendOutputs(1);
    }).toThrow(new Error("sequence p has no output token ids: append its tokens with appendToken"));
    for (const bad of [2 ** 32, -1, 0.5, Number.NaN]) {
      const m2 = manager(8, [group("full_attention", 4)]);
      const s = m2.createSequence("s", createPromptTokens(Uint32Array.of(1, 2, 3)), (k) => (k === 0 ? bad : k));
      s.appendOutputs(1);
      // 4 tokens: one full block, [1, 2, 3, output 0], hashed at commit.
      expect(() => admit(m2, s)).toThrow(new RangeError(`output token id ${bad} is not a u32`));
    }
  });
});
