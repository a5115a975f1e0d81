import { describe, expect, it } from "vitest";
import { computeBlockHashes } from "./hashing.js";
import { KvCacheManager, poolOf } from "./kv-cache-manager.js";
import { createPromptTokens } from "./prompt-tokens.js";
import { admit, group, manager, range, repeat, seqOf, tablesOf } from "./test-helpers.js";

const FA16 = group("full_attention", 16);

describe("T1 test_prefill (11 pages, B 16, new free order)", () => {
  it("allocates, hits, frees tail first and reuses in the documented order", () => {
    const m = manager(11, [FA16]);
    const pool = poolOf(m);
    const common = [...repeat(0, 16), ...repeat(1, 16), ...repeat(2, 16)];
    // req0: 48 + 7 = 55 tokens -> cdiv(55,16) = 4 blocks from the front of [1..10].
    const req0 = seqOf(m, "req0", [...common, ...repeat(3, 7)]);
    expect(admit(m, req0)).toEqual({ ok: true, hit: 0 });
    expect(m.heldBlocks(req0)).toEqual([4]);
    // floor(55/16) = 3 full blocks are hashed (1,2,3), the partial block 4 is not.
    expect([1, 2, 3, 4].map((b) => pool.isHashed(b))).toEqual([true, true, true, false]);
    expect([1, 2, 3, 4].map((b) => pool.refCount(b))).toEqual([1, 1, 1, 1]);

    // req1: 48 common + 5: M = 52 -> floor(52/16) = 3 blocks hit = 48 tokens; 5 new -> 1 block (5).
    const req1 = seqOf(m, "req1", [...common, ...repeat(3, 5)]);
    expect(admit(m, req1)).toEqual({ ok: true, hit: 48 });
    expect([1, 2, 3].map((b) => pool.refCount(b))).toEqual([2, 2, 2]);
    expect(pool.refCount(5)).toBe(1);
    // 10 usable - 4 (req0) - 1 (block 5) = 5 free.
    expect(m.metrics().freePages).toBe(5);

    // Free req0 (tail first: 4 to the front) then req1 (5 to the front, 3,2,1 to the back).
    m.free(req0);
    m.free(req1);
    expect(m.metrics().freePages).toBe(10);
    expect(pool.freeQueueOrder()).toEqual([5, 4, 6, 7, 8, 9, 10, 3, 2, 1]);

    // req2 = common + 6: hit [1,2,3]; 6 new tokens -> 1 fresh block from the front: 5. Free 10 - 3 - 1 = 6.
    const req2 = seqOf(m, "req2", [...common, ...repeat(3, 6)]);
    expect(admit(m, req2)).toEqual({ ok: true, hit: 48 });
    expect(pool.refCount(5)).toBe(1);
    expect(m.metrics().freePages).toBe(6);

    // Free req2; req3 = [99]*160 takes all 10 blocks in queue order.
    m.free(req2);
    expect(pool.freeQueueOrder()).toEqual([5, 4, 6, 7, 8, 9, 10, 3, 2, 1]);
    const req3 = seqOf(m, "req3", repeat(99, 160));
    expect(admit(m, req3)).toEqual({ ok: true, hit: 0 });
    expect(m.metrics().freePages).toBe(0);
    expect(pool.freeQueueOrder()).toEqual([]);
  });
});

describe("T2 test_evict (11 pages, B 16, new free order)", () => {
  it("frees tail first, evicts from the front and hits the surviving prefix", () => {
    const m = manager(11, [FA16]);
    const pool = poolOf(m);
    // req0 = range(87): cdiv(87,16) = 6 blocks [1..6]; req1 = range(87,135) (48 tokens) -> [7,8,9].
    const req0 = seqOf(m, "req0", range(0, 87));
    const req1 = seqOf(m, "req1", range(87, 135));
    admit(m, req0);
    admit(m, req1);
    expect(m.metrics().freePages).toBe(1);
    // req0: 6 is partial (unhashed) -> front; 5..1 hashed -> back, tail first.
    m.free(req0);
    expect(pool.freeQueueOrder()).toEqual([6, 10, 5, 4, 3, 2, 1]);
    m.free(req1);
    expect(pool.freeQueueOrder()).toEqual([6, 10, 5, 4, 3, 2, 1, 9, 8, 7]);
    // req2 = range(35): M = 34 -> 2 blocks hit (1,2) = 32 tokens; 3 new tokens -> 1 block from the front: 6.
    const req2 = seqOf(m, "req2", range(0, 35));
    expect(admit(m, req2)).toEqual({ ok: true, hit: 32 });
    expect(pool.refCount(6)).toBe(1);
    // 10 - 2 touched - 1 new = 7.
    expect(m.metrics().freePages).toBe(7);
    expect(pool.freeQueueOrder()).toEqual([10, 5, 4, 3, 9, 8, 7]);
  });
});

describe("T3 test_prefill_hybrid_model (21 pages, B 16; full, SW 32, SW 32)", () => {
  const groups = [FA16, group("sliding_window", 16, { window_tokens: 32, name: "sw1" }), group("sliding_window", 16, { window_tokens: 32, name: "sw2" })];
  const common = [...repeat(0, 16), ...repeat(1, 16), ...repeat(2, 16)];

  function setup() {
    const m = manager(21, groups);
    admit(m, seqOf(m, "req0", [...common, ...repeat(3, 7)]));
    return { m };
  }

  it("allocates per group in group order and hits with nulls left of the window", () => {
    const { m } = setup();
    const pool = poolOf(m);
    // req0: 4 blocks per group: [1..4], [5..8], [9..12]; the partial blocks 4, 8, 12 unhashed.
    expect([4, 8, 12].map((b) => pool.isHashed(b))).toEqual([false, false, false]);
    expect([1, 2, 3, 5, 6, 7, 9, 10, 11].every((b) => pool.isHashed(b))).toBe(true);
    const req1 = seqOf(m, "req1", [...common, ...repeat(3, 5)]);
    const hit = m.findPrefixHit(req1);
    expect(hit.tokens).toBe(48);
    // Blocks of the hit: ([1,2,3], [0,6,7], [0,10,11]); S(48) = 17 -> 1 null block per SW group.
    expect(m.allocateSlots(req1, { computedTokens: 0, newTokens: 5, hit })).toBe(true);
    // 1 + 2 + 2 touched blocks get a second reference; new blocks 13, 14, 15 (one per group).
    expect([1, 2, 3, 6, 7, 10, 11].map((b) => pool.refCount(b))).toEqual([2, 2, 2, 2, 2, 2, 2]);
    expect([5, 9].map((b) => pool.refCount(b))).toEqual([1, 1]);
    expect([13, 14, 15].map((b) => pool.refCount(b))).toEqual([1, 1, 1]);
    expect(m.heldBlocks(req1)).toEqual([4, 3, 3]);
    // The exact tables: hit blocks, the SW null left of the window, then 13, 14, 15.
    expect(tablesOf(req1)).toEqual([
      [1, 2, 3, 13],
      [0, 6, 7, 14],
      [0, 10, 11, 15],
    ]);
  });

  // Hidden entries (hash index h in group g); expected hit for the 53-token prompt, in blocks.
  const cases: [string, [number, number][], number][] = [
    [
      "h0 in g1 and g2",
      [
        [0, 1],
        [0, 2],
      ],
      3,
    ],
    ["h0 in g0", [[0, 0]], 0],
    [
      "h2 in every group",
      [
        [2, 0],
        [2, 1],
        [2, 2],
      ],
      2,
    ],
    ["h2 in g0", [[2, 0]], 2],
    ["h2 in g1", [[2, 1]], 2],
    ["h2 in g2", [[2, 2]], 2],
    [
      "h2 in g0 plus h0 in g1 and g2",
      [
        [2, 0],
        [0, 1],
        [0, 2],
      ],
      0,
    ],
  ];
  it.each(cases)("hiding %s gives a hit of %#", (_name, hidden, blocks) => {
    const { m } = setup();
    const hashes = computeBlockHashes(common, 16).map((h) => h.blockHash);
    for (const [h, g] of hidden) poolOf(m).uncache(g, hashes[h]!);
    const req1 = seqOf(m, "req1", [...common, ...repeat(3, 5)]);
    expect(m.findPrefixHit(req1).tokens).toBe(blocks * 16);
  });
});

describe("README example", () => {
  it("hits 48 of 55 tokens and holds 5 of 10 pages", () => {
    const pool = new KvCacheManager({
      numPages: 11,
      groups: [{ name: "kv", kind: "full_attention", num_layers: 1, block_size_tokens: 16, prefix_cacheable: true }],
      enablePrefixCaching: true,
      vllmVersion: "0.31.0",
    });
    const prompt = createPromptTokens(Uint32Array.from({ length: 55 }, (_, i) => i));
    const a = pool.createSequence("a", prompt);
    expect(pool.allocateSlots(a, { computedTokens: 0, newTokens: 55 })).toBe(true);
    pool.commitComputed(a, 55);
    const b = pool.createSequence("b", prompt);
    const hit = pool.findPrefixHit(b);
    // M = 54 -> floor(54/16) = 3 blocks = 48 tokens.
    expect(hit.tokens).toBe(48);
    expect(pool.allocateSlots(b, { computedTokens: 0, newTokens: 55 - 48, hit })).toBe(true);
    // a: 4 pages; b: 3 shared + 1 -> 5 used of 10; usage 1 - 5/10 = 0.5.
    expect(pool.metrics()).toEqual({ usablePages: 10, usedPages: 5, cachedEvictablePages: 0, freePages: 5, usage: 0.5 });
  });
});
