import { createPromptTokens, KvCacheManager, type PromptTokens } from "@kvsim/kv-pool";
import { KvOffloadSchema, type CacheGroup } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { KvOffload, LookupMemo } from "./offload.js";
import { TierStore, tierConfigs, type TierConfig } from "./tier-store.js";

// The edges of the rules: what a configuration refuses, what a group kind contributes, the
// boundaries of time and capacity. Blocks of 4 tokens; keys read from a real pool.

const tier = (over: Partial<TierConfig> = {}): TierStore =>
  new TierStore({ name: "cpu", capacityBytes: 1e9, readBytesPerMs: 100, writeBytesPerMs: 100, latencyMs: 0, store: "write_through", ...over });

const group = (g: Partial<CacheGroup> & Pick<CacheGroup, "name" | "kind">): CacheGroup => ({
  num_layers: 1,
  block_size_tokens: 4,
  prefix_cacheable: true,
  transfer_bytes_per_block: 100,
  ...g,
});
const FULL = group({ name: "fa", kind: "full_attention" });

function attached(tiers: TierStore[], groups: CacheGroup[], blockTokens?: number, caching = true): KvOffload {
  const off = new KvOffload(tiers, groups, caching, blockTokens);
  off.attach(new KvCacheManager({ numPages: 2, groups, enablePrefixCaching: true, vllmVersion: "0.32.0" }));
  return off;
}

const prompt = (n: number): PromptTokens => createPromptTokens(Uint32Array.from({ length: n }, (_, i) => 7000 + i));

/** Tells `off` that the pool cached blocks [from, to) of `p` in group `g` (every group keys by the same 4-token blocks). */
function cache(off: KvOffload, p: PromptTokens, g: number, from: number, to: number, atMs: number): void {
  const view = new KvCacheManager({ numPages: 2, groups: [FULL], enablePrefixCaching: true, vllmVersion: "0.32.0" }).lookupKeys(p, 4);
  const keys = new Int32Array(2 * (to - from));
  for (let i = from; i < to; i++) {
    keys[2 * (i - from)] = view.blockHi(i);
    keys[2 * (i - from) + 1] = view.blockLo(i);
  }
  off.clockMs = atMs;
  off.cached(g, keys, to - from, from);
}

describe("tierConfigs", () => {
  it("gives one TP rank a share of the worker's capacity (rounded down) and bandwidths in bytes per ms", () => {
    const spec = KvOffloadSchema.parse({ tiers: [{ name: "cpu", capacity: "10 B", read_bandwidth: "2 MB/s", write_bandwidth: "3 MB/s", latency_ms: 0.25 }] });
    expect(tierConfigs(spec, 4)).toEqual([
      { name: "cpu", capacityBytes: 2, readBytesPerMs: 2000, writeBytesPerMs: 3000, latencyMs: 0.25, store: "write_through" },
    ]);
    expect(() => tierConfigs(spec, 0)).toThrow(/tensorParallelSize must be an integer >= 1, got 0/);
    expect(() => tierConfigs(spec, 1.5)).toThrow(/got 1.5/);
  });
});

describe("what a configuration refuses", () => {
  it("a tier with a negative or fractional capacity, or a bandwidth of zero", () => {
    expect(() => tier({ capacityBytes: -1 })).toThrow(/tier cpu: capacity -1 bytes/);
    expect(() => tier({ capacityBytes: 1.5 })).toThrow(/capacity 1.5 bytes/);
    expect(() => tier({ readBytesPerMs: 0 })).toThrow(/tier cpu: bandwidths must be > 0/);
    expect(() => tier({ writeBytesPerMs: 0 })).toThrow(/bandwidths must be > 0/);
    expect(tier({ capacityBytes: 0 }).blocks).toBe(0);
  });

  it("no tier, a group without bytes per block, an offloaded block over 2^31 - 1 bytes, a lookup before attach", () => {
    expect(() => new KvOffload([], [FULL], true)).toThrow(/an offload needs at least one tier/);
    expect(() => new KvOffload([tier()], [{ ...FULL, transfer_bytes_per_block: undefined }], true)).toThrow(/cache group fa has no transfer_bytes_per_block/);
    // 2^29 bytes a block: one block fits, four (a 16-token offloaded block) do not; a state group holds one state whatever the size.
    expect(() => new KvOffload([tier()], [group({ name: "fa", kind: "full_attention", transfer_bytes_per_block: 2 ** 29 })], true, 4)).not.toThrow();
    expect(() => new KvOffload([tier()], [group({ name: "fa", kind: "full_attention", transfer_bytes_per_block: 2 ** 29 })], true, 16)).toThrow(
      /cache group fa: an offloaded block of 4 x 536870912 bytes/,
    );
    expect(() => new KvOffload([tier()], [group({ name: "m", kind: "state", transfer_bytes_per_block: 2 ** 30 })], true, 16)).not.toThrow();
    expect(() => new KvOffload([tier()], [FULL], true, 0)).toThrow(/offloaded block of 0 tokens/);
    expect(() => new KvOffload([tier()], [FULL], true, 4.5)).toThrow(/multiple of every cache group's block \(4 tokens\)/);
    expect(() => new KvOffload([tier()], [FULL], true).lookup(prompt(9), 0, 8, 0)).toThrow(/attach\(\) it first/);
  });
});

describe("what each group kind contributes", () => {
  it("a non-cacheable attention group or prefix caching off: never a hit; a ring (non-cacheable state) constrains nothing", () => {
    const p = prompt(13);
    for (const [groups, caching] of [
      [[{ ...FULL, prefix_cacheable: false }], true],
      [[FULL], false],
    ] as const) {
      const off = attached([tier()], [...groups], undefined, caching);
      cache(off, p, 0, 0, 3, 0);
      expect(off.lookup(p, 0, 12, 10)).toBeUndefined();
    }
    const ring = group({ name: "ring", kind: "state", prefix_cacheable: false, block_size_tokens: 3 });
    const off = attached([tier()], [FULL, ring]);
    cache(off, p, 0, 0, 3, 0);
    // The ring's block size (3) does not enter the hit's unit, its blocks are never stored, and it loads nothing.
    cache(off, p, 1, 0, 3, 0);
    expect(off.tiers[0]!.blocks).toBe(3);
    expect(off.lookup(p, 0, 12, 10)).toMatchObject({ tokens: 12, bytesPerTier: [300] });
    expect(attached([tier()], [ring]).lookup(p, 0, 12, 10)).toBeUndefined();
  });

  it("a convolution group is a window group; a state-only model's tokens go to the tier of its state", () => {
    const p = prompt(17);
    const conv = group({ name: "conv", kind: "convolution", window_tokens: 3, transfer_bytes_per_block: 10 });
    const off = attached([tier()], [FULL, conv]);
    cache(off, p, 0, 0, 4, 0);
    cache(off, p, 1, 0, 4, 0);
    // Window 3 at 16: floor((16 - 3 + 1) / 4) = 3, so only block 3 of the convolution loads.
    expect(off.lookup(p, 0, 16, 10)).toMatchObject({ tokens: 16, bytesPerTier: [400 + 10] });
    const mamba = group({ name: "m", kind: "state", transfer_bytes_per_block: 1000 });
    const stateOnly = attached([tier()], [mamba]);
    cache(stateOnly, p, 0, 1, 2, 0);
    // The state at 8 tokens: 8 tokens from the tier, one state's bytes.
    expect(stateOnly.lookup(p, 0, 16, 10)).toMatchObject({ tokens: 8, tokensPerTier: [8], bytesPerTier: [1000] });
    expect(stateOnly.lookup(p, 4, 16, 10)).toMatchObject({ tokens: 8, tokensPerTier: [4], bytesPerTier: [1000] });
  });

  it("an offloaded block of a Mamba-type group is its end state; of an attention group, its k GPU blocks", () => {
    const p = prompt(17);
    const mamba = group({ name: "m", kind: "state", transfer_bytes_per_block: 1000 });
    const off = attached([tier()], [FULL, mamba], 8);
    cache(off, p, 0, 0, 4, 0);
    cache(off, p, 1, 0, 4, 0);
    expect([...off.tiers[0]!.entries()].map((e) => [e.group, e.bytes])).toEqual([
      [0, 200],
      [0, 200],
      [1, 1000],
      [1, 1000],
    ]);
  });
});

describe("the listener", () => {
  it("stores nothing while muted (blocks just loaded), nothing for a ring's evictions, and a first on_evict tier keeps the rest", () => {
    const p = prompt(9);
    const off = attached([tier()], [FULL]);
    off.muted = true;
    cache(off, p, 0, 0, 2, 0);
    expect(off.tiers[0]!.blocks).toBe(0);
    off.muted = false;
    cache(off, p, 0, 0, 2, 0);
    expect(off.tiers[0]!.blocks).toBe(2);
    const onEvict = attached([tier({ store: "on_evict" })], [FULL, group({ name: "ring", kind: "state", prefix_cacheable: false })]);
    cache(onEvict, p, 0, 0, 2, 0);
    expect(onEvict.tiers[0]!.blocks).toBe(0);
    onEvict.evicted(1, 1, 2);
    expect(onEvict.tiers[0]!.blocks).toBe(0);
    onEvict.evicted(0, 1, 2);
    expect(onEvict.tiers[0]!.blocks).toBe(1);
    // A write-through tier ignores evictions.
    off.evicted(0, 5, 6);
    expect(off.tiers[0]!.find(0, 5, 6)).toBe(-1);
  });
});

describe("boundaries of time and capacity", () => {
  it("a block is visible from the very time its store completes, and evictable from then", () => {
    // 100 bytes at 100 B/ms: ready at exactly 1 ms.
    const t = tier({ capacityBytes: 100 });
    t.store(0, 0, 1, 100, 0, undefined);
    expect(t.ready(0, 0, 1, 0.999)).toBe(-1);
    expect(t.ready(0, 0, 1, 1)).toBe(t.find(0, 0, 1));
    expect(t.store(0, 0, 2, 100, 0.999, undefined)).toBe(false);
    expect(t.store(0, 0, 2, 100, 1, undefined)).toBe(true);
  });

  it("a store that exactly fills the capacity evicts nothing; the peak keeps the fullest", () => {
    const t = tier({ capacityBytes: 300 });
    t.store(0, 0, 1, 100, 0, undefined);
    t.store(0, 0, 2, 200, 0, undefined);
    expect([t.usedBytes, t.counters.blocksEvicted, t.counters.peakUsedBytes]).toEqual([300, 0, 300]);
    t.store(0, 0, 3, 50, 10, undefined);
    expect([t.usedBytes, t.counters.blocksEvicted, t.counters.peakUsedBytes]).toEqual([250, 1, 300]);
    // A block larger than the whole tier is dropped without evicting anything.
    expect(t.store(0, 0, 4, 301, 10, undefined)).toBe(false);
    expect([t.blocks, t.counters.blocksDropped]).toEqual([2, 1]);
  });

  it("holds more blocks than its first slots, each found again", () => {
    const t = tier();
    for (let k = 0; k < 100; k++) t.store(k % 3, k, 10 * k, 1, 0, undefined);
    for (let k = 0; k < 100; k++) expect(t.find(k % 3, k, 10 * k)).toBeGreaterThanOrEqual(0);
    expect([...t.entries()].map((e) => e.hi)).toEqual(Array.from({ length: 100 }, (_, k) => k));
  });

  it("a load counts only the tiers it reads; a lookup at the limit adds nothing", () => {
    const p = prompt(13);
    const disk = tier({ name: "disk" });
    const off = attached([tier(), disk], [FULL]);
    cache(off, p, 0, 0, 3, 0);
    expect(off.lookup(p, 8, 8, 10)).toBeUndefined();
    const hit = off.lookup(p, 4, 12, 10)!;
    off.load(hit, 10);
    expect([off.tiers[0]!.counters.loads, disk.counters.loads]).toEqual([1, 0]);
  });
});

describe("a lookup's memo", () => {
  it("gives back the same hit while nothing is stored, evicted or in flight, and none when a store was in flight", () => {
    const p = prompt(13);
    const off = attached([tier()], [FULL]);
    cache(off, p, 0, 0, 3, 0);
    const memo = new LookupMemo();
    // At 2 ms the third block's store (ready at 3) is in flight: no hit is kept.
    expect(off.lookup(p, 0, 12, 2, memo)?.tokens).toBe(8);
    expect(memo.hit).toBeUndefined();
    const first = off.lookup(p, 0, 12, 5, memo)!;
    expect(memo.hit).toBe(first);
    expect(off.lookup(p, 0, 12, 6, memo)).toBe(first);
    // Another GPU hit: not the memo's.
    expect(off.lookup(p, 4, 12, 6, memo)).not.toBe(first);
  });
});
