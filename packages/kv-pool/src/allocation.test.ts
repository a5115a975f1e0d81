import { engineSettings, type Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { poolOf } from "./kv-cache-manager.js";
import { poolGroupsForProfile } from "./pool-groups.js";
import { createPromptTokens } from "./prompt-tokens.js";
import { admit, group, manager, range, repeat, seqOf, tablesOf } from "./test-helpers.js";

describe("allocation", () => {
  it("is all-or-nothing: a failed step keeps its window blocks and the queue untouched", () => {
    // Full + SW (W 16), B 16, 9 usable pages.
    const m = manager(10, [group("full_attention", 16), group("sliding_window", 16, { window_tokens: 16 })]);
    const pool = poolOf(m);
    const a = seqOf(m, "a", range(0, 64));
    // First chunk of 48 tokens: cdiv(48,16) = 3 full + 3 SW blocks (C = 0: nothing trimmed).
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 48 })).toBe(true);
    m.commitComputed(a, 48);
    const b = seqOf(m, "b", range(100, 132));
    expect(m.allocateSlots(b, { computedTokens: 0, newTokens: 16 })).toBe(true); // 1 + 1 blocks
    // 9 usable - 6 (a) - 2 (b) = 1 free.
    expect(m.metrics().freePages).toBe(1);
    // a's next chunk (48 -> 64): S(48) = 33 -> 2 SW blocks would be freed (refcount 1 each),
    // full needs 1 and SW needs 1: need 2 <= 1 free + 2 released -> fits.
    expect(m.pagesNeeded(a, { computedTokens: 48, newTokens: 16 })).toBe(2);
    // b's second chunk (16 -> 32) needs 1 + 1 with only 1 free and nothing to release (S(16) = 1 token): refused.
    expect(m.allocateSlots(b, { computedTokens: 16, newTokens: 16 })).toBe(false);
    const queue = pool.freeQueueOrder();
    const held = m.heldBlocks(b);
    // The failed call changed nothing: b still holds 1 + 1, one page is free.
    expect(held).toEqual([1, 1]);
    expect(queue).toHaveLength(1);
    // a's step fits only thanks to its 2 released window blocks: SW table [0, 0, x, new] holds 2.
    expect(m.allocateSlots(a, { computedTokens: 48, newTokens: 16 })).toBe(true);
    expect(m.heldBlocks(a)).toEqual([4, 2]);
    // 1 free + 2 released - 2 taken = 1.
    expect(m.metrics().freePages).toBe(1);
  });

  it("a failed allocation does not run remove-skipped (deviation from vLLM)", () => {
    // SW only (W 16, B 16), 3 usable pages.
    const m = manager(4, [group("sliding_window", 16, { window_tokens: 16 })]);
    const a = seqOf(m, "a", range(0, 80));
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 48 })).toBe(true); // 3 blocks, pool full
    m.commitComputed(a, 48);
    // Step 48 -> 82 (two appended tokens): cdiv(82,16) = 6 -> 3 new blocks; S(48) = 33 ->
    // floor(33/16) = 2 blocks would be released: 3 > 0 free + 2 released -> refused, nothing released.
    a.appendToken(1);
    a.appendToken(2);
    const before = poolOf(m).freeQueueOrder();
    expect(m.allocateSlots(a, { computedTokens: 48, newTokens: 34 })).toBe(false);
    expect(m.heldBlocks(a)).toEqual([3]);
    expect(poolOf(m).freeQueueOrder()).toEqual(before);
  });

  it("with prefix caching off: no hit, no hash, every freed block to the front", () => {
    const m = manager(11, [group("full_attention", 16)], { caching: false });
    const a = seqOf(m, "a", repeat(0, 48));
    expect(admit(m, a)).toEqual({ ok: true, hit: 0 });
    m.free(a); // [3,2,1] prepended in that order
    expect(poolOf(m).freeQueueOrder()).toEqual([3, 2, 1, 4, 5, 6, 7, 8, 9, 10]);
    expect(m.findPrefixHit(seqOf(m, "b", repeat(0, 48))).tokens).toBe(0);
    expect(m.metrics().cachedEvictablePages).toBe(0);
  });

  it("a full-attention group that is not prefix-cacheable makes every hit 0 and caches nothing", () => {
    const m = manager(11, [group("full_attention", 16, { prefix_cacheable: false })]);
    admit(m, seqOf(m, "a", range(0, 48)));
    expect(m.findPrefixHit(seqOf(m, "b", range(0, 48))).tokens).toBe(0);
    expect(poolOf(m).cacheSnapshot()).toEqual([]);
  });

  it("a hit never covers the whole prompt", () => {
    const m = manager(11, [group("full_attention", 16)]);
    admit(m, seqOf(m, "a", range(0, 32)));
    // Same 32 tokens: M = 31 -> 1 block (16 tokens), not 2.
    expect(m.findPrefixHit(seqOf(m, "b", range(0, 32))).tokens).toBe(16);
    // peek on a prompt not yet on the rank: 33 tokens -> M = 32 -> 2 blocks = 32 tokens.
    expect(m.peekPrefixHitTokens(createPromptTokens(Uint32Array.from(range(0, 33))))).toBe(32);
    expect(m.peekPrefixHitTokens(createPromptTokens(Uint32Array.from(range(0, 32))))).toBe(16);
  });

  it("aligns a hybrid hit to the lcm of the block sizes (full B 16, SW B 32 -> 32)", () => {
    const m = manager(40, [group("full_attention", 16), group("sliding_window", 32, { window_tokens: 32 })]);
    admit(m, seqOf(m, "a", range(0, 100)));
    // M = 99; full: floor(99/16) = 6 blocks = 96, aligned to 32 -> 96; SW (need cdiv(31,32) = 1):
    // block 2 (64..96) cached -> 96. Hit 96.
    expect(m.findPrefixHit(seqOf(m, "b", range(0, 100))).tokens).toBe(96);
    // 90 tokens: M = 89 -> full 5 blocks (80) -> aligned down to 64; SW block 1 -> 64.
    expect(m.findPrefixHit(seqOf(m, "c", range(0, 90))).tokens).toBe(64);
  });

  it("refuses a stale hit, a hit on a running sequence and a step beyond the tokens", () => {
    const m = manager(3, [group("full_attention", 4)]);
    const a = seqOf(m, "a", range(0, 8));
    admit(m, a);
    m.free(a);
    const b = seqOf(m, "b", range(0, 8));
    const hit = m.findPrefixHit(b);
    expect(hit.tokens).toBe(4);
    // Another request evicts both cached blocks before b allocates.
    admit(m, seqOf(m, "x", range(50, 58)));
    expect(() => m.allocateSlots(b, { computedTokens: 0, newTokens: 4, hit })).toThrow(/stale/);
    const c = seqOf(manager(3, [group("full_attention", 4)]), "c", range(0, 4));
    expect(() => m.allocateSlots(c, { computedTokens: 0, newTokens: 4 })).toThrow(/not created by this manager/);
    const d = seqOf(m, "d", range(0, 4));
    expect(() => m.allocateSlots(d, { computedTokens: 0, newTokens: 5 })).toThrow(RangeError);
    expect(() => m.allocateSlots(d, { computedTokens: 0, newTokens: 0 })).toThrow(RangeError);
  });
});

describe("prefillChunking", () => {
  const mamba = group("state", 16, { name: "m", prefill_checkpoint_blocks: 1 });
  it("splits chunks at block boundaries with a Mamba-type group and caching on; on 0.32.0 checkpoint blocks free the final chunk", () => {
    expect(manager(10, [group("full_attention", 16), mamba], { version: "0.31.0" }).prefillChunking).toBe("align_split");
    expect(manager(10, [group("full_attention", 16), mamba], { version: "0.32.0" }).prefillChunking).toBe("whole_blocks_before_final");
    expect(manager(10, [group("full_attention", 16), group("state", 16, { name: "m" })], { version: "0.32.0" }).prefillChunking).toBe("align_split");
    expect(manager(10, [group("full_attention", 16), mamba], { version: "0.31.0", caching: false }).prefillChunking).toBe("any");
    expect(manager(10, [group("full_attention", 16), group("state", 16, { prefix_cacheable: false })]).prefillChunking).toBe("any");
  });
});

describe("poolGroupsForProfile", () => {
  const linear: Profile = { schema_version: 1, model: "m", vllm_version: "0.31.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 };
  it("makes a linear profile one full-attention group 'kv' of the engine block size", () => {
    // Default block 16: 1000 x 16 = 16,000 bytes per block.
    expect(poolGroupsForProfile(linear, engineSettings())).toEqual([
      { name: "kv", kind: "full_attention", num_layers: 1, block_size_tokens: 16, prefix_cacheable: true, transfer_bytes_per_block: 16_000 },
    ]);
    // Block 32: 32,000.
    expect(poolGroupsForProfile(linear, engineSettings({ block_size: 32 }))[0]).toMatchObject({ block_size_tokens: 32, transfer_bytes_per_block: 32_000 });
  });
  it("keeps a grouped profile's groups", () => {
    const g = group("sliding_window", 16, { window_tokens: 64 });
    const grouped: Profile = { schema_version: 1, model: "m", vllm_version: "0.31.0", tensor_parallel_size: 1, page_size_bytes: 10, kv_cache_groups: [g] };
    expect(poolGroupsForProfile(grouped, engineSettings())).toEqual([g]);
  });
});

describe("Mamba-type prefix hits (align mode, B 16)", () => {
  const groups = [group("full_attention", 16), group("state", 16, { name: "mamba" })];

  it("hit when a chunk ended exactly on the boundary: the state checkpoint at 32", () => {
    const m = manager(20, groups);
    const a = seqOf(m, "a", range(0, 40));
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 32 })).toBe(true);
    m.commitComputed(a, 32); // 32 = 2 x 16: the running state block (index 1) is cached
    expect(m.allocateSlots(a, { computedTokens: 32, newTokens: 8 })).toBe(true);
    m.commitComputed(a, 40);
    // Groups allocate in group order each step: chunk 1 gives full 1, 2 and Mamba 3 (index 1);
    // chunk 2 gives full 4 and Mamba 5 (index 2). The state at 32 (block 3) is kept until C passes it.
    expect(tablesOf(a)).toEqual([
      [1, 2, 4],
      [0, 3, 5],
    ]);
    const b = seqOf(m, "b", range(0, 40));
    const hit = m.findPrefixHit(b);
    // M = 39 -> full 2 blocks (32); the Mamba state at 32 exists -> 32.
    expect(hit.tokens).toBe(32);
    // Full: cdiv(40,16) - 2 = 1 new; Mamba: 1 new running block (the hit state is held by a: not evictable).
    expect(m.pagesNeeded(b, { computedTokens: 0, newTokens: 8, hit })).toBe(2);
    expect(m.allocateSlots(b, { computedTokens: 0, newTokens: 8, hit })).toBe(true);
    // b reuses full 1, 2 and the state block 3; its new blocks come next from the queue: 6 and 7.
    expect(tablesOf(b)).toEqual([
      [1, 2, 6],
      [0, 3, 7],
    ]);
  });

  it("no hit when the prompt was prefilled in one unaligned pass (the zero-hit shape of vLLM issue 45238)", () => {
    const m = manager(20, groups);
    const a = seqOf(m, "a", range(0, 40));
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 40 })).toBe(true);
    m.commitComputed(a, 40); // full blocks 0, 1 cached; no state at 16 or 32
    expect(m.findPrefixHit(seqOf(m, "b", range(0, 40))).tokens).toBe(0);
  });
});

describe("preemption", () => {
  it("a preempted request finds its own prompt and output blocks in the cache", () => {
    const m = manager(10, [group("full_attention", 4)]);
    const a = seqOf(m, "a", [1, 2, 3, 4, 5]);
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 5 })).toBe(true);
    m.commitComputed(a, 5);
    let computed = 5;
    // Decode 4 tokens: 9 tokens, floor(9/4) = 2 full blocks (the second one holds 3 outputs).
    for (const t of [6, 7, 8, 9]) {
      a.appendToken(t);
      expect(m.allocateSlots(a, { computedTokens: computed, newTokens: 1 })).toBe(true);
      computed++;
      m.commitComputed(a, computed);
    }
    expect(a.numTokens).toBe(9);
    m.free(a);
    // Re-admission of the same sequence: M = 8 -> 2 blocks = 8 tokens hit, 1 to recompute.
    const hit = m.findPrefixHit(a);
    expect(hit.tokens).toBe(8);
    expect(m.allocateSlots(a, { computedTokens: 0, newTokens: 1, hit })).toBe(true);
    expect(m.heldBlocks(a)).toEqual([3]);
  });
});

describe("memory grows with use", () => {
  it("1,024 pools of 16,777,216 pages each cost only what they use", () => {
    // Up-front storage would be about 1,024 x 2^24 x 36 bytes: far beyond any heap.
    const before = process.memoryUsage().arrayBuffers;
    const pools = Array.from({ length: 1024 }, () => manager(16_777_216, [group("full_attention", 16)]));
    for (const [i, m] of pools.entries()) {
      // 40 tokens: cdiv(40, 16) = 3 pages, the first 3 usable ones.
      const s = seqOf(m, `s${i}`, range(0, 40));
      expect(admit(m, s).ok).toBe(true);
      expect(tablesOf(s)).toEqual([[1, 2, 3]]);
      expect(m.metrics()).toMatchObject({ usablePages: 16_777_215, usedPages: 3, freePages: 16_777_212 });
    }
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(128 * 2 ** 20);
  });
});
