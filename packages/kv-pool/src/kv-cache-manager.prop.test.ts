import type { CacheGroup } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NULL_BLOCK } from "./block-pool.js";
import type { KvSequence } from "./contract.js";
import { KvCacheManager, poolOf } from "./kv-cache-manager.js";
import { createPromptTokens } from "./prompt-tokens.js";
import { Sequence } from "./sequence.js";
import { ReferenceKvCacheManager } from "./reference-pool.js";
import { group, propRuns } from "./test-helpers.js";
import { dropSpareTables, EMPTY_TABLE, pushBlock, releaseTable, tableEntries, type BlockTable } from "./block-table.js";

interface Layout {
  readonly name: string;
  readonly groups: CacheGroup[];
  readonly caching: boolean;
  readonly version: string;
}

const LAYOUTS: Layout[] = [
  {
    name: "full + SW + Mamba + ring",
    groups: [
      group("full_attention", 4),
      group("sliding_window", 4, { window_tokens: 6 }),
      group("state", 4, { name: "mamba" }),
      group("state", 4, { name: "ring", prefix_cacheable: false }),
    ],
    caching: true,
    version: "0.31.0",
  },
  {
    name: "GLM-like 0.32.0 with checkpoint blocks",
    groups: [
      group("full_attention", 4),
      group("state", 4, { name: "ring", prefix_cacheable: false }),
      group("state", 4, { name: "kda0", prefill_checkpoint_blocks: 1 }),
      group("state", 4, { name: "kda1", prefill_checkpoint_blocks: 2 }),
    ],
    caching: true,
    version: "0.32.0",
  },
  {
    name: "full B4 + SW B8 (lcm 8)",
    groups: [group("full_attention", 4), group("sliding_window", 8, { window_tokens: 8 }), group("convolution", 4, { window_tokens: 3 })],
    caching: true,
    version: "0.31.0",
  },
  { name: "full only, caching off", groups: [group("full_attention", 4)], caching: false, version: "0.31.0" },
  { name: "full only (runs of linked blocks)", groups: [group("full_attention", 4)], caching: true, version: "0.31.0" },
  {
    name: "two full-attention groups of one spec (searched together)",
    groups: [group("full_attention", 4), group("full_attention", 4, { name: "fa2" })],
    caching: true,
    version: "0.31.0",
  },
  { name: "full + Mamba, caching off", groups: [group("full_attention", 4), group("state", 4, { name: "mamba" })], caching: false, version: "0.32.0" },
];

type Op =
  | { t: "new"; base: number; len: number; salt: number }
  | { t: "admit"; i: number; chunk: number }
  | { t: "step"; i: number; chunk: number }
  | { t: "free"; i: number }
  | { t: "preempt"; i: number }
  | { t: "release"; i: number }
  | { t: "reserve"; base: number; len: number }
  | { t: "activate"; i: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ t: fc.constant("new" as const), base: fc.nat(2), len: fc.integer({ min: 2, max: 48 }), salt: fc.nat(3) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("admit" as const), i: fc.nat(), chunk: fc.integer({ min: 1, max: 48 }) }) },
  { weight: 6, arbitrary: fc.record({ t: fc.constant("step" as const), i: fc.nat(), chunk: fc.integer({ min: 1, max: 24 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("free" as const), i: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("preempt" as const), i: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("release" as const), i: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("reserve" as const), base: fc.nat(2), len: fc.integer({ min: 2, max: 48 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("activate" as const), i: fc.nat() }) },
);

/** Three 48-token bases over a small alphabet, so prompts share prefixes and repeat blocks. */
const BASES = [0, 1, 2].map((b) => Array.from({ length: 48 }, (_, i) => (b === 2 ? i % 3 : (i * (b + 3)) % 7)));

interface Live {
  seq: KvSequence;
  computed: number;
  /** Tokens made cache-visible so far. */
  committed: number;
  state: "waiting" | "running" | "held" | "reserved";
  transferred: number;
}

/** Runs the ops; returns a transcript of outcomes and checks the invariants after each one. */
function run(layout: Layout, numPages: number, ops: readonly Op[], Manager: typeof KvCacheManager = KvCacheManager, collectEvents = true): string[] {
  const m = new Manager({ numPages, groups: layout.groups, enablePrefixCaching: layout.caching, vllmVersion: layout.version, collectEvents });
  const pool = poolOf(m);
  const hasMamba = layout.caching && layout.groups.some((g) => g.kind === "state" && g.prefix_cacheable === true);
  const live: Live[] = [];
  const log: string[] = [];
  let nextId = 0;
  const pick = (i: number, states: Live["state"][]): Live | undefined => {
    const c = live.filter((l) => states.includes(l.state));
    return c.length === 0 ? undefined : c[i % c.length];
  };
  const drop = (l: Live): void => {
    live.splice(live.indexOf(l), 1);
  };
  const make = (base: number, len: number, salt: number): KvSequence => {
    const tokens = BASES[base]!.slice(0, len);
    if (salt > 0) tokens.push(100 + salt);
    return m.createSequence(`r${nextId++}`, createPromptTokens(Uint32Array.from(tokens)));
  };

  for (const op of ops) {
    switch (op.t) {
      case "new":
        live.push({ seq: make(op.base, op.len, op.salt), computed: 0, committed: 0, state: "waiting", transferred: 0 });
        log.push("new");
        break;
      case "admit": {
        const l = pick(op.i, ["waiting"]);
        if (l === undefined) break;
        const hit = m.findPrefixHit(l.seq);
        expect(hit.tokens).toBeLessThanOrEqual(l.seq.numTokens - 1);
        const n = Math.min(op.chunk, l.seq.numTokens - hit.tokens);
        const ok = m.allocateSlots(l.seq, { computedTokens: 0, newTokens: n, hit });
        if (ok) {
          l.computed = hit.tokens + n;
          m.commitComputed(l.seq, l.computed);
          l.committed = l.computed;
          l.state = "running";
        }
        log.push(`admit ${l.seq.id} hit ${hit.tokens} n ${n} ${ok}`);
        break;
      }
      case "step": {
        const l = pick(op.i, ["running"]);
        if (l === undefined) break;
        if (l.computed >= l.seq.numTokens) l.seq.appendToken(l.seq.numTokens % 5);
        const n = Math.min(op.chunk, l.seq.numTokens - l.computed);
        const ok = m.allocateSlots(l.seq, { computedTokens: l.computed, newTokens: n });
        if (ok) {
          l.computed += n;
          m.commitComputed(l.seq, l.computed);
          l.committed = l.computed;
        }
        log.push(`step ${l.seq.id} n ${n} ${ok}`);
        break;
      }
      case "free":
      case "preempt": {
        const l = pick(op.i, op.t === "free" ? ["running", "held", "reserved"] : ["running"]);
        if (l === undefined) break;
        m.free(l.seq);
        if (op.t === "free") drop(l);
        else Object.assign(l, { computed: 0, committed: 0, state: "waiting" });
        log.push(`${op.t} ${l.seq.id}`);
        break;
      }
      case "release": {
        const l = pick(op.i, ["running"]);
        if (l === undefined || l.computed < l.seq.numTokens) break;
        log.push(`release ${l.seq.id} ${m.releaseSourceSkipped(l.seq, l.computed)}`);
        l.state = "held";
        break;
      }
      case "reserve": {
        const seq = make(op.base, op.len, 0);
        const t = hasMamba ? seq.numTokens - 1 : seq.numTokens;
        const res = m.reserveDestination(seq, t);
        if (res !== undefined) {
          expect(res.hitTokens).toBeLessThanOrEqual(Math.min(t, seq.numTokens - 1));
          live.push({ seq, computed: 0, committed: res.hitTokens, state: "reserved", transferred: t });
        }
        log.push(`reserve ${seq.id} ${JSON.stringify(res)}`);
        break;
      }
      case "activate": {
        const l = pick(op.i, ["reserved"]);
        if (l === undefined) break;
        m.activateDestination(l.seq, l.transferred);
        l.committed = l.transferred;
        l.computed = Math.min(l.transferred, l.seq.numTokens - 1);
        l.state = "running";
        log.push(`activate ${l.seq.id}`);
        break;
      }
    }
    checkInvariants(m, layout, live);
  }
  log.push(
    pool.freeQueueOrder().join(","),
    pool.cacheSnapshot().join(";"),
    JSON.stringify(m.takeEvents(), (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)),
  );
  return log;
}

function checkInvariants(m: KvCacheManager, layout: Layout, live: readonly Live[]): void {
  const pool = poolOf(m);
  const met = m.metrics();
  const errors: string[] = [];
  // Block conservation.
  if (met.usedPages + met.freePages !== pool.numPages - 1) errors.push(`used ${met.usedPages} + free ${met.freePages} != ${pool.numPages - 1}`);
  // Reference counts equal the references held by live sequences (tables and checkpoints).
  const refs = new Int32Array(pool.numPages);
  // The group whose tables reference each block (+1), for the per-group counters.
  const ownerOf = new Int32Array(pool.numPages);
  for (const l of live) {
    const s = l.seq;
    if (!(s instanceof Sequence)) throw new Error("not a pool sequence");
    s.groups.forEach((st, g) => {
      const b = layout.groups[g]!.block_size_tokens;
      const chain = s.chain(b);
      tableEntries(st).forEach((blk, i) => {
        if (blk === NULL_BLOCK) return;
        refs[blk]!++;
        ownerOf[blk] = g + 1;
        if (!pool.isHashed(blk)) return;
        // Cache-visible only once computed, and under this sequence's own key.
        if ((i + 1) * b > l.committed) errors.push(`${s.id} g${g}[${i}] cached before computed (${l.committed})`);
        if (!pool.holds(blk, g, chain.ensure(i + 1).blockHash(i))) errors.push(`${s.id} g${g}[${i}] holds a foreign key`);
      });
      st.checkpoints.forEach((blk, j) => {
        refs[blk]!++;
        ownerOf[blk] = g + 1;
        const i = st.checkpointHashIdx[j]!;
        if (pool.isHashed(blk) && !pool.holds(blk, g, chain.ensure(i + 1).blockHash(i))) errors.push(`${s.id} g${g} checkpoint ${j} holds a foreign key`);
      });
    });
  }
  let hashedFree = 0;
  for (let b = 1; b < pool.numPages; b++) {
    if (pool.refCount(b) !== refs[b]) errors.push(`block ${b}: ref ${pool.refCount(b)}, referenced ${refs[b]}`);
    // No block is both free and referenced (and none is neither).
    if (pool.isFree(b) !== (refs[b] === 0)) errors.push(`block ${b}: free ${pool.isFree(b)}, referenced ${refs[b]}`);
    if (pool.isFree(b) && pool.isHashed(b)) hashedFree++;
  }
  if (pool.isFree(NULL_BLOCK)) errors.push("the null block is free");
  if (met.cachedEvictablePages !== hashedFree) errors.push(`cached-evictable ${met.cachedEvictablePages} != ${hashedFree}`);
  // Per group: used pages are the distinct blocks its tables hold; cached ones add up to the pool's.
  const gp = m.groupPages();
  const usedOf = new Array<number>(layout.groups.length).fill(0);
  for (let b = 1; b < pool.numPages; b++) if (ownerOf[b]! > 0) usedOf[ownerOf[b]! - 1]!++;
  if (Array.from(gp.used).join() !== usedOf.join()) errors.push(`group used ${Array.from(gp.used).join()} != ${usedOf.join()}`);
  let cachedSum = 0;
  for (const c of Array.from(gp.cached)) cachedSum += c;
  if (cachedSum !== hashedFree) errors.push(`group cached sum ${cachedSum} != ${hashedFree}`);
  if (Math.abs(met.usage - (1 - met.freePages / (pool.numPages - 1))) > 1e-12) errors.push(`usage ${met.usage}`);
  expect(errors).toEqual([]);
}

describe("KvCacheManager properties", () => {
  for (const layout of LAYOUTS) {
    it(`keeps its invariants under random operations and is deterministic: ${layout.name}`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 6, max: 48 }), fc.array(opArb, { minLength: 30, maxLength: 120 }), (pages, ops) => {
          const a = run(layout, pages, ops);
          const b = run(layout, pages, ops);
          expect(b).toEqual(a);
        }),
        { numRuns: propRuns(100) },
      );
    });
  }

  it("layouts with checkpoint blocks really take them (the properties exercise that path)", () => {
    const m = new KvCacheManager({ numPages: 8, groups: LAYOUTS[1]!.groups, enablePrefixCaching: true, vllmVersion: "0.32.0" });
    expect(m.prefillChunking).toBe("whole_blocks_before_final");
    const s = m.createSequence("s", createPromptTokens(Uint32Array.from(BASES[0]!.slice(0, 10))));
    // 10 tokens, B 4: full cdiv(10,4) = 3, ring 1, kda0 1 + 1 checkpoint, kda1 1 + 2 checkpoints -> 9 > 7 usable.
    expect(m.pagesNeeded(s, { computedTokens: 0, newTokens: 10 })).toBe(9);
    expect(m.allocateSlots(s, { computedTokens: 0, newTokens: 10 })).toBe(false);
  });
});

/**
 * Fills the kept table buffers with block 1 past their tables' ends: a table that grows into one
 * of them and reads past its numBlocks would meet a real block id, and its results would change.
 */
function poisonSpareTables(): void {
  for (let capacity = 16; capacity <= 256; capacity *= 2) {
    for (let k = 0; k < 8; k++) {
      const t: BlockTable = { blocks: EMPTY_TABLE, numBlocks: 0 };
      for (let i = 0; i < capacity; i++) pushBlock(t, 1);
      releaseTable(t);
    }
  }
}

describe("recycled table buffers: entries past a table's end are never read", () => {
  for (const layout of LAYOUTS) {
    it(`the same results with fresh buffers and with buffers full of block 1: ${layout.name}`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 6, max: 48 }), fc.array(opArb, { minLength: 30, maxLength: 120 }), fc.boolean(), (pages, ops, events) => {
          dropSpareTables();
          const fresh = run(layout, pages, ops, KvCacheManager, events);
          dropSpareTables();
          poisonSpareTables();
          expect(run(layout, pages, ops, KvCacheManager, events)).toEqual(fresh);
        }),
        { seed: 20261203, numRuns: propRuns(100) },
      );
    }, 120_000);
  }
});

describe("the block pool (runs, lazy storage) gives the results of the straightforward reference pool", () => {
  for (const layout of LAYOUTS) {
    it(`same hits, allocations, tables, free queue, cache contents and events: ${layout.name}`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 6, max: 48 }), fc.array(opArb, { minLength: 30, maxLength: 160 }), (pages, ops) => {
          expect(run(layout, pages, ops)).toEqual(run(layout, pages, ops, ReferenceKvCacheManager));
        }),
        { seed: 1212, numRuns: propRuns(200) },
      );
    }, 120_000);
  }
  // Without events the managers take the pool's batched paths (cacheTableRun): same results.
  for (const layout of LAYOUTS) {
    it(`same results without events (the batched caching path): ${layout.name}`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 6, max: 48 }), fc.array(opArb, { minLength: 30, maxLength: 160 }), (pages, ops) => {
          expect(run(layout, pages, ops, KvCacheManager, false)).toEqual(run(layout, pages, ops, ReferenceKvCacheManager, false));
        }),
        { seed: 1213, numRuns: propRuns(200) },
      );
    }, 120_000);
  }
});
