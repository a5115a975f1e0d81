import { describe, expect, it } from "vitest";
import { admit, group, manager, seqOf } from "./test-helpers.js";

// docs/rules/dynamo.md §8.6: tokens [11..88] in blocks of 4.
const H0 = 4117275816416024698n;
const T1 = 6081346995852963768n;
const H1 = 5947898228081096063n;

describe("KV events", () => {
  it("stores a sequence's blocks as one parent-linked run, then output blocks as they fill", () => {
    const m = manager(8, [group("full_attention", 4)], { events: true });
    const seq = seqOf(m, "a", [11, 22, 33, 44, 55, 66, 77, 88]);
    expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: 8 })).toBe(true);
    // Nothing is visible at allocation.
    expect(m.takeEvents()).toEqual([]);
    m.commitComputed(seq, 8);
    expect(m.takeEvents()).toEqual([
      {
        type: "stored",
        groupIndex: 0,
        parentHash: null,
        blocks: [
          { blockHash: H0, tokensHash: H0 },
          { blockHash: H1, tokensHash: T1 },
        ],
      },
    ]);
    // Decode 4 output tokens [99, 100, 101, 102] one per step: block 2 fills at 12 tokens.
    let computed = 8;
    for (const t of [99, 100, 101, 102]) {
      seq.appendToken(t);
      expect(m.allocateSlots(seq, { computedTokens: computed, newTokens: 1 })).toBe(true);
      computed++;
      m.commitComputed(seq, computed);
      if (computed < 12) expect(m.takeEvents()).toEqual([]);
    }
    expect(m.takeEvents()).toEqual([
      { type: "stored", groupIndex: 0, parentHash: H1, blocks: [{ blockHash: 17335092954915961572n, tokensHash: 12699502035523072446n }] },
    ]);
    expect(m.takeEvents()).toEqual([]);
  });

  it("removes a hash when its last cached copy is evicted, grouping consecutive removals", () => {
    // 2 usable pages.
    const m = manager(3, [group("full_attention", 4)], { events: true });
    const a = seqOf(m, "a", [11, 22, 33, 44, 55, 66, 77, 88]);
    admit(m, a);
    m.free(a); // tail first: block 2 (H1) then block 1 (H0) go to the back: queue [2, 1]
    m.takeEvents();
    const b = seqOf(m, "b", [1, 2, 3, 4, 5, 6, 7, 8]);
    expect(m.findPrefixHit(b).tokens).toBe(0);
    expect(m.allocateSlots(b, { computedTokens: 0, newTokens: 8 })).toBe(true);
    // Eviction from the front: H1's block first, then H0's (the Dynamo vector lists the same two hashes).
    expect(m.takeEvents()).toEqual([{ type: "removed", groupIndex: 0, blockHashes: [H1, H0] }]);
  });

  it("keeps a hash while a duplicate copy survives, and announces each key once", () => {
    // Two sequences with the same 4 tokens both compute block 0: two copies of one key.
    const m = manager(5, [group("full_attention", 4)], { events: true });
    const a = seqOf(m, "a", [11, 22, 33, 44, 1]);
    const b = seqOf(m, "b", [11, 22, 33, 44, 2]);
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 5 })).toBe(true);
    expect(m.allocateSlots(b, { computedTokens: 0, newTokens: 5 })).toBe(true);
    m.commitComputed(a, 5);
    m.commitComputed(b, 5);
    expect(m.takeEvents()).toEqual([{ type: "stored", groupIndex: 0, parentHash: null, blocks: [{ blockHash: H0, tokensHash: H0 }] }]);
    // a holds blocks 1 (H0) and 2; b holds 3 (H0) and 4 — the pool is full (4 usable).
    m.free(a); // queue [2, 1]: 2 unhashed at the front, 1 hashed at the back
    const c = seqOf(m, "c", [7, 7, 7, 7, 7, 7, 7, 7]);
    expect(m.allocateSlots(c, { computedTokens: 0, newTokens: 8 })).toBe(true);
    // Block 1's copy of H0 is evicted, but block 3 still holds H0: no removal.
    expect(m.takeEvents()).toEqual([]);
    expect(m.findPrefixHit(seqOf(m, "d", [11, 22, 33, 44, 9])).tokens).toBe(4);
  });

  it("collects nothing unless asked", () => {
    const m = manager(8, [group("full_attention", 4)]);
    admit(m, seqOf(m, "a", [11, 22, 33, 44, 55, 66, 77, 88]));
    expect(m.takeEvents()).toEqual([]);
  });
});
