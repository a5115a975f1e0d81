import fc from "fast-check";
import { propRuns } from "./test-helpers.js";
import { describe, expect, it } from "vitest";
import { BlockPool, NULL_BLOCK, type PoolOps } from "./block-pool.js";
import { ReferencePool } from "./reference-pool.js";

/**
 * The pool's free queue is two rings with lazy removal (block-pool.ts); the reference pool keeps
 * one plain array. Long random runs of takes, frees (hashed blocks to the back, fresh ones to the
 * front), hits taking free blocks out of the middle and cache drops wrap the rings, leave stale
 * entries and force rebuilds; after every operation both pools must hold the same queue.
 */
type Op =
  | { readonly t: "take"; readonly n: number }
  | { readonly t: "cache"; readonly pick: number; readonly key: number }
  | { readonly t: "free"; readonly picks: readonly number[] }
  | { readonly t: "touch"; readonly picks: readonly number[] };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ t: fc.constant("take" as const), n: fc.integer({ min: 1, max: 12 }) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("cache" as const), pick: fc.nat(), key: fc.nat(30) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("free" as const), picks: fc.array(fc.nat(), { minLength: 1, maxLength: 12 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("touch" as const), picks: fc.array(fc.nat(), { minLength: 1, maxLength: 6 }) }) },
);

/** Runs the operations; returns the queue, cache and metrics after each (the held blocks are tracked outside the pool). */
function run(pool: PoolOps, ops: readonly Op[]): string[] {
  const held: number[] = [];
  const log: string[] = [];
  for (const op of ops) {
    if (op.t === "take") {
      const n = Math.min(op.n, pool.numFree);
      if (n > 0) held.push(...pool.takeFree(n, 0));
    } else if (op.t === "cache") {
      if (held.length > 0) {
        const b = held[op.pick % held.length]!;
        // Each key a distinct (hi, lo) pair; blocks already hashed keep their key.
        if (!pool.isHashed(b)) pool.cacheBlockKey(b, 0, 0x5000 + op.key, 0x9000 + op.key, NULL_BLOCK);
      }
    } else if (op.t === "free") {
      const batch: number[] = [];
      for (const p of op.picks) {
        if (held.length === 0) break;
        batch.push(held.splice(p % held.length, 1)[0]!);
      }
      pool.free(batch);
    } else {
      // A hit: free cached blocks come out of the queue (from anywhere in it).
      const queue = pool.freeQueueOrder().filter((b) => pool.isHashed(b));
      const picked = new Set<number>();
      for (const p of op.picks) if (queue.length > 0) picked.add(queue[p % queue.length]!);
      pool.touch([...picked]);
      held.push(...picked);
    }
    log.push(`${pool.freeQueueOrder().join(",")} | ${pool.cacheSnapshot().join(";")} | ${JSON.stringify(pool.metrics())}`);
  }
  return log;
}

describe("the free queue's rings", () => {
  it("keep the order of a plain array queue under long random runs", () => {
    fc.assert(
      fc.property(fc.integer({ min: 3, max: 40 }), fc.array(opArb, { minLength: 50, maxLength: 400 }), (pages, ops) => {
        expect(run(new BlockPool(pages, 1, false, [false]), ops)).toEqual(run(new ReferencePool(pages, 1, false), ops));
      }),
      { seed: 4242, numRuns: propRuns(150) },
    );
  }, 120_000);

  it("hold one entry per free block after a long churn (stale entries are dropped, the rings stay small)", () => {
    // 16 pages, 5,000 rounds of taking 10 blocks and freeing them back: 50,000 pushes in all.
    const pool = new BlockPool(17, 1, false, [false]);
    for (let round = 0; round < 5000; round++) {
      const blocks = pool.takeFree(10, 0);
      for (const b of blocks) if (round % 2 === 0) pool.cacheBlockKey(b, 0, round, b, NULL_BLOCK);
      pool.free(blocks);
    }
    expect(pool.numFree).toBe(16);
    const rings = pool as unknown as { front: Int32Array; back: Int32Array };
    // A ring grows only while 2 x live + 2 > its size: with at most 16 live blocks it stops at the
    // first power of two >= 34, 64 slots (without dropping stale entries, 50,000 pushes would need 65,536).
    expect(rings.front.length).toBeLessThanOrEqual(64);
    expect(rings.back.length).toBeLessThanOrEqual(64);
  });
});
