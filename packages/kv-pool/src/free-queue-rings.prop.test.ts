import fc from "fast-check";
import { expectSamePools, propRuns, tableOf, takeIntoArray } from "./test-helpers.js";
import { describe, expect, it } from "vitest";
import { BlockPool, NULL_BLOCK, type PoolOps } from "./block-pool.js";
import { ReferencePool } from "./reference-pool.js";

/**
 * The pool's free queue is two rings with lazy removal (free-queue.ts, free-queue-ring.ts); the reference pool keeps
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

  it("count a block once when a rebuild moves it onto one of its own stale entries", () => {
    // 20 pages, blocks 1..10 taken. 1..8 freed unhashed fill the front ring's 8 slots at
    // FRONT_BASE - 8 .. FRONT_BASE - 1 (1 first in the queue); freeing 9 rebuilds the ring (32
    // slots, 1..8 renumbered from FRONT_BASE) and puts 9 in front of them.
    const pool = new BlockPool(20, 1, false, [false]);
    expect(pool.takeFree(10, 0)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    pool.free([1, 2, 3, 4, 5, 6, 7, 8]);
    pool.free([9]);
    // Each hit on block 1 and free of it leaves a stale entry behind (the first one at FRONT_BASE,
    // where 1 sat) and queues 1 at the very front again: 23 rounds fill the 32 slots.
    for (let round = 0; round < 23; round++) {
      pool.touch([1]);
      pool.free([1]);
    }
    // Freeing 10 rebuilds the ring: 1, first, is renumbered to FRONT_BASE, where a stale entry of
    // its own sits further on; it must still count once.
    pool.free([10]);
    const order = [10, 1, 9, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17, 18, 19];
    expect(pool.freeQueueOrder()).toEqual(order);
    expect(pool.numFree).toBe(19);
    expect(pool.takeFree(19, 0)).toEqual(order);
  });

  it("hold one entry per free block after a long churn (stale entries are dropped, the rings stay small)", () => {
    // 16 pages, 5,000 rounds of taking 10 blocks and freeing them back: 50,000 pushes in all.
    const pool = new BlockPool(17, 1, false, [false]);
    for (let round = 0; round < 5000; round++) {
      const blocks = pool.takeFree(10, 0);
      for (const b of blocks) if (round % 2 === 0) pool.cacheBlockKey(b, 0, round, b, NULL_BLOCK);
      pool.free(blocks);
    }
    expect(pool.numFree).toBe(16);
    const rings = pool.freeQueueRingSizes();
    // A ring grows only while 2 x live + 2 > its size: with at most 16 live blocks it stops at the
    // first power of two >= 34, 64 slots (without dropping stale entries, 50,000 pushes would need 65,536).
    expect(rings.front).toBeLessThanOrEqual(64);
    expect(rings.back).toBeLessThanOrEqual(64);
  });
});

/*
 * Harness for block runs (docs/design/performance.md §6, stage 0), at the pool's own calls: block
 * tables of hundreds of blocks built the way managers build them (takeFreeInto in chunks and
 * single blocks, cacheTableRun or cacheBlockKey in table order, freeTableTailFirst, a window's
 * lowest blocks freed, single-block state tables), hits walking a cached chain with findFirst and
 * touching a table-order prefix of it. Both pools are compared after every call.
 */
type TableOp =
  /**
   * A table of group 0 (linked) or 1 (window): its content shares `prefix` blocks of a base chain;
   * a hit of at most `cap` blocks. A twin is a second table of the same content opened with it
   * (two requests with one prompt admitted together): both cache the same keys, as duplicates.
   */
  | { readonly t: "open"; readonly g: number; readonly base: number; readonly prefix: number; readonly cap: number; readonly twin: boolean }
  | { readonly t: "grow"; readonly i: number; readonly n: number }
  | { readonly t: "cache"; readonly i: number; readonly k: number; readonly batched: boolean }
  | { readonly t: "free"; readonly i: number; readonly reopen: boolean }
  | { readonly t: "window"; readonly i: number; readonly k: number }
  | { readonly t: "state"; readonly i: number };

const tableOpArb: fc.Arbitrary<TableOp> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant("open" as const),
      g: fc.nat(1),
      base: fc.nat(1),
      prefix: fc.nat(400),
      cap: fc.oneof(fc.constant(1000), fc.nat(40), fc.nat(400)),
      twin: fc.boolean(),
    }),
  },
  { weight: 5, arbitrary: fc.record({ t: fc.constant("grow" as const), i: fc.nat(), n: fc.oneof(fc.constant(1), fc.integer({ min: 16, max: 300 })) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("cache" as const), i: fc.nat(), k: fc.integer({ min: 1, max: 300 }), batched: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("free" as const), i: fc.nat(), reopen: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("window" as const), i: fc.nat(), k: fc.integer({ min: 1, max: 40 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("state" as const), i: fc.nat(3) }) },
);

interface Table {
  readonly g: number;
  readonly base: number;
  readonly prefix: number;
  readonly serial: number;
  /** Names the table's own keys (after the prefix): a twin or a preempted table coming back has its original's. */
  readonly content: number;
  /** The table in each pool (BlockPool's first). */
  readonly blocks: [number[], number[]];
  /** Entries [0, cached) are cache-visible. */
  cached: number;
}

/** Block i's key in a table: the base chain's for i < prefix, the table's own after. */
const keyHalves = (t: Table, i: number): [number, number] => {
  const k = i < t.prefix ? 1 + t.base * 100_000 + i : 1_000_000 + t.content * 1000 + i;
  return [k, (k * 0x9e37) ^ 0x5bd1];
};

interface TableShapes {
  maxTable: number;
  bigTakes: number;
  takes1: number;
  evicted: number;
  evictedDup: number;
  hitFromQueue: number;
  hitShared: number;
  hitCut: number;
  evictionsAcrossTables: number;
  windowFreed: number;
  reopenHits: number;
  stateCycles: number;
}

function runTables(pages: number, ops: readonly TableOp[], sh: TableShapes): void {
  const pools: [PoolOps, PoolOps] = [new BlockPool(pages, 3, true, [true, false, false]), new ReferencePool(pages, 3, true)];
  const [bp, ref] = pools;
  const tables: Table[] = [];
  /** Group 2: single-block state tables (a running block, its predecessor cached then freed). */
  const states: ([number, number] | undefined)[] = [undefined, undefined, undefined, undefined];
  let serial = 0;
  let stateKey = 0;
  let call = 0;
  const compare = (what: string): void => {
    call++;
    const tablesOf = (p: 0 | 1): string => `${tables.map((t) => t.blocks[p].join(".")).join("|")} ${states.map((s) => s?.[p] ?? "-").join(",")}`;
    expectSamePools(call, what, bp, ref, [tablesOf(0), tablesOf(1)]);
    for (const t of tables) sh.maxTable = Math.max(sh.maxTable, t.blocks[1].length);
  };
  /** The table (serial) that last took each block (ids of the reference pool), to see evictions span freed tables. */
  const origin = new Map<number, number>();
  const take = (n: number, out: [number[], number[]], g: number, by: number): void => {
    const front = ref
      .freeQueueOrder()
      .slice(0, n)
      .filter((b) => ref.isHashed(b));
    sh.evicted += front.length;
    if (new Set(front.map((b) => origin.get(b))).size >= 2) sh.evictionsAcrossTables++;
    if (front.length > 0) {
      const multi = new Set(
        ref
          .cacheSnapshot()
          .map((e) => e.slice(e.lastIndexOf(":") + 1).split("/"))
          .filter((c) => c.length > 1)
          .flat()
          .map(Number),
      );
      for (const b of front) if (multi.has(b)) sh.evictedDup++;
    }
    if (n === 1) sh.takes1++;
    if (n >= 64) sh.bigTakes++;
    const start = out[1].length;
    pools.forEach((p, k) => {
      takeIntoArray(p, n, out[k as 0 | 1], g);
    });
    for (let i = start; i < out[1].length; i++) origin.set(out[1][i]!, by);
  };
  const open = (g: number, base: number, prefix: number, cap: number, sameAs?: Table): Table => {
    const id = serial++;
    const t: Table = { g, base, prefix, serial: id, content: sameAs?.content ?? id, blocks: [[], []], cached: 0 };
    // The hit walk, as a manager's: first copies in table order (a linked group follows its links).
    const linked = g === 0;
    const hits: [number[], number[]] = [[], []];
    for (let i = 0; i < cap; i++) {
      const [hi, lo] = keyHalves(t, i);
      const found = pools.map((p, k) => p.findFirst(g, linked && i > 0 ? hits[k as 0 | 1][i - 1]! : NULL_BLOCK, hi, lo));
      expect(found[0]).toBe(found[1]);
      if (found[1] === NULL_BLOCK) break;
      if (i === cap - 1) {
        // The chain would go on past the hit: the hit ends inside it.
        const [nhi, nlo] = keyHalves(t, i + 1);
        if (ref.findFirst(g, NULL_BLOCK, nhi, nlo) !== NULL_BLOCK) sh.hitCut++;
      }
      hits[0].push(found[0]!);
      hits[1].push(found[1]!);
    }
    for (const b of hits[1]) {
      if (ref.refCount(b) > 0) sh.hitShared++;
      else sh.hitFromQueue++;
    }
    pools.forEach((p, k) => {
      p.touch(hits[k as 0 | 1]);
    });
    t.blocks[0].push(...hits[0]);
    t.blocks[1].push(...hits[1]);
    t.cached = hits[1].length;
    tables.push(t);
    return t;
  };

  for (const op of ops) {
    switch (op.t) {
      case "open": {
        const t = open(op.g, op.base, op.prefix, op.cap);
        compare(`open ${t.serial} g${t.g} hit ${t.cached}`);
        if (op.twin) {
          const twin = open(op.g, op.base, op.prefix, op.cap, t);
          compare(`twin of ${t.serial} hit ${twin.cached}`);
        }
        break;
      }
      case "grow": {
        if (tables.length === 0) break;
        const t = tables[op.i % tables.length]!;
        const n = Math.min(op.n, ref.numFree);
        if (n === 0) break;
        take(n, t.blocks, t.g, t.serial);
        compare(`grow ${t.serial} ${n}`);
        break;
      }
      case "cache": {
        if (tables.length === 0) break;
        const t = tables[op.i % tables.length]!;
        const to = Math.min(t.blocks[1].length, t.cached + op.k);
        if (to <= t.cached) break;
        const keys = new Int32Array(2 * (to - t.cached));
        for (let i = t.cached; i < to; i++) [keys[2 * (i - t.cached)], keys[2 * (i - t.cached) + 1]] = keyHalves(t, i);
        pools.forEach((p, k) => {
          const blocks = t.blocks[k as 0 | 1];
          if (op.batched) p.cacheTableRun(tableOf(blocks), t.cached, to, t.g, keys);
          else
            for (let i = t.cached; i < to; i++) {
              const b = blocks[i]!;
              if (b !== NULL_BLOCK && !p.isHashed(b))
                p.cacheBlockKey(b, t.g, keys[2 * (i - t.cached)]!, keys[2 * (i - t.cached) + 1]!, i === 0 ? NULL_BLOCK : blocks[i - 1]!);
            }
        });
        compare(`cache ${t.serial} [${t.cached}, ${to}) ${op.batched}`);
        t.cached = to;
        break;
      }
      case "free": {
        if (tables.length === 0) break;
        const t = tables[op.i % tables.length]!;
        const released = pools.map((p, k) => p.freeTableTailFirst(tableOf(t.blocks[k as 0 | 1]), []));
        expect(released[0]).toBe(released[1]);
        tables.splice(tables.indexOf(t), 1);
        compare(`free ${t.serial}`);
        if (op.reopen) {
          // A preempted table comes back: it hits its own cached prefix.
          const again = open(t.g, t.base, t.prefix, 1000, t);
          if (again.cached > 0) sh.reopenHits++;
          compare(`reopen ${t.serial} as ${again.serial} hit ${again.cached}`);
        }
        break;
      }
      case "window": {
        // remove_skipped_blocks: the lowest real blocks of a window table, freed highest first.
        const ws = tables.filter((t) => t.g === 1);
        if (ws.length === 0) break;
        const t = ws[op.i % ws.length]!;
        const lo = t.blocks[1].findIndex((b) => b !== NULL_BLOCK);
        if (lo < 0) break;
        const hi = Math.min(t.blocks[1].length, lo + op.k);
        const released = pools.map((p, k) => {
          const blocks = t.blocks[k as 0 | 1];
          const ids = blocks.slice(lo, hi).reverse();
          blocks.fill(NULL_BLOCK, lo, hi);
          return p.free(ids);
        });
        expect(released[0]).toBe(released[1]);
        sh.windowFreed += hi - lo;
        compare(`window ${t.serial} [${lo}, ${hi})`);
        break;
      }
      case "state": {
        if (ref.numFree === 0) break;
        const old = states[op.i];
        const fresh: [number[], number[]] = [[], []];
        take(1, fresh, 2, -1 - op.i);
        if (old !== undefined) {
          // The old state is cached (a Mamba block kept for hits), then released.
          const key = ++stateKey;
          pools.forEach((p, k) => {
            p.cacheBlockKey(old[k]!, 2, 0x77 + key, key, NULL_BLOCK);
            p.free([old[k]!]);
          });
          sh.stateCycles++;
        }
        states[op.i] = [fresh[0][0]!, fresh[1][0]!];
        compare(`state ${op.i}`);
        break;
      }
    }
  }
}

describe("block-runs harness: the pool's own calls on long block tables", () => {
  it("BlockPool and the reference pool agree after every call (long tables, shared prefixes, cut hits, windows, states)", () => {
    const sh: TableShapes = {
      maxTable: 0,
      bigTakes: 0,
      takes1: 0,
      evicted: 0,
      evictedDup: 0,
      hitFromQueue: 0,
      hitShared: 0,
      hitCut: 0,
      evictionsAcrossTables: 0,
      windowFreed: 0,
      reopenHits: 0,
      stateCycles: 0,
    };
    fc.assert(
      fc.property(fc.integer({ min: 64, max: 400 }), fc.array(tableOpArb, { minLength: 40, maxLength: 150 }), (pages, ops) => {
        runTables(pages, ops, sh);
      }),
      // A failure shrinks for at most 30 s, then is reported (before the test's timeout).
      { seed: 3200, numRuns: propRuns(100), plugins: [fc.interruptAfterTimeLimit(30_000)] },
    );
    // Every shape occurred (the property is not vacuous): tables of hundreds of blocks, big and
    // single-block takes, evictions (of duplicated keys too, and from several freed tables in one
    // take), hits out of the queue and on blocks other tables hold, hits ending where the cached
    // chain goes on, window frees, re-opened tables hitting their own prefix, state blocks cycled.
    for (const [name, v] of Object.entries(sh)) expect([name, v > 0]).toEqual([name, true]);
    expect(sh.maxTable).toBeGreaterThanOrEqual(200);
  }, 120_000);
});
