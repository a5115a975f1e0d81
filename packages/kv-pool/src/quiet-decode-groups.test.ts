import { describe, expect, it } from "vitest";
import type { KvSequence } from "./contract.js";
import { group, manager, range, seqOf, tablesOf } from "./test-helpers.js";

// quietDecodeSteps for window, Mamba-type and ring groups (including the window
// group's skip bound). Each expected count is derived by hand from the group's
// rules, and the steps are then run for real: the claimed quiet steps change nothing (tables,
// page counts, events) and, where the count is exact, the step after them changes something.

type Manager = ReturnType<typeof manager>;

/** Prefills a prompt of `n` tokens in one step and samples one token: n computed, n + 1 tokens. */
function prefilled(m: Manager, n: number): KvSequence {
  const seq = seqOf(m, "a", range(1000, 1000 + n));
  expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: n })).toBe(true);
  m.commitComputed(seq, n);
  m.takeEvents();
  seq.appendToken(7);
  return seq;
}

/** One decode step computing token `c` (c -> c + 1 computed), then one sampled token; true when the pool changed. */
function stepChanges(m: Manager, seq: KvSequence, c: number): boolean {
  const snapshot = (): string => JSON.stringify([tablesOf(seq), m.metrics()]);
  const before = snapshot();
  expect(m.allocateSlots(seq, { computedTokens: c, newTokens: 1 })).toBe(true);
  m.commitComputed(seq, c + 1);
  const events = m.takeEvents();
  seq.appendToken(8);
  return events.length > 0 || snapshot() !== before;
}

/** Runs `quiet` steps from `c` that must change nothing, then (when `exact`) one that must change something. */
function expectQuietRun(m: Manager, seq: KvSequence, c: number, quiet: number, exact = true): number {
  for (let k = 0; k < quiet; k++) expect(stepChanges(m, seq, c + k), `step ${k} from ${c}`).toBe(false);
  if (exact) expect(stepChanges(m, seq, c + quiet), `step ${quiet} from ${c}`).toBe(true);
  return c + quiet + (exact ? 1 : 0);
}

describe("quietDecodeSteps of a window group (S(C) = max(0, C - W + 1) skipped tokens)", () => {
  it("B 4, W 3, caching off: quiet until the skipped tokens reach the next multiple of B", () => {
    const m = manager(20, [group("sliding_window", 4, { window_tokens: 3 })], { caching: false });
    // Prompt 5: cdiv(5, 4) = 2 blocks [b0, b1] covering 8 tokens; 6 tokens after the first output.
    const seq = prefilled(m, 5);
    // c = 5. Allocation: 2 x 4 - 5 = 3 steps. Skip: s = S(5) = 5 - 3 + 1 = 3, floor(3 / 4) = 0 so
    // the walk looks at entry -1 (none); S reaches the next multiple of 4 after 4 - 3 = 1 step.
    // min(3, 1) = 1: the step computing token 5 is quiet, the one computing token 6 (S(6) = 4,
    // one whole block below the window) nulls b0.
    expect(m.quietDecodeSteps(seq, 5)).toBe(1);
    let c = expectQuietRun(m, seq, 5, 1, false);
    // c = 6 before b0 is nulled: s = 4, entry min(floor(4 / 4), 2) - 1 = 0 is b0, still real: 0.
    expect(m.quietDecodeSteps(seq, c)).toBe(0);
    expect(stepChanges(m, seq, c)).toBe(true);
    c = 7;
    expect(tablesOf(seq)[0]![0]).toBe(0);
    // c = 7, b0 nulled: allocation 8 - 7 = 1; skip s = 5, entry 0 is null, next multiple
    // (floor(5 / 4) + 1) x 4 = 8 is 8 - 5 = 3 steps away. min(1, 3) = 1; the step computing
    // token 8 needs cdiv(9, 4) = 3 blocks.
    expect(m.quietDecodeSteps(seq, c)).toBe(1);
    c = expectQuietRun(m, seq, c, 1);
    expect(c).toBe(9);
    // c = 9, 3 blocks [null, b1, b2] covering 12: allocation 12 - 9 = 3; skip s = 7, entry
    // min(floor(7 / 4), 3) - 1 = 0 null, next multiple 8 is 1 step away. min(3, 1) = 1: the step
    // computing token 10 has S(10) = 8, two whole blocks below the window, and nulls b1.
    expect(m.quietDecodeSteps(seq, c)).toBe(1);
    expectQuietRun(m, seq, c, 1);
    expect(tablesOf(seq)[0]!.slice(0, 2)).toEqual([0, 0]);
  });

  it("B 4, W 16: nothing skipped yet, so only the allocation bounds the run", () => {
    const m = manager(20, [group("sliding_window", 4, { window_tokens: 16 })], { caching: false });
    // Prompt 5: 2 blocks covering 8 tokens, c = 5. Allocation: 8 - 5 = 3. Skip: s = 5 - 16 + 1 =
    // -10, no entry to look at; S first reaches 4 (a whole block) after 4 - (-10) = 14 steps.
    // min(3, 14) = 3: tokens 5, 6, 7 fit, token 8 needs a third block.
    const seq = prefilled(m, 5);
    expect(m.quietDecodeSteps(seq, 5)).toBe(3);
    expectQuietRun(m, seq, 5, 3);
  });
});

describe("quietDecodeSteps of a Mamba-type group (0.31.0 align mode, prefix caching on)", () => {
  const mamba = () => manager(20, [group("state", 4)], { events: true });

  it("quiet until the running state reaches a block boundary (cached) or outgrows its block", () => {
    const m = mamba();
    // Prompt 6: cdiv(6, 4) = 2 table entries [null, m0], no previous state (the table was empty).
    const seq = prefilled(m, 6);
    // c = 6. Allocation: 2 x 4 - 6 = 2. Caching: the state is cached when c + k + 1 is a multiple
    // of 4: (4 - (6 + 1) % 4) % 4 = 1 step. No previous state. min(2, 1) = 1: token 6 is quiet,
    // token 7 ends block 1 and caches m0 (a stored event).
    expect(m.quietDecodeSteps(seq, 6)).toBe(1);
    let c = expectQuietRun(m, seq, 6, 1);
    expect(c).toBe(8);
    // c = 8 = 2 x 4: the step computing token 8 needs cdiv(9, 4) = 3 entries: 0.
    expect(m.quietDecodeSteps(seq, c)).toBe(0);
    expect(stepChanges(m, seq, c)).toBe(true);
    c = 9;
    // c = 9, table [null, m0, m1] and m0 (index 1) the previous state. Allocation 12 - 9 = 3;
    // caching (4 - 10 % 4) % 4 = 2; previous state released once cdiv(9 + k, 4) - 1 > 1, at
    // k = (1 + 1) x 4 - 9 + 1 = 0. min(3, 2, 0) = 0.
    expect(m.quietDecodeSteps(seq, c)).toBe(0);
    expect(stepChanges(m, seq, c)).toBe(true);
    c = 10;
    expect(tablesOf(seq)[0]!.filter((b) => b !== 0)).toHaveLength(1);
    // c = 10, m0 released: allocation 12 - 10 = 2, caching (4 - 11 % 4) % 4 = 1: 1.
    expect(m.quietDecodeSteps(seq, c)).toBe(1);
    expectQuietRun(m, seq, c, 1);
  });

  it("a previous state at entry 0 bounds the run too", () => {
    const m = mamba();
    // Prompt 4: one entry [m0]; commit(4) caches it (4 is a multiple of 4).
    const seq = prefilled(m, 4);
    // c = 4 = 1 x 4: token 4 needs cdiv(5, 4) = 2 entries: 0.
    expect(m.quietDecodeSteps(seq, 4)).toBe(0);
    expect(stepChanges(m, seq, 4)).toBe(true);
    // c = 5, [m0, m1], m0 (index 0) the previous state. Allocation 8 - 5 = 3, caching
    // (4 - 6 % 4) % 4 = 2, previous state (0 + 1) x 4 - 5 + 1 = 0: released by the next step.
    expect(m.quietDecodeSteps(seq, 5)).toBe(0);
    expect(stepChanges(m, seq, 5)).toBe(true);
    // c = 6, [null, m1]: allocation 8 - 6 = 2, caching (4 - 7 % 4) % 4 = 1: 1.
    expect(m.quietDecodeSteps(seq, 6)).toBe(1);
    expectQuietRun(m, seq, 6, 1);
  });

  it("0.32.0: a sequence holding checkpoint blocks is never quiet", () => {
    const m = manager(20, [group("state", 4, { prefill_checkpoint_blocks: 1 })], { version: "0.32.0", events: true });
    // Prompt 10 in one chunk: table cdiv(10, 4) = 3 entries [null, null, m0]; one checkpoint block
    // for the last boundary inside the chunk, token 8 (entry 1), cached at commit(10).
    const seq = prefilled(m, 10);
    expect(m.metrics().usedPages).toBe(2);
    // c = 10. Without the checkpoint: allocation 12 - 10 = 2, caching (4 - 11 % 4) % 4 = 1, so 1;
    // with it 0: the next step's remove_skipped_blocks frees the checkpoint block.
    expect(m.quietDecodeSteps(seq, 10)).toBe(0);
    expect(stepChanges(m, seq, 10)).toBe(true);
    expect(m.metrics().usedPages).toBe(1);
  });
});

describe("quietDecodeSteps of a ring (a non-cacheable state: one block for the request's life)", () => {
  it("never bounds the run", () => {
    const m = manager(20, [group("state", 4, { prefix_cacheable: false })]);
    // Prompt 6: the ring's one block. No single-token step ever takes, frees or caches a block.
    const seq = prefilled(m, 6);
    expect(m.quietDecodeSteps(seq, 6)).toBe(Number.MAX_SAFE_INTEGER);
    expectQuietRun(m, seq, 6, 5, false);
  });
});

describe("advanceQuietDecode: skipping the quiet steps", () => {
  it("records the skipped steps, and a position past the allocation is not a decode position", () => {
    const m = manager(20, [group("full_attention", 4)], { caching: false });
    // Prompt 5: 2 blocks covering 8 tokens, 5 allocated; after the first output, 6 tokens.
    const seq = prefilled(m, 5);
    // The steps computing tokens 5, 6, 7 are quiet (8 - 5 = 3). The caller skips the first two,
    // appending their sampled tokens: 8 tokens, still 5 allocated.
    expect(m.quietDecodeSteps(seq, 5)).toBe(3);
    seq.appendToken(8);
    seq.appendToken(9);
    // Computing token 7 needs tokens 5 and 6 recorded first: 7 > 5 allocated, so 0 (the table
    // alone, 8 - 7 = 1, would say 1).
    expect(m.quietDecodeSteps(seq, 7)).toBe(0);
    // Outside [allocated, length] = [5, 8] is refused.
    expect(() => {
      m.advanceQuietDecode(seq, 4);
    }).toThrow(new RangeError("sequence a: cannot advance a quiet decode to 4 tokens (allocated 5 of 8)"));
    expect(() => {
      m.advanceQuietDecode(seq, 9);
    }).toThrow(new RangeError("sequence a: cannot advance a quiet decode to 9 tokens (allocated 5 of 8)"));
    m.advanceQuietDecode(seq, 7);
    expect(m.quietDecodeSteps(seq, 7)).toBe(1);
    // Both ends of the range are allowed: the current allocation again, and the whole sequence.
    m.advanceQuietDecode(seq, 7);
    m.advanceQuietDecode(seq, 8);
    // 8 allocated and computed: token 8 (9 tokens) needs a third block, taken by a real step.
    seq.appendToken(10);
    expect(m.quietDecodeSteps(seq, 8)).toBe(0);
    expect(m.allocateSlots(seq, { computedTokens: 8, newTokens: 1 })).toBe(true);
    expect(m.heldBlocks(seq)).toEqual([3]);
  });

  it("refuses a sequence that holds no blocks", () => {
    const m = manager(20, [group("full_attention", 4)]);
    const seq = seqOf(m, "b", range(0, 3));
    expect(() => {
      m.advanceQuietDecode(seq, 0);
    }).toThrow(new RangeError("sequence b: cannot advance a quiet decode to 0 tokens (allocated 0 of 3)"));
  });
});

describe("quietDecodeSteps of a sequence that is not running", () => {
  it("a reserved destination is never quiet, even where its reserved table would allow it", () => {
    const m = manager(20, [group("full_attention", 4)], { caching: false });
    // A 1-token destination: its reservation holds cdiv(1, 4) = 1 block. At computed 0 (its
    // length - 1, not past its 0 allocated tokens) the table alone would give 1 x 4 - 0 = 4 steps,
    // but it runs nothing until activated: 0.
    const seq = seqOf(m, "d", [5]);
    expect(m.reserveDestination(seq, 1)).toBeDefined();
    expect(m.quietDecodeSteps(seq, 0)).toBe(0);
  });
});
