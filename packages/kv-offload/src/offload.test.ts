import { createPromptTokens, KvCacheManager, type PromptTokens } from "@kvsim/kv-pool";
import type { CacheGroup } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { KvOffload, LookupMemo } from "./offload.js";
import { TierStore, type TierConfig } from "./tier-store.js";

const tier = (over: Partial<TierConfig> = {}): TierStore =>
  new TierStore({ name: "cpu", capacityBytes: 1e9, readBytesPerMs: 400, writeBytesPerMs: 4000, latencyMs: 0.5, store: "write_through", ...over });

const full = (bytes: number, blockSize = 4): CacheGroup => ({
  name: "full",
  kind: "full_attention",
  num_layers: 1,
  block_size_tokens: blockSize,
  prefix_cacheable: true,
  transfer_bytes_per_block: bytes,
});

function prompt(n: number, seed = 1): PromptTokens {
  const t = new Uint32Array(n);
  for (let i = 0; i < n; i++) t[i] = seed * 1000 + i;
  return createPromptTokens(t);
}

/** An offload over `tiers` for `groups`, its keys read from a pool of those groups. */
function offload(tiers: TierStore[], groups: CacheGroup[], caching = true): KvOffload {
  const off = new KvOffload(tiers, groups, caching);
  off.attach(new KvCacheManager({ numPages: 2, groups, enablePrefixCaching: true, vllmVersion: "0.32.0" }));
  return off;
}

/** The GPU pool cached blocks [from, to) of `p` in group `g` at `atMs`. */
function cache(off: KvOffload, p: PromptTokens, g: number, blockSize: number, from: number, to: number, atMs: number): void {
  const view = new KvCacheManager({ numPages: 2, groups: [full(1, blockSize)], enablePrefixCaching: true, vllmVersion: "0.32.0" }).lookupKeys(p, blockSize);
  const keys = new Int32Array(2 * (to - from));
  for (let i = from; i < to; i++) {
    keys[2 * (i - from)] = view.blockHi(i);
    keys[2 * (i - from) + 1] = view.blockLo(i);
  }
  off.clockMs = atMs;
  off.cached(g, keys, to - from, from);
}

/** The halves of block i's key. */
function key(p: PromptTokens, blockSize: number, i: number): [number, number] {
  const view = new KvCacheManager({ numPages: 2, groups: [full(1, blockSize)], enablePrefixCaching: true, vllmVersion: "0.32.0" }).lookupKeys(p, blockSize);
  return [view.blockHi(i), view.blockLo(i)];
}

describe("a linear model's tier hit", () => {
  // Block 4 tokens, 100 bytes per token: 400 bytes a block. Stores at 4,000 B/ms take 0.1 ms a
  // block, one after another; loads at 400 B/ms take 1 ms a block, after a 0.5 ms latency.
  it("continues the GPU hit with the blocks the tier holds, and the load takes latency + bytes / read bandwidth", () => {
    const cpu = tier();
    const off = offload([cpu], [full(400)], true);
    const p = prompt(17); // four whole blocks and one token
    cache(off, p, 0, 4, 0, 4, 0);
    // Ready at 0.1, 0.2, 0.3 and 0.4 ms.
    expect([...cpu.entries()].map((e) => e.readyAtMs)).toEqual([0.1, 0.2, 0.30000000000000004, 0.4]);
    // At 1 ms, with the first block on the GPU: blocks 1-3 from the tier, up to 16 tokens (17 - 1 rounded down to blocks).
    const hit = off.lookup(p, 4, 16, 1)!;
    expect(hit.tokens).toBe(16);
    expect(hit.tokensPerTier).toEqual([12]);
    expect(hit.bytesPerTier).toEqual([1200]);
    // 1 + 0.5 latency + 1,200 / 400 = 4.5 ms.
    expect(off.load(hit, 1).doneMs).toBe(4.5);
    expect(cpu.counters).toMatchObject({ loads: 1, blocksLoaded: 3, bytesLoaded: 1200, tokensServed: 12, blocksStored: 4, bytesStored: 1600 });
  });

  it("does not see a block whose store has not completed", () => {
    const off = offload([tier()], [full(400)], true);
    const p = prompt(17);
    cache(off, p, 0, 4, 0, 4, 0);
    // At 0.25 ms blocks 0 and 1 are stored, block 2 (ready at 0.3) is not: a hit of blocks 0-1.
    expect(off.lookup(p, 0, 16, 0.25)?.tokens).toBe(8);
    expect(off.lookup(p, 8, 16, 0.25)).toBeUndefined();
  });

  it("adds nothing past the GPU hit, at the prompt's last token, or with prefix caching off", () => {
    const p = prompt(16);
    const on = offload([tier()], [full(400)], true);
    cache(on, p, 0, 4, 0, 4, 0);
    // 16 tokens: at most 15 may be hit, so 12 (three blocks).
    expect(on.lookup(p, 0, 15, 1)?.tokens).toBe(12);
    expect(on.lookup(p, 12, 15, 1)).toBeUndefined();
    const off = offload([tier()], [full(400)], false);
    cache(off, p, 0, 4, 0, 4, 0);
    expect(off.lookup(p, 0, 15, 1)).toBeUndefined();
  });

  it("a retried lookup resumes its scan, and starts over once a tier evicted a block", () => {
    // Room for three 400-byte blocks.
    const cpu = tier({ capacityBytes: 1200 });
    const off = offload([cpu], [full(400)], true);
    const p = prompt(17);
    const memo = new LookupMemo();
    cache(off, p, 0, 4, 0, 2, 0);
    expect(off.lookup(p, 0, 16, 1, memo)?.tokens).toBe(8);
    expect([memo.gpuHitTokens, memo.fullEnd]).toEqual([0, 8]);
    // Block 2 arrives: the retried lookup goes on from 8 and finds 12.
    cache(off, p, 0, 4, 2, 3, 1);
    expect(off.lookup(p, 0, 16, 2, memo)?.tokens).toBe(12);
    // Another prompt's block evicts block 0 (the least recently used): the memo no longer holds and
    // the scan starts over: nothing from block 0.
    cache(off, prompt(8, 2), 0, 4, 0, 1, 3);
    expect(cpu.counters.blocksEvicted).toBe(1);
    expect(off.lookup(p, 0, 16, 4, memo)).toBeUndefined();
    expect(memo.fullEnd).toBe(0);
  });

  it("queues loads on the read channel in arrival order; the latency overlaps", () => {
    const cpu = tier({ readBytesPerMs: 100, latencyMs: 2 });
    // 1,000 bytes at 100 B/ms: 10 ms each. The first, from 0: done at 0 + 2 + 10 = 12, channel free at 10.
    expect(cpu.readDone(1000, 0)).toBe(12);
    // The second, asked at 5, starts at 10: done at 10 + 2 + 10 = 22.
    expect(cpu.readDone(1000, 5)).toBe(22);
  });
});

describe("offloaded blocks of several GPU blocks (vLLM's block_size, LMCache's chunks)", () => {
  // Offloaded blocks of 8 tokens = two 4-token GPU blocks of 400 bytes: 800 bytes each, keyed by
  // their second GPU block.
  it("stores an offloaded block once its last GPU block is cached; a hit is whole offloaded blocks, loaded from the GPU hit's end", () => {
    const cpu = tier();
    const off = new KvOffload([cpu], [full(400)], true, 8);
    off.attach(new KvCacheManager({ numPages: 2, groups: [full(400)], enablePrefixCaching: true, vllmVersion: "0.32.0" }));
    const p = prompt(25); // six whole GPU blocks, three offloaded blocks
    // GPU blocks 0-2 cached: only block 1 ends an offloaded block (0-1); 2-5 complete the other two.
    cache(off, p, 0, 4, 0, 3, 0);
    expect([...cpu.entries()].map((e) => [e.lo, e.bytes])).toEqual([[key(p, 4, 1)[1] | 0, 800]]);
    cache(off, p, 0, 4, 3, 6, 0);
    expect(cpu.blocks).toBe(3);
    // A GPU hit of 4 tokens ends inside the first offloaded block: the hit reads it from there and
    // goes to 24 (at most 24, the prompt's last token excluded, in whole offloaded blocks); it
    // loads GPU blocks 1-5, 5 x 400 bytes, 20 tokens.
    const hit = off.lookup(p, 4, 24, 1)!;
    expect([hit.tokens, hit.bytesPerTier[0], hit.tokensPerTier[0], hit.slots.length]).toEqual([24, 2000, 20, 3]);
    // Without the middle offloaded block the hit ends at 8.
    const cpu2 = tier();
    const off2 = new KvOffload([cpu2], [full(400)], true, 8);
    off2.attach(new KvCacheManager({ numPages: 2, groups: [full(400)], enablePrefixCaching: true, vllmVersion: "0.32.0" }));
    cache(off2, p, 0, 4, 0, 2, 0);
    cache(off2, p, 0, 4, 4, 6, 0);
    expect(off2.lookup(p, 0, 24, 1)?.tokens).toBe(8);
    expect(() => new KvOffload([tier()], [full(400)], true, 6)).toThrow(/multiple of every cache group's block/);
    expect(() => new KvOffload([tier({ store: "on_evict" })], [full(400)], true, 8)).toThrow(/on_evict/);
  });
});

describe("LRU within capacity", () => {
  // Three 100-byte blocks fit; stores at 100 B/ms take 1 ms each. Keys (group 0, hi 0, lo n).
  const small = () => new TierStore({ name: "cpu", capacityBytes: 300, readBytesPerMs: 100, writeBytesPerMs: 100, latencyMs: 0, store: "write_through" });
  const evictedInto = (out: number[]) => (_g: number, _hi: number, lo: number) => void out.push(lo);

  it("evicts the least recently used block; a touched block stays", () => {
    const t = small();
    for (const k of [1, 2, 3]) t.store(0, 0, k, 100, 0, undefined);
    const out: number[] = [];
    // At 5 ms every store is done (1, 2, 3 ms): storing 4 evicts 1, the oldest.
    t.store(0, 0, 4, 100, 5, evictedInto(out));
    expect(out).toEqual([1]);
    // 2 is used again, so storing 5 evicts 3.
    t.touch(t.find(0, 0, 2));
    t.store(0, 0, 5, 100, 6, evictedInto(out));
    expect(out).toEqual([1, 3]);
    expect([...t.entries()].map((e) => e.lo)).toEqual([4, 2, 5]);
    expect(t.usedBytes).toBe(300);
    expect(t.counters.blocksEvicted).toBe(2);
    expect(t.find(0, 0, 1)).toBe(-1);
  });

  it("never evicts a pinned block or one still being stored: the new block is dropped", () => {
    const t = small();
    for (const k of [1, 2, 3]) t.store(0, 0, k, 100, 0, undefined);
    // At 2.5 ms block 3 is still being stored (ready at 3); pin 1 and 2: nothing can go.
    t.pin(t.find(0, 0, 1));
    t.pin(t.find(0, 0, 2));
    expect(t.store(0, 0, 4, 100, 2.5, undefined)).toBe(false);
    expect(t.counters.blocksDropped).toBe(1);
    t.unpin(t.find(0, 0, 2));
    expect(t.store(0, 0, 4, 100, 2.5, undefined)).toBe(true);
    expect(t.find(0, 0, 2)).toBe(-1);
    expect(() => {
      t.unpin(t.find(0, 0, 3));
    }).toThrow(/unpinned more often/);
  });

  it("a block already held is not stored twice; another group's block under the same key is another block", () => {
    const t = small();
    expect(t.store(0, 7, 1, 100, 0, undefined)).toBe(true);
    expect(t.store(0, 7, 1, 100, 0, undefined)).toBe(false);
    expect(t.counters.blocksStored).toBe(1);
    expect(t.store(1, 7, 1, 100, 0, undefined)).toBe(true);
    // Same low half, another high half: another block.
    expect(t.store(0, 8, 1, 100, 0, undefined)).toBe(true);
    expect(t.blocks).toBe(3);
  });
});

describe("tiers in order", () => {
  it("a tier that keeps evictions takes what the tier above evicts, and a hit reads each block from the first tier holding it", () => {
    // cpu holds two 400-byte blocks; disk keeps what cpu evicts.
    const cpu = tier({ capacityBytes: 800 });
    const disk = tier({ name: "disk", store: "on_evict", readBytesPerMs: 40, latencyMs: 1 });
    const off = offload([cpu, disk], [full(400)], true);
    const p = prompt(13);
    // Stored at 0, 1 and 2 ms (each store takes 0.1 ms): the third evicts block 0 into disk.
    cache(off, p, 0, 4, 0, 1, 0);
    cache(off, p, 0, 4, 1, 2, 1);
    cache(off, p, 0, 4, 2, 3, 2);
    expect([...cpu.entries()].length).toBe(2);
    expect([...disk.entries()].length).toBe(1);
    const hit = off.lookup(p, 0, 12, 10)!;
    expect(hit.tokens).toBe(12);
    expect(hit.tokensPerTier).toEqual([8, 4]);
    expect(hit.bytesPerTier).toEqual([800, 400]);
    // cpu: 10 + 0.5 + 800 / 400 = 12.5; disk: 10 + 1 + 400 / 40 = 21: done when the slower is.
    expect(off.load(hit, 10).doneMs).toBe(21);
  });

  it("the first tier keeping evictions takes the GPU pool's removed blocks", () => {
    const cpu = tier({ store: "on_evict" });
    const off = offload([cpu], [full(400)], true);
    const p = prompt(9);
    cache(off, p, 0, 4, 0, 2, 0);
    expect(cpu.blocks).toBe(0);
    off.clockMs = 3;
    for (const i of [0, 1]) off.evicted(0, ...key(p, 4, i));
    expect(cpu.blocks).toBe(2);
    expect(off.lookup(p, 0, 8, 4)?.tokens).toBe(8);
  });
});

describe("a hybrid model's tier hit", () => {
  // Full attention 100 B a block, a sliding window of 6 tokens 50 B a block, a Mamba-type state
  // 1,000 B a block, all in blocks of 4 tokens.
  const groups: CacheGroup[] = [
    full(100),
    { name: "swa", kind: "sliding_window", num_layers: 1, block_size_tokens: 4, window_tokens: 6, prefix_cacheable: true, transfer_bytes_per_block: 50 },
    { name: "mamba", kind: "state", num_layers: 1, block_size_tokens: 4, prefix_cacheable: true, transfer_bytes_per_block: 1000 },
  ];

  function setup() {
    const cpu = tier({ writeBytesPerMs: 1e9 });
    const off = offload([cpu], groups, true);
    const p = prompt(33); // eight whole blocks
    // Full attention and window blocks 0-7; states only at 16 and 24 tokens (blocks 3 and 5).
    cache(off, p, 0, 4, 0, 8, 0);
    cache(off, p, 1, 4, 0, 8, 0);
    cache(off, p, 2, 4, 3, 4, 0);
    cache(off, p, 2, 4, 5, 6, 0);
    return { off, p, cpu };
  }

  it("ends where every group has what it needs: the state at the hit's end, the window's blocks before it", () => {
    const { off, p } = setup();
    // 32 and 28 have no state; 24 has: full attention blocks 0-5 (600 B), window blocks in the
    // window of token 24, floor((24 - 6 + 1) / 4) = 4 onwards: 4 and 5 (100 B), one state (1,000 B).
    const hit = off.lookup(p, 0, 32, 1)!;
    expect(hit.tokens).toBe(24);
    expect(hit.bytesPerTier).toEqual([600 + 100 + 1000]);
    expect(hit.tokensPerTier).toEqual([24]);
  });

  it("loads only what the GPU hit lacks", () => {
    const { off, p } = setup();
    // GPU hit of 8 tokens: full attention blocks 2-5 (400 B), window 4-5 (100 B), the state (1,000 B).
    const hit = off.lookup(p, 8, 32, 1)!;
    expect(hit.tokens).toBe(24);
    expect(hit.bytesPerTier).toEqual([1500]);
    expect(hit.tokensPerTier).toEqual([16]);
  });

  it("a missing window block ends the hit earlier", () => {
    // Without window block 4 the hit cannot end at 24 (it needs 4 and 5) and 20 has no state; 16
    // (state block 3; window blocks from floor((16 - 6 + 1) / 4) = 2: 2 and 3) holds.
    const p = prompt(33);
    const off = offload([tier({ writeBytesPerMs: 1e9 })], groups, true);
    cache(off, p, 0, 4, 0, 8, 0);
    cache(off, p, 1, 4, 0, 4, 0);
    cache(off, p, 1, 4, 5, 8, 0);
    cache(off, p, 2, 4, 3, 4, 0);
    cache(off, p, 2, 4, 5, 6, 0);
    const hit = off.lookup(p, 0, 32, 1)!;
    expect(hit.tokens).toBe(16);
    expect(hit.bytesPerTier).toEqual([400 + 100 + 1000]);
  });
});
