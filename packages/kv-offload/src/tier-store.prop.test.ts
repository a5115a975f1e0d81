import { createPromptTokens, KvCacheManager, type PromptTokens } from "@kvsim/kv-pool";
import type { CacheGroup } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KvOffload, type OffloadLoad } from "./offload.js";
import { TierStore } from "./tier-store.js";

/**
 * Conservation of a tier under random traffic: stores of keys from a small space (so many repeat),
 * touches, loads that pin blocks and releases, with time moving on. After every operation: each key
 * is held once, the bytes held are the held blocks' bytes and never exceed the capacity, and a
 * pinned block is still held.
 */
type Op =
  | { readonly t: "store"; readonly key: number; readonly group: number; readonly bytes: number; readonly dt: number }
  | { readonly t: "touch"; readonly key: number }
  | { readonly t: "pin"; readonly key: number }
  | { readonly t: "unpin"; readonly pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant("store" as const),
      key: fc.integer({ min: 0, max: 40 }),
      group: fc.integer({ min: 0, max: 2 }),
      bytes: fc.integer({ min: 1, max: 300 }),
      dt: fc.double({ min: 0, max: 3, noNaN: true }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("touch" as const), key: fc.integer({ min: 0, max: 40 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("pin" as const), key: fc.integer({ min: 0, max: 40 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("unpin" as const), pick: fc.nat() }) },
);

describe("a tier under random traffic", () => {
  it("holds each key once, within its capacity, its bytes the sum of its blocks', never evicting a pinned block", () => {
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 2000 }), fc.array(opArb, { minLength: 1, maxLength: 200 }), (capacity, ops) => {
        const t = new TierStore({ name: "t", capacityBytes: capacity, readBytesPerMs: 100, writeBytesPerMs: 200, latencyMs: 0, store: "write_through" });
        const pinned: number[] = [];
        let now = 0;
        let evictedTotal = 0;
        for (const op of ops) {
          if (op.t === "store") {
            now += op.dt;
            t.store(op.group, op.key * 7, op.key, op.bytes, now, () => evictedTotal++);
          } else if (op.t === "touch") {
            const s = t.find(0, op.key * 7, op.key);
            if (s >= 0) t.touch(s);
          } else if (op.t === "pin") {
            const s = t.find(0, op.key * 7, op.key);
            if (s >= 0) {
              t.pin(s);
              pinned.push(s);
            }
          } else if (pinned.length > 0) {
            const [s] = pinned.splice(op.pick % pinned.length, 1);
            t.unpin(s!);
          }
          const entries = [...t.entries()];
          const keys = new Set(entries.map((e) => `${e.group}:${e.hi}:${e.lo}`));
          expect(keys.size).toBe(entries.length);
          expect(entries.length).toBe(t.blocks);
          expect(entries.reduce((a, e) => a + e.bytes, 0)).toBe(t.usedBytes);
          expect(t.usedBytes).toBeLessThanOrEqual(capacity);
          for (const s of pinned) expect(entries.some((e) => e.slot === s && e.pins > 0)).toBe(true);
          for (const e of entries) expect(t.find(e.group, e.hi, e.lo)).toBe(e.slot);
        }
        expect(t.counters.blocksEvicted).toBe(evictedTotal);
        expect(t.counters.blocksStored - t.counters.blocksEvicted).toBe(t.blocks);
      }),
      { seed: 4040, numRuns: 200 },
    );
  });
});

describe("loads under random traffic", () => {
  const groups: CacheGroup[] = [
    { name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: 4, prefix_cacheable: true, transfer_bytes_per_block: 100 },
  ];
  const pool = new KvCacheManager({ numPages: 2, groups, enablePrefixCaching: true, vllmVersion: "0.32.0" });
  // Prompts share prefixes: prompt k is the first 4 x len blocks of one of three token streams.
  const promptOf = (stream: number, blocks: number): PromptTokens =>
    createPromptTokens(Uint32Array.from({ length: 4 * blocks + 1 }, (_, i) => stream * 100_000 + i));

  it("a load's bytes are the bytes of the blocks it reads, its tokens whole blocks past the GPU hit, and every pin is released", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            stream: fc.integer({ min: 0, max: 2 }),
            blocks: fc.integer({ min: 1, max: 12 }),
            gpu: fc.integer({ min: 0, max: 4 }),
            dt: fc.integer({ min: 0, max: 5 }),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        (reqs) => {
          const cpu = new TierStore({ name: "cpu", capacityBytes: 1500, readBytesPerMs: 100, writeBytesPerMs: 1000, latencyMs: 1, store: "write_through" });
          const disk = new TierStore({ name: "disk", capacityBytes: 5000, readBytesPerMs: 10, writeBytesPerMs: 100, latencyMs: 5, store: "on_evict" });
          const off = new KvOffload([cpu, disk], groups, true);
          off.attach(pool);
          const loads: OffloadLoad[] = [];
          let now = 0;
          for (const r of reqs) {
            now += r.dt;
            const p = promptOf(r.stream, r.blocks);
            const gpu = 4 * Math.min(r.gpu, r.blocks);
            const hit = off.lookup(p, gpu, p.length - 1, now);
            if (hit !== undefined) {
              expect(hit.tokens % 4).toBe(0);
              expect(hit.tokens).toBeGreaterThan(gpu);
              expect(hit.tokens).toBeLessThanOrEqual(p.length - 1);
              const readBytes = [0, 0];
              hit.slots.forEach((s, i) => (readBytes[hit.tierOf[i]!]! += off.tiers[hit.tierOf[i]!]!.slotBytes(s)));
              expect(hit.bytesPerTier).toEqual(readBytes);
              expect(hit.bytesPerTier[0]! + hit.bytesPerTier[1]!).toBe(((hit.tokens - gpu) / 4) * 100);
              expect(hit.tokensPerTier[0]! + hit.tokensPerTier[1]!).toBe(hit.tokens - gpu);
              const load = off.load(hit, now);
              expect(load.doneMs).toBeGreaterThanOrEqual(now + 1);
              loads.push(load);
            }
            // The request computed its blocks: the pool caches them.
            const view = pool.lookupKeys(p, 4);
            const keys = new Int32Array(2 * r.blocks);
            for (let i = 0; i < r.blocks; i++) {
              keys[2 * i] = view.blockHi(i);
              keys[2 * i + 1] = view.blockLo(i);
            }
            off.clockMs = now;
            off.cached(0, keys, r.blocks, 0);
            if (loads.length > 3) off.release(loads.shift()!);
          }
          for (const l of loads) off.release(l);
          for (const t of off.tiers) for (const e of t.entries()) expect(e.pins).toBe(0);
          expect(cpu.usedBytes).toBeLessThanOrEqual(1500);
          expect(disk.usedBytes).toBeLessThanOrEqual(5000);
        },
      ),
      { seed: 5150, numRuns: 150 },
    );
  });
});
