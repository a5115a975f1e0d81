import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { CacheGroup } from "@kvsim/profile-schema";
import type { KvSequence, PromptTokens } from "./contract.js";
import { KvCacheManager, poolOf } from "./kv-cache-manager.js";
import { PathPrompt, createPathPrompt, createPromptTokens } from "./prompt-tokens.js";
import { group, tablesOf, propRuns } from "./test-helpers.js";

const UNIT = 4;
/** Paths over a 3-id alphabet, so prompts share prefixes and repeat ids. */
const pathArb = fc.record({ ids: fc.array(fc.nat(2), { minLength: 1, maxLength: 10 }), cut: fc.nat(UNIT - 1) });
const lengthOf = (p: { ids: number[]; cut: number }): number => Math.max(1, p.ids.length * UNIT - p.cut);

describe("path keys of a path prompt", () => {
  it("block keys are equal exactly when the blocks end at the same token and the tokens up to there are equal", () => {
    fc.assert(
      fc.property(pathArb, pathArb, fc.integer({ min: 1, max: 6 }), (a, b, bs) => {
        const pa = new PathPrompt(Uint32Array.from(a.ids), lengthOf(a), UNIT);
        const pb = new PathPrompt(Uint32Array.from(b.ids), lengthOf(b), UNIT);
        const [ka, kb] = [pa.keys(bs), pb.keys(bs)];
        for (let i = 0; i < ka.length; i++) {
          const hi = ka.blockHi(i);
          const lo = ka.blockLo(i);
          for (let j = 0; j < kb.length; j++) {
            const end = (i + 1) * bs;
            const same = i === j && pa.tokens.subarray(0, end).every((t, k) => t === pb.tokens[k]);
            expect(hi === kb.blockHi(j) && lo === kb.blockLo(j)).toBe(same);
          }
        }
      }),
      { seed: 1212, numRuns: propRuns(500) },
    );
  });
});

type Op =
  | { t: "new"; path: { ids: number[]; cut: number } }
  | { t: "admit"; i: number; chunk: number }
  | { t: "step"; i: number }
  | { t: "free"; i: number }
  | { t: "preempt"; i: number };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ t: fc.constant("new" as const), path: pathArb }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("admit" as const), i: fc.nat(), chunk: fc.integer({ min: 1, max: 24 }) }) },
  { weight: 5, arbitrary: fc.record({ t: fc.constant("step" as const), i: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("free" as const), i: fc.nat() }) },
  // A preempted sequence is admitted again with its outputs: its hit can cover output blocks
  // (a path prompt's get lookup keys, a token prompt's real hashes).
  { weight: 1, arbitrary: fc.record({ t: fc.constant("preempt" as const), i: fc.nat() }) },
);

const LAYOUTS: { name: string; groups: CacheGroup[] }[] = [
  { name: "full attention, 4-token blocks", groups: [group("full_attention", 4)] },
  { name: "full attention, 3-token blocks (straddling ids)", groups: [group("full_attention", 3)] },
  { name: "full + SW + Mamba", groups: [group("full_attention", 4), group("sliding_window", 4, { window_tokens: 6 }), group("state", 4, { name: "mamba" })] },
];

/**
 * Runs the ops with prompts built by `prompt`; returns hits, allocations, block tables, the free
 * queue and the cache's keys per group with their copies (hash values left out: path keys are
 * not the real hashes).
 */
function run(groups: CacheGroup[], pages: number, ops: readonly Op[], events: boolean, prompt: (ids: number[], length: number) => PromptTokens): string[] {
  const m = new KvCacheManager({ numPages: pages, groups, enablePrefixCaching: true, vllmVersion: "0.31.0", collectEvents: events });
  const live: { seq: KvSequence; computed: number }[] = [];
  const log: string[] = [];
  let next = 0;
  for (const op of ops) {
    switch (op.t) {
      case "new":
        live.push({ seq: m.createSequence(`r${next++}`, prompt(op.path.ids, lengthOf(op.path))), computed: -1 });
        break;
      case "admit": {
        const l = live.filter((x) => x.computed < 0)[op.i % Math.max(1, live.length)];
        if (l === undefined) break;
        const hit = m.findPrefixHit(l.seq);
        const n = Math.min(op.chunk, l.seq.numTokens - hit.tokens);
        const ok = m.allocateSlots(l.seq, { computedTokens: 0, newTokens: n, hit });
        if (ok) {
          l.computed = hit.tokens + n;
          m.commitComputed(l.seq, l.computed);
        }
        log.push(`admit ${l.seq.id} ${hit.tokens} ${n} ${ok}`);
        break;
      }
      case "step": {
        const l = live.filter((x) => x.computed >= 0)[op.i % Math.max(1, live.length)];
        if (l === undefined) break;
        if (l.computed >= l.seq.numTokens) l.seq.appendToken(1000 + ((l.seq.numTokens * 7) % 3));
        const n = Math.min(5, l.seq.numTokens - l.computed);
        const ok = m.allocateSlots(l.seq, { computedTokens: l.computed, newTokens: n });
        if (ok) {
          l.computed += n;
          m.commitComputed(l.seq, l.computed);
        }
        log.push(`step ${l.seq.id} ${n} ${ok}`);
        break;
      }
      case "free": {
        const l = live[op.i % Math.max(1, live.length)];
        if (l === undefined) break;
        m.free(l.seq);
        live.splice(live.indexOf(l), 1);
        log.push(`free ${l.seq.id}`);
        break;
      }
      case "preempt": {
        const l = live.filter((x) => x.computed >= 0)[op.i % Math.max(1, live.length)];
        if (l === undefined) break;
        m.free(l.seq);
        l.computed = -1;
        log.push(`preempt ${l.seq.id}`);
        break;
      }
    }
    for (const l of live) log.push(JSON.stringify(tablesOf(l.seq)));
  }
  const pool = poolOf(m);
  log.push(
    pool.freeQueueOrder().join(","),
    pool
      .cacheSnapshot()
      .map((k) => k.replace(/:\d+:/, ":"))
      .sort()
      .join(";"),
  );
  if (events) log.push(JSON.stringify(m.takeEvents(), (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)));
  return log;
}

describe("path prompts give the results of the same tokens given as a token prompt", () => {
  const tokensOf = (ids: number[], length: number): PromptTokens => createPromptTokens(Uint32Array.from({ length }, (_, k) => ids[Math.floor(k / UNIT)]!));
  const pathOf = (ids: number[], length: number): PromptTokens => createPathPrompt(Uint32Array.from(ids), length, UNIT);
  for (const layout of LAYOUTS) {
    it(`same hits, tables, free queue and cache: ${layout.name}`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 8, max: 40 }), fc.array(opArb, { minLength: 10, maxLength: 80 }), (pages, ops) => {
          expect(run(layout.groups, pages, ops, false, pathOf)).toEqual(run(layout.groups, pages, ops, false, tokensOf));
        }),
        { seed: 1212, numRuns: propRuns(150) },
      );
    }, 120_000);
    it(`with KV events, the real hashes and the same events: ${layout.name}`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 8, max: 40 }), fc.array(opArb, { minLength: 10, maxLength: 80 }), (pages, ops) => {
          expect(run(layout.groups, pages, ops, true, pathOf)).toEqual(run(layout.groups, pages, ops, true, tokensOf));
        }),
        { seed: 1213, numRuns: propRuns(100) },
      );
    }, 120_000);
  }
});
