import { createPromptTokens, type KvEvent, type PromptTokens } from "@kvsim/kv-pool";
import type { CacheGroup } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { KvOffload } from "./offload.js";
import { TierStore, type EvictedBlock, type TierConfig } from "./tier-store.js";

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

/** A stored event of blocks [from, to) of `p` in group `g`. */
function stored(p: PromptTokens, g: number, blockSize: number, from: number, to: number): KvEvent {
  const hashes = p.blockHashes(blockSize);
  const blocks = [];
  for (let i = from; i < to; i++) blocks.push({ blockHash: hashes[i]!, tokensHash: 0n });
  return { type: "stored", groupIndex: g, parentHash: from === 0 ? null : hashes[from - 1]!, blocks };
}

describe("a linear model's tier hit", () => {
  // Block 4 tokens, 100 bytes per token: 400 bytes a block. Stores at 4,000 B/ms take 0.1 ms a
  // block, one after another; loads at 400 B/ms take 1 ms a block, after a 0.5 ms latency.
  it("continues the GPU hit with the blocks the tier holds, and the load takes latency + bytes / read bandwidth", () => {
    const cpu = tier();
    const off = new KvOffload([cpu], [full(400)], true);
    const p = prompt(17); // four whole blocks and one token
    off.onGpuEvents([stored(p, 0, 4, 0, 4)], 0);
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
    const off = new KvOffload([tier()], [full(400)], true);
    const p = prompt(17);
    off.onGpuEvents([stored(p, 0, 4, 0, 4)], 0);
    // At 0.25 ms blocks 0 and 1 are stored, block 2 (ready at 0.3) is not: a hit of blocks 0-1.
    expect(off.lookup(p, 0, 16, 0.25)?.tokens).toBe(8);
    expect(off.lookup(p, 8, 16, 0.25)).toBeUndefined();
  });

  it("adds nothing past the GPU hit, at the prompt's last token, or with prefix caching off", () => {
    const p = prompt(16);
    const on = new KvOffload([tier()], [full(400)], true);
    on.onGpuEvents([stored(p, 0, 4, 0, 4)], 0);
    // 16 tokens: at most 15 may be hit, so 12 (three blocks).
    expect(on.lookup(p, 0, 15, 1)?.tokens).toBe(12);
    expect(on.lookup(p, 12, 15, 1)).toBeUndefined();
    const off = new KvOffload([tier()], [full(400)], false);
    off.onGpuEvents([stored(p, 0, 4, 0, 4)], 0);
    expect(off.lookup(p, 0, 15, 1)).toBeUndefined();
  });

  it("queues loads on the read channel in arrival order; the latency overlaps", () => {
    const cpu = tier({ readBytesPerMs: 100, latencyMs: 2 });
    // 1,000 bytes at 100 B/ms: 10 ms each. The first, from 0: done at 0 + 2 + 10 = 12, channel free at 10.
    expect(cpu.readDone(1000, 0)).toBe(12);
    // The second, asked at 5, starts at 10: done at 10 + 2 + 10 = 22.
    expect(cpu.readDone(1000, 5)).toBe(22);
  });
});

describe("LRU within capacity", () => {
  // Three 100-byte blocks fit; stores at 100 B/ms take 1 ms each.
  const small = () => new TierStore({ name: "cpu", capacityBytes: 300, readBytesPerMs: 100, writeBytesPerMs: 100, latencyMs: 0, store: "write_through" });

  it("evicts the least recently used block; a touched block stays", () => {
    const t = small();
    for (const h of [1n, 2n, 3n]) t.store(0, h, 100, 0, undefined);
    const out: EvictedBlock[] = [];
    // At 5 ms every store is done (1, 2, 3 ms): storing 4 evicts 1, the oldest.
    t.store(0, 4n, 100, 5, out);
    expect(out.map((e) => e.hash)).toEqual([1n]);
    // 2 is used again, so storing 5 evicts 3.
    t.touch(t.get(0, 2n)!);
    out.length = 0;
    t.store(0, 5n, 100, 6, out);
    expect(out.map((e) => e.hash)).toEqual([3n]);
    expect([...t.entries()].map((e) => e.hash)).toEqual([4n, 2n, 5n]);
    expect(t.usedBytes).toBe(300);
    expect(t.counters.blocksEvicted).toBe(2);
  });

  it("never evicts a pinned block or one still being stored: the new block is dropped", () => {
    const t = small();
    for (const h of [1n, 2n, 3n]) t.store(0, h, 100, 0, undefined);
    // At 2.5 ms block 3 is still being stored (ready at 3); pin 1 and 2: nothing can go.
    t.pin(t.get(0, 1n)!);
    t.pin(t.get(0, 2n)!);
    expect(t.store(0, 4n, 100, 2.5, undefined)).toBe(false);
    expect(t.counters.blocksDropped).toBe(1);
    t.unpin(t.get(0, 2n)!);
    expect(t.store(0, 4n, 100, 2.5, undefined)).toBe(true);
    expect(t.get(0, 2n)).toBeUndefined();
    expect(() => {
      t.unpin(t.get(0, 3n)!);
    }).toThrow(/unpinned more often/);
  });

  it("a block already held is not stored twice", () => {
    const t = small();
    expect(t.store(0, 1n, 100, 0, undefined)).toBe(true);
    expect(t.store(0, 1n, 100, 0, undefined)).toBe(false);
    expect(t.counters.blocksStored).toBe(1);
    // Another group's block under the same hash is another block.
    expect(t.store(1, 1n, 100, 0, undefined)).toBe(true);
  });
});

describe("tiers in order", () => {
  it("a tier that keeps evictions takes what the tier above evicts, and a hit reads each block from the first tier holding it", () => {
    // cpu holds two 400-byte blocks; disk keeps what cpu evicts.
    const cpu = tier({ capacityBytes: 800 });
    const disk = tier({ name: "disk", store: "on_evict", readBytesPerMs: 40, latencyMs: 1 });
    const off = new KvOffload([cpu, disk], [full(400)], true);
    const p = prompt(13);
    // Stored at 0, 1 and 2 ms (each store takes 0.1 ms): the third evicts block 0 into disk.
    off.onGpuEvents([stored(p, 0, 4, 0, 1)], 0);
    off.onGpuEvents([stored(p, 0, 4, 1, 2)], 1);
    off.onGpuEvents([stored(p, 0, 4, 2, 3)], 2);
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
    const off = new KvOffload([cpu], [full(400)], true);
    const p = prompt(9);
    off.onGpuEvents([stored(p, 0, 4, 0, 2)], 0);
    expect(cpu.blocks).toBe(0);
    off.onGpuEvents([{ type: "removed", groupIndex: 0, blockHashes: p.blockHashes(4).slice(0, 2) }], 3);
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
    const off = new KvOffload([cpu], groups, true);
    const p = prompt(33); // eight whole blocks
    // Full attention and window blocks 0-7; states only at 16 and 24 tokens (blocks 3 and 5).
    off.onGpuEvents([stored(p, 0, 4, 0, 8), stored(p, 1, 4, 0, 8), stored(p, 2, 4, 3, 4), stored(p, 2, 4, 5, 6)], 0);
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
    const off = new KvOffload([tier({ writeBytesPerMs: 1e9 })], groups, true);
    off.onGpuEvents([stored(p, 0, 4, 0, 8), stored(p, 1, 4, 0, 4), stored(p, 1, 4, 5, 8), stored(p, 2, 4, 3, 4), stored(p, 2, 4, 5, 6)], 0);
    const hit = off.lookup(p, 0, 32, 1)!;
    expect(hit.tokens).toBe(16);
    expect(hit.bytesPerTier).toEqual([400 + 100 + 1000]);
  });
});
