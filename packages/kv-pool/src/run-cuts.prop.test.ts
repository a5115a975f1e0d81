import fc from "fast-check";
import { expectSamePools, propRuns, tableOf, takeIntoArray } from "./test-helpers.js";
import { describe, expect, it } from "vitest";
import { BlockPool, NULL_BLOCK, type PoolOps } from "./block-pool.js";
import { ReferencePool } from "./reference-pool.js";

/*
 * The calls that would cut runs of blocks (docs/design/performance.md §6: a run is a slice of one
 * block table): takes ending inside a freed table's blocks in the queue, hits starting or ending
 * inside them, frees of part of a table or in an order other than tail first, caching out of table
 * order or under another group, the uncache hook, blocks held by several tables. Driven on small
 * pools, after every call the pool must equal the per-block ReferencePool: the harness any pool
 * that keeps its state per run must pass (the run pool of stages 1 and 2 did).
 */
type Op =
  /** Table i takes n blocks (n = 1 is a decode step: it extends the table's last run when that ends the arena). */
  | { readonly t: "take"; readonly i: number; readonly n: number }
  /** Caches table i's next k blocks in table order (one cacheTableRun call, or block by block). */
  | { readonly t: "cache"; readonly i: number; readonly k: number; readonly batched: boolean }
  /** Caches one unhashed block of table i, anywhere in it, under group g (out of table order). */
  | { readonly t: "cacheOne"; readonly i: number; readonly at: number; readonly g: number }
  /** Frees table i tail first (a hashed prefix and an unhashed tail), dropping it. */
  | { readonly t: "freeAll"; readonly i: number }
  /** Frees entries [from, from + len) of table i in the given order, nulling them (a window, or an odd caller). */
  | { readonly t: "freePart"; readonly i: number; readonly from: number; readonly len: number; readonly order: "reversed" | "ascending" | "shuffled" }
  /** A new table touching a slice of the free queue: [from, from + len) in queue order, given reversed (table order) or as is. */
  | { readonly t: "hitQueue"; readonly from: number; readonly len: number; readonly tableOrder: boolean }
  /** A new table touching entries [from, from + len) of table i (blocks then held twice). */
  | { readonly t: "share"; readonly i: number; readonly from: number; readonly len: number }
  /** The uncache hook on the key of a hashed block (picked by index among all hashed blocks). */
  | { readonly t: "uncache"; readonly pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ t: fc.constant("take" as const), i: fc.nat(5), n: fc.oneof(fc.constant(1), fc.integer({ min: 2, max: 90 })) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("cache" as const), i: fc.nat(5), k: fc.integer({ min: 1, max: 80 }), batched: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("cacheOne" as const), i: fc.nat(5), at: fc.nat(), g: fc.nat(1) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("freeAll" as const), i: fc.nat(5) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("freePart" as const),
      i: fc.nat(5),
      from: fc.nat(),
      len: fc.integer({ min: 1, max: 40 }),
      order: fc.constantFrom("reversed" as const, "ascending" as const, "shuffled" as const),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("hitQueue" as const), from: fc.nat(), len: fc.integer({ min: 1, max: 60 }), tableOrder: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("share" as const), i: fc.nat(5), from: fc.nat(), len: fc.integer({ min: 1, max: 60 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("uncache" as const), pick: fc.nat() }) },
);

interface Table {
  /** The table in each pool (BlockPool's first). */
  readonly blocks: [number[], number[]];
  readonly g: number;
  readonly serial: number;
  /** Entries [0, cached) were offered to the cache in table order. */
  cached: number;
}

interface Shapes {
  cutTakes: number;
  middleHits: number;
  partFrees: number;
  mixedFrees: number;
  outOfOrder: number;
  shared: number;
  uncached: number;
}

/** A key per (table serial, entry): distinct keys, except that the first 4 entries of even tables repeat (duplicates). */
const keyOf = (serial: number, i: number): [number, number] => {
  const k = i < 4 && serial % 2 === 0 ? 7 + i : 1000 + serial * 1000 + i;
  return [k, k ^ 0x2545];
};

function run(pages: number, ops: readonly Op[], sh: Shapes): void {
  const bp = new BlockPool(pages, 2, true, [true, false]);
  const ref = new ReferencePool(pages, 2, true);
  const pools: [PoolOps, PoolOps] = [bp, ref];
  const tables: Table[] = [];
  let serial = 0;
  let call = 0;
  const compare = (what: string): void => {
    call++;
    const tablesOf = (p: 0 | 1): string => tables.map((t) => t.blocks[p].join(".")).join("|");
    expectSamePools(call, what, bp, ref, [tablesOf(0), tablesOf(1)]);
  };
  const tableAt = (i: number): Table => {
    while (tables.length <= i % 6) tables.push({ blocks: [[], []], g: serial % 2, serial: serial++, cached: 0 });
    return tables[i % 6]!;
  };
  for (const op of ops) {
    switch (op.t) {
      case "take": {
        const t = tableAt(op.i);
        const n = Math.min(op.n, ref.numFree);
        if (n === 0) break;
        const q = ref.freeQueueOrder();
        // A take ending inside a run: the next queued block was freed together with the last one taken.
        if (n < q.length && ref.refCount(q[n]!) === 0) sh.cutTakes++;
        pools.forEach((p, k) => {
          takeIntoArray(p, n, t.blocks[k as 0 | 1], t.g);
        });
        compare(`take ${t.serial} ${n}`);
        break;
      }
      case "cache": {
        const t = tableAt(op.i);
        const to = Math.min(t.blocks[1].length, t.cached + op.k);
        if (to <= t.cached) break;
        const keys = new Int32Array(2 * (to - t.cached));
        for (let i = t.cached; i < to; i++) [keys[2 * (i - t.cached)], keys[2 * (i - t.cached) + 1]] = keyOf(t.serial, i);
        // As with chained hashes, a key names its parent key: in the linked group 0, entry i > 0 is
        // cached only with the entry before as its parent, holding (or about to hold) the key before
        // in the table's chain, as managers cache. Where it does not (a hit on foreign blocks, a
        // block uncached, cached out of order or freed), the block is skipped, block by block.
        const rb = t.blocks[1];
        const linked = t.g === 0;
        const cacheIt: boolean[] = [];
        for (let i = t.cached; i < to; i++) {
          const b = rb[i]!;
          const parentOk =
            !linked ||
            i === 0 ||
            (rb[i - 1] !== NULL_BLOCK && (cacheIt[i - 1 - t.cached] === true || ref.holdsKey(rb[i - 1]!, t.g, ...keyOf(t.serial, i - 1))));
          cacheIt.push(b !== NULL_BLOCK && !ref.isHashed(b) && parentOk);
        }
        const batched = op.batched && cacheIt.every((c, j) => c || rb[t.cached + j] === NULL_BLOCK || ref.isHashed(rb[t.cached + j]!));
        pools.forEach((p, k) => {
          const blocks = t.blocks[k as 0 | 1];
          if (batched) p.cacheTableRun(tableOf(blocks), t.cached, to, t.g, keys);
          else
            for (let i = t.cached; i < to; i++) {
              if (cacheIt[i - t.cached] === true)
                p.cacheBlockKey(blocks[i]!, t.g, keys[2 * (i - t.cached)]!, keys[2 * (i - t.cached) + 1]!, i === 0 || !linked ? NULL_BLOCK : blocks[i - 1]!);
            }
        });
        compare(`cache ${t.serial} [${t.cached}, ${to}) ${batched}`);
        t.cached = to;
        break;
      }
      case "cacheOne": {
        const t = tableAt(op.i);
        const unhashed = t.blocks[1].map((b, i) => (b !== NULL_BLOCK && !ref.isHashed(b) ? i : -1)).filter((i) => i >= 0);
        if (unhashed.length === 0) break;
        const at = unhashed[op.at % unhashed.length]!;
        if (at > t.cached) sh.outOfOrder++;
        // A key of its own (no chain names it as a parent or child).
        const [hi, lo] = [5_000_000 + t.serial * 1000 + at, at];
        pools.forEach((p, k) => {
          p.cacheBlockKey(t.blocks[k as 0 | 1][at]!, op.g, hi, lo, NULL_BLOCK);
        });
        compare(`cacheOne ${t.serial} ${at} g${op.g}`);
        break;
      }
      case "freeAll": {
        if (op.i % 6 >= tables.length) break;
        const t = tables[op.i % 6]!;
        const hashed = t.blocks[1].some((b) => b !== NULL_BLOCK && ref.isHashed(b));
        const plain = t.blocks[1].some((b) => b !== NULL_BLOCK && !ref.isHashed(b));
        if (hashed && plain) sh.mixedFrees++;
        const released = pools.map((p, k) => p.freeTableTailFirst(tableOf(t.blocks[k as 0 | 1]), []));
        expect(released[0]).toBe(released[1]);
        tables.splice(op.i % 6, 1);
        compare(`freeAll ${t.serial}`);
        break;
      }
      case "freePart": {
        if (op.i % 6 >= tables.length) break;
        const t = tables[op.i % 6]!;
        const n = t.blocks[1].length;
        if (n === 0) break;
        const from = op.from % n;
        const to = Math.min(n, from + op.len);
        const idx: number[] = [];
        for (let i = from; i < to; i++) if (t.blocks[1][i] !== NULL_BLOCK) idx.push(i);
        if (idx.length === 0) break;
        if (op.order === "reversed") idx.reverse();
        // A fixed shuffle: odd positions first, then even ones.
        const order = op.order === "shuffled" ? [...idx.filter((_, j) => j % 2 === 1), ...idx.filter((_, j) => j % 2 === 0)] : idx;
        sh.partFrees++;
        const released = pools.map((p, k) => {
          const blocks = t.blocks[k as 0 | 1];
          const ids = order.map((i) => blocks[i]!);
          for (const i of order) blocks[i] = NULL_BLOCK;
          return p.free(ids);
        });
        expect(released[0]).toBe(released[1]);
        compare(`freePart ${t.serial} [${from}, ${to}) ${op.order}`);
        break;
      }
      case "hitQueue": {
        const q = ref.freeQueueOrder();
        if (q.length === 0 || tables.length >= 6) break;
        const from = op.from % q.length;
        // Queue positions of the same ids in both pools (the queues are equal).
        const slice = q.slice(from, Math.min(q.length, from + op.len));
        if (from > 0 && from + slice.length < q.length) sh.middleHits++;
        const ids = op.tableOrder ? [...slice].reverse() : slice;
        const t = tableAt(tables.length);
        pools.forEach((p, k) => {
          p.touch(ids);
          t.blocks[k as 0 | 1].push(...ids);
        });
        compare(`hitQueue ${t.serial} [${from}, +${slice.length}) ${op.tableOrder}`);
        break;
      }
      case "share": {
        if (op.i % 6 >= tables.length || tables.length >= 6) break;
        const src = tables[op.i % 6]!;
        const n = src.blocks[1].length;
        if (n === 0) break;
        const from = op.from % n;
        const to = Math.min(n, from + op.len);
        sh.shared++;
        const t = tableAt(tables.length);
        pools.forEach((p, k) => {
          const ids = src.blocks[k as 0 | 1].slice(from, to).filter((b) => b !== NULL_BLOCK);
          p.touch(ids);
          t.blocks[k as 0 | 1].push(...ids);
        });
        compare(`share ${src.serial} [${from}, ${to}) as ${t.serial}`);
        break;
      }
      case "uncache": {
        const hashed: number[] = [];
        for (let b = 1; b < pages; b++) if (ref.isHashed(b)) hashed.push(b);
        if (hashed.length === 0) break;
        const b = hashed[op.pick % hashed.length]!;
        // The key and group of block b: the snapshot entry listing it among its copies.
        const entry = ref.cacheSnapshot().find((e) =>
          e
            .slice(e.lastIndexOf(":") + 1)
            .split("/")
            .map(Number)
            .includes(b),
        )!;
        const [g, h] = entry.split(":");
        sh.uncached++;
        pools.forEach((p) => {
          p.uncache(Number(g), BigInt(h!));
        });
        compare(`uncache ${b}`);
        break;
      }
    }
  }
}

describe("calls that cut runs of blocks", () => {
  it("BlockPool equals the per-block reference pool after every call", () => {
    const sh: Shapes = { cutTakes: 0, middleHits: 0, partFrees: 0, mixedFrees: 0, outOfOrder: 0, shared: 0, uncached: 0 };
    fc.assert(
      fc.property(fc.integer({ min: 8, max: 300 }), fc.array(opArb, { minLength: 40, maxLength: 250 }), (pages, ops) => {
        run(pages, ops, sh);
      }),
      // A failure shrinks for at most 30 s, then is reported (before the test's timeout).
      { seed: 1207, numRuns: propRuns(150), plugins: [fc.interruptAfterTimeLimit(30_000)] },
    );
    // Every cutting shape occurred (the property is not vacuous).
    for (const [name, v] of Object.entries(sh)) expect([name, v > 0]).toEqual([name, true]);
  }, 120_000);
});

describe("the free queue after chunked takes, a partly cached table and hits", () => {
  it("a table freed tail first: its unhashed tail at the front, its hashed prefix at the back", () => {
    // 1,001 pages: the table takes 1..300 in chunks of 100, caches entries [0, 120), then is freed.
    const pool = new BlockPool(1001, 1, false, [true]);
    const table: number[] = [];
    for (let c = 0; c < 3; c++) takeIntoArray(pool, 100, table, 0);
    const keys = new Int32Array(240);
    for (let i = 0; i < 240; i++) keys[i] = 100 + i;
    pool.cacheTableRun(tableOf(table), 0, 120, 0, keys);
    expect(pool.freeTableTailFirst(tableOf(table), [])).toBe(300);
    // Unhashed 121..300 at the front (300 first), then the untouched 301..1000, then hashed 1..120 at the back (120 first).
    const q = pool.freeQueueOrder();
    expect(q.slice(0, 3)).toEqual([300, 299, 298]);
    expect(q[179]).toBe(121);
    expect(q[180]).toBe(301);
    expect(q.slice(-3)).toEqual([3, 2, 1]);
    // A take of 50 comes from the front; hits on 1..10 and on 50..59 leave the queue from the back part.
    expect(pool.takeFree(50, 0)).toEqual(Array.from({ length: 50 }, (_, i) => 300 - i));
    pool.touch(Array.from({ length: 10 }, (_, i) => 1 + i));
    pool.touch(Array.from({ length: 10 }, (_, i) => 50 + i));
    expect(pool.freeQueueOrder().slice(-3)).toEqual([13, 12, 11]);
    expect(pool.numFree).toBe(1000 - 300 + 300 - 50 - 20);
  });

  it("single-block takes by two interleaved tables, freed tail first one after the other", () => {
    const pool = new BlockPool(20, 1, false);
    const a: number[] = [];
    const b: number[] = [];
    for (let k = 0; k < 4; k++) {
      takeIntoArray(pool, 1, a, 0);
      takeIntoArray(pool, 1, b, 0);
    }
    expect(a).toEqual([1, 3, 5, 7]);
    expect(b).toEqual([2, 4, 6, 8]);
    // Unhashed, so each free call puts its blocks at the very front in free order: b's after a's went in first.
    pool.freeTableTailFirst(tableOf(a), []);
    pool.freeTableTailFirst(tableOf(b), []);
    expect(pool.freeQueueOrder().slice(0, 8)).toEqual([8, 6, 4, 2, 7, 5, 3, 1]);
  });
});
