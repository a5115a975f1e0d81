import type { CacheGroup } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NULL_BLOCK, type PoolOps } from "./block-pool.js";
import type { BlockHash, KvSequence } from "./contract.js";
import { KvCacheManager, poolOf } from "./kv-cache-manager.js";
import { createPromptTokens } from "./prompt-tokens.js";
import { ReferencePool } from "./reference-pool.js";
import { eventsText, group, poolState, propRuns, tablesOf } from "./test-helpers.js";
import { tableEntries, type BlockTable } from "./block-table.js";

interface Layout {
  readonly name: string;
  readonly groups: CacheGroup[];
  readonly caching: boolean;
  readonly version: string;
}

/*
 * Harness for block runs (docs/design/performance.md §6, stage 0): the same managers over BlockPool and
 * over the reference pool, driven in lockstep through the shapes runs would change, compared after
 * every call (queue order, every block's reference count and flags, cache contents, metrics,
 * per-group pages, events, every live table). Tables are hundreds of blocks long, prompts share
 * prefixes of every length (and whole prompts, so two tables cache one key), the pool fills up so
 * takes evict, windows drop their lowest blocks, Mamba states are cached and hit, and running tables
 * are preempted mid-way. Counters on the reference side show each shape really occurs.
 */
interface Shapes {
  /** takeFreeInto calls of 1 block, of >= 64 blocks, and the largest. */
  takes1: number;
  bigTakes: number;
  maxTake: number;
  /** Hashed blocks taken (evicted); of them, blocks whose key had another copy. */
  evicted: number;
  evictedDup: number;
  /** Touched (hit) blocks taken out of the free queue, and ones another table still referenced. */
  hitFromQueue: number;
  hitShared: number;
  /** Tables freed tail first with >= 100 real blocks; the longest. */
  longFrees: number;
  maxFreedTable: number;
  /** Hits whose cached chain continues past the hit's end (in the queue, or still referenced). */
  hitMidChainQueued: number;
  hitMidChainHeld: number;
  /** Window blocks dropped below the window (remove_skipped_blocks, source release). */
  windowFreed: number;
  /** Hits > 0 in a layout with a Mamba group (the fixed point needs a Mamba state hit). */
  mambaHits: number;
  /** Running tables of >= 100 blocks preempted before their end; re-admissions of them that hit. */
  longPreempts: number;
  rehits: number;
  /** Keys with two copies seen in the cache. */
  dupKeys: number;
  maxTable: number;
}

const noShapes = (): Shapes => ({
  takes1: 0,
  bigTakes: 0,
  maxTake: 0,
  evicted: 0,
  evictedDup: 0,
  hitFromQueue: 0,
  hitShared: 0,
  longFrees: 0,
  maxFreedTable: 0,
  hitMidChainQueued: 0,
  hitMidChainHeld: 0,
  windowFreed: 0,
  mambaHits: 0,
  longPreempts: 0,
  rehits: 0,
  dupKeys: 0,
  maxTable: 0,
});

/** Copies of each cached key, from a cache snapshot ("group:hash:id/id/..."). */
const copiesOf = (pool: PoolOps): number[][] =>
  pool.cacheSnapshot().map((e) =>
    e
      .slice(e.lastIndexOf(":") + 1)
      .split("/")
      .map(Number),
  );

/** The reference pool, counting the shapes of the calls it serves (it changes nothing). */
class CountingReferencePool extends ReferencePool {
  constructor(
    numPages: number,
    numGroups: number,
    collectEvents: boolean,
    private readonly shapes: Shapes,
  ) {
    super(numPages, numGroups, collectEvents);
  }
  override takeFreeInto(n: number, out: BlockTable, group = -1): void {
    const s = this.shapes;
    if (n === 1) s.takes1++;
    if (n >= 64) s.bigTakes++;
    s.maxTake = Math.max(s.maxTake, n);
    const front = this.freeQueueOrder()
      .slice(0, n)
      .filter((b) => this.isHashed(b));
    if (front.length > 0) {
      s.evicted += front.length;
      const dup = new Set(
        copiesOf(this)
          .filter((c) => c.length > 1)
          .flat(),
      );
      for (const b of front) if (dup.has(b)) s.evictedDup++;
    }
    super.takeFreeInto(n, out, group);
  }
  override touch(ids: readonly number[]): void {
    for (const id of ids) {
      if (id === NULL_BLOCK) continue;
      if (this.refCount(id) > 0) this.shapes.hitShared++;
      else this.shapes.hitFromQueue++;
    }
    super.touch(ids);
  }
  override freeTableTailFirst(table: BlockTable, then: readonly number[]): number {
    const real = tableEntries(table).filter((b) => b !== NULL_BLOCK).length;
    if (real >= 100) this.shapes.longFrees++;
    this.shapes.maxFreedTable = Math.max(this.shapes.maxFreedTable, real);
    return super.freeTableTailFirst(table, then);
  }
}

function countingManager(shapes: Shapes): typeof KvCacheManager {
  return class extends KvCacheManager {
    protected override createPool(numPages: number, numGroups: number, collectEvents: boolean): PoolOps {
      return new CountingReferencePool(numPages, numGroups, collectEvents, shapes);
    }
  };
}

const LONG_LAYOUTS: Layout[] = [
  { name: "full attention, block 4 (linked runs)", groups: [group("full_attention", 4)], caching: true, version: "0.31.0" },
  {
    name: "full + sliding window (16 blocks) + Mamba, block 4",
    groups: [group("full_attention", 4), group("sliding_window", 4, { window_tokens: 64 }), group("state", 4, { name: "mamba" })],
    caching: true,
    version: "0.31.0",
  },
];

/** Two 1,600-token bases (400 blocks of 4), distinct from their first token: prompts take a prefix of one. */
const LONG_BASES = [0, 1].map((b) => Array.from({ length: 1600 }, (_, i) => (i === 0 ? b : (i * (2 * b + 3) + b) % 11)));
/** Each base's block hashes at block size 4 (the full-attention group's). */
const LONG_BASE_HASHES: readonly (readonly BlockHash[])[] = LONG_BASES.map((t) => createPromptTokens(Uint32Array.from(t)).blockHashes(4));

type LongOp =
  | { t: "new"; base: number; prefix: number; suffix: number; salt: number }
  | { t: "admit"; i: number; chunk: number }
  | { t: "step"; i: number; chunk: number }
  | { t: "decode"; i: number; k: number }
  | { t: "free"; i: number }
  | { t: "preempt"; i: number }
  | { t: "release"; i: number };

const longOpArb: fc.Arbitrary<LongOp> = fc.oneof(
  // salt 0: a suffix of the request's own; salt 1-2: a shared one (same base, prefix and suffix: the same prompt).
  { weight: 3, arbitrary: fc.record({ t: fc.constant("new" as const), base: fc.nat(1), prefix: fc.nat(1600), suffix: fc.nat(120), salt: fc.nat(2) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant("admit" as const),
      i: fc.nat(),
      chunk: fc.oneof(fc.integer({ min: 1, max: 16 }), fc.integer({ min: 256, max: 1600 })),
    }),
  },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("step" as const), i: fc.nat(), chunk: fc.integer({ min: 1, max: 800 }) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("decode" as const), i: fc.nat(), k: fc.integer({ min: 1, max: 24 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("free" as const), i: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("preempt" as const), i: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("release" as const), i: fc.nat() }) },
);

interface Pair {
  readonly a: KvSequence;
  readonly r: KvSequence;
  readonly base: number;
  /** Tokens taken from the base. */
  readonly prefix: number;
  computed: number;
  state: "waiting" | "running" | "held";
  preempted: boolean;
}

/** Drives a BlockPool manager and a reference one in lockstep; fails at the first call whose results differ. */
function lockstep(layout: Layout, numPages: number, ops: readonly LongOp[], collectEvents: boolean, shapes: Shapes): void {
  const opts = { numPages, groups: layout.groups, enablePrefixCaching: layout.caching, vllmVersion: layout.version, collectEvents };
  const a = new KvCacheManager(opts);
  const r = new (countingManager(shapes))(opts);
  const pa = poolOf(a);
  const pr = poolOf(r);
  const win = layout.groups.findIndex((g) => g.kind === "sliding_window");
  const hasMamba = layout.groups.some((g) => g.kind === "state" && g.prefix_cacheable === true);
  const live: Pair[] = [];
  let serial = 0;
  let call = 0;
  const compare = (what: string): void => {
    call++;
    const tables = (m: "a" | "r"): string =>
      live
        .map(
          (l) =>
            `${l.a.id}=${tablesOf(l[m])
              .map((t) => t.join("."))
              .join("|")}`,
        )
        .join(" ");
    const sa = { call, what, ...poolState(pa, true), events: eventsText(a.takeEvents()), tables: tables("a") };
    const sr = { call, what, ...poolState(pr, false), events: eventsText(r.takeEvents()), tables: tables("r") };
    expect(sa).toEqual(sr);
    const dups = copiesOf(pr).filter((c) => c.length > 1).length;
    shapes.dupKeys = Math.max(shapes.dupKeys, dups);
    for (const l of live) shapes.maxTable = Math.max(shapes.maxTable, tablesOf(l.r)[0]!.length);
  };
  const pick = (i: number, states: Pair["state"][]): Pair | undefined => {
    const c = live.filter((l) => states.includes(l.state));
    return c.length === 0 ? undefined : c[i % c.length];
  };
  const nulls = (l: Pair): number => (win < 0 ? 0 : tablesOf(l.r)[win]!.filter((b) => b === NULL_BLOCK).length);
  /** One allocateSlots (+ commit) on both; the window blocks it drops are counted. */
  const allocate = (l: Pair, n: number, what: string): boolean => {
    const before = nulls(l);
    const ok = a.allocateSlots(l.a, { computedTokens: l.computed, newTokens: n });
    expect(r.allocateSlots(l.r, { computedTokens: l.computed, newTokens: n })).toBe(ok);
    if (ok) {
      l.computed += n;
      a.commitComputed(l.a, l.computed);
      r.commitComputed(l.r, l.computed);
    }
    shapes.windowFreed += nulls(l) - before;
    compare(`${what} ${l.a.id} n ${n} ${ok}`);
    return ok;
  };

  for (const op of ops) {
    switch (op.t) {
      case "new": {
        const tokens = LONG_BASES[op.base]!.slice(0, op.prefix);
        const id = serial++;
        for (let i = 0; i < op.suffix || tokens.length < 2; i++) tokens.push(op.salt === 0 ? 1000 + id : 20 + op.salt * 5 + (i % 5));
        const prompt = createPromptTokens(Uint32Array.from(tokens));
        live.push({
          a: a.createSequence(`r${id}`, prompt),
          r: r.createSequence(`r${id}`, prompt),
          base: op.base,
          prefix: op.prefix,
          computed: 0,
          state: "waiting",
          preempted: false,
        });
        break;
      }
      case "admit": {
        const l = pick(op.i, ["waiting"]);
        if (l === undefined) break;
        const hit = a.findPrefixHit(l.a);
        const hitR = r.findPrefixHit(l.r);
        expect(hit.tokens).toBe(hitR.tokens);
        const h = hit.tokens / 4;
        if (h > 0) {
          if (hasMamba) shapes.mambaHits++;
          if (l.preempted) shapes.rehits++;
          // The hit lies inside the base: does the base's cached chain go on past it?
          const hashes = LONG_BASE_HASHES[l.base]!;
          if (l.prefix >= hit.tokens && h < hashes.length) {
            const next = pr.cachedBlock(0, hashes[h]!);
            if (next !== NULL_BLOCK && pr.refCount(next) === 0) shapes.hitMidChainQueued++;
            if (next !== NULL_BLOCK && pr.refCount(next) > 0) shapes.hitMidChainHeld++;
          }
        }
        const n = Math.min(op.chunk, l.a.numTokens - hit.tokens);
        const ok = a.allocateSlots(l.a, { computedTokens: 0, newTokens: n, hit });
        expect(r.allocateSlots(l.r, { computedTokens: 0, newTokens: n, hit: hitR })).toBe(ok);
        if (ok) {
          l.computed = hit.tokens + n;
          a.commitComputed(l.a, l.computed);
          r.commitComputed(l.r, l.computed);
          l.state = "running";
        }
        compare(`admit ${l.a.id} hit ${hit.tokens} n ${n} ${ok}`);
        break;
      }
      case "step": {
        const l = pick(op.i, ["running"]);
        if (l === undefined) break;
        if (l.computed >= l.a.numTokens) break;
        allocate(l, Math.min(op.chunk, l.a.numTokens - l.computed), "step");
        break;
      }
      case "decode": {
        const l = pick(op.i, ["running"]);
        if (l === undefined) break;
        // Single-token steps after the prompt: a block taken every 4th, one at a time.
        for (let k = 0; k < op.k; k++) {
          if (l.computed >= l.a.numTokens) {
            l.a.appendToken(l.a.numTokens % 5);
            l.r.appendToken(l.r.numTokens % 5);
          }
          if (!allocate(l, 1, "decode")) break;
        }
        break;
      }
      case "free":
      case "preempt": {
        const l = pick(op.i, op.t === "free" ? ["running", "held"] : ["running"]);
        if (l === undefined) break;
        if (op.t === "preempt" && l.computed < l.a.numTokens && tablesOf(l.r)[0]!.length >= 100) shapes.longPreempts++;
        a.free(l.a);
        r.free(l.r);
        if (op.t === "free") live.splice(live.indexOf(l), 1);
        else Object.assign(l, { computed: 0, state: "waiting", preempted: true });
        compare(`${op.t} ${l.a.id}`);
        break;
      }
      case "release": {
        const l = pick(op.i, ["running"]);
        if (l === undefined || l.computed < l.a.numTokens) break;
        const before = nulls(l);
        expect(a.releaseSourceSkipped(l.a, l.computed)).toBe(r.releaseSourceSkipped(l.r, l.computed));
        shapes.windowFreed += nulls(l) - before;
        l.state = "held";
        compare(`release ${l.a.id}`);
        break;
      }
    }
  }
}

/**
 * A failure on states this large shrinks slowly (minutes): past this time fast-check stops
 * shrinking and reports the counterexample it has, before the test's timeout.
 */
const SHRINK_LIMIT_MS = 30_000;

const win = (layout: Layout): boolean => layout.groups.some((g) => g.kind === "sliding_window");

describe("block-runs harness: BlockPool and the reference pool in lockstep on long tables", () => {
  LONG_LAYOUTS.forEach((layout, li) => {
    for (const collectEvents of [true, false]) {
      it(`same state after every call, ${collectEvents ? "with events" : "without events (batched caching)"}: ${layout.name}`, () => {
        const shapes = noShapes();
        fc.assert(
          fc.property(fc.integer({ min: 120, max: 700 }), fc.array(longOpArb, { minLength: 40, maxLength: 120 }), (pages, ops) => {
            lockstep(layout, pages, ops, collectEvents, shapes);
          }),
          { seed: 3100 + 2 * li + (collectEvents ? 0 : 1), numRuns: propRuns(30), plugins: [fc.interruptAfterTimeLimit(SHRINK_LIMIT_MS)] },
        );
        // The shapes occurred (the property is not vacuous): long tables taken in big chunks and
        // single blocks, freed whole; evictions, also of duplicated keys; hits out of the queue, on
        // blocks another table holds, and ending where the cached chain goes on; long preemptions.
        expect(shapes.maxTable).toBeGreaterThanOrEqual(200);
        expect(shapes.maxTake).toBeGreaterThanOrEqual(200);
        expect(shapes.bigTakes).toBeGreaterThan(0);
        expect(shapes.takes1).toBeGreaterThan(0);
        expect(shapes.longFrees).toBeGreaterThan(0);
        expect(shapes.evicted).toBeGreaterThan(0);
        expect(shapes.evictedDup).toBeGreaterThan(0);
        expect(shapes.dupKeys).toBeGreaterThan(0);
        expect(shapes.hitFromQueue).toBeGreaterThan(0);
        expect(shapes.hitShared).toBeGreaterThan(0);
        expect(shapes.hitMidChainQueued).toBeGreaterThan(0);
        expect(shapes.hitMidChainHeld).toBeGreaterThan(0);
        expect(shapes.longPreempts).toBeGreaterThan(0);
        expect(shapes.rehits).toBeGreaterThan(0);
        // Windows and Mamba states only in the hybrid layout.
        expect(shapes.windowFreed > 0).toBe(win(layout));
        expect(shapes.mambaHits > 0).toBe(win(layout));
      }, 120_000);
    }
  });
});
