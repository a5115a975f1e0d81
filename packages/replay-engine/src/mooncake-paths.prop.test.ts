import type { TraceRecord } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import { glmProfile, linearProfile, traceSpec } from "./test-fixtures.js";

/**
 * Mooncake requests are lowered to path prompts (block keys from the hash-id path, no token
 * array). The same requests given as token ids (each hash id's canonical value repeated for
 * trace_block_size tokens, the tokens a path prompt stands for) must replay identically: same
 * report, digest and records, on random small traces over a few shared hash-id paths.
 */
const UNIT = 8;
const requestArb = fc.record({
  gapMs: fc.integer({ min: 0, max: 20 }),
  ids: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 8 }),
  cut: fc.nat(UNIT - 1),
  outputTokens: fc.integer({ min: 1, max: 5 }),
});

const scenarioArb = fc.record({
  requests: fc.array(requestArb, { minLength: 1, maxLength: 10 }),
  aggregated: fc.boolean(),
  router: fc.constantFrom("round_robin", "kv_aware"),
  numGpuBlocks: fc.integer({ min: 12, max: 48 }),
  blockSize: fc.constantFrom(2, 3, 4, 8),
  /** Hash ids as drawn (an id may recur anywhere), or one id per path prefix (as real traces). */
  rawIds: fc.boolean(),
});

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

function traces(s: Scenario): { paths: TraceRecord[]; tokens: TraceRecord[] } {
  let t = 0;
  // Canonical ids in first-appearance order over the stream, as the lowering interns them.
  const canonical = new Map<number, number>();
  const paths: TraceRecord[] = [];
  const tokens: TraceRecord[] = [];
  s.requests.forEach((r, i) => {
    t += r.gapMs;
    // Hash ids of request i: its path over a 4-id alphabet, made prefix-consistent (a path's id at
    // depth d depends on the ids before it, as hash ids of a real prefix tree do).
    const hashIds = s.rawIds ? r.ids : r.ids.map((_, d) => r.ids.slice(0, d + 1).reduce((h, x) => h * 5 + x + 1, 0));
    const inputTokens = Math.max(1, hashIds.length * UNIT - r.cut);
    const used = Math.ceil(inputTokens / UNIT);
    const ids = hashIds.slice(0, used).map((h) => {
      if (!canonical.has(h)) canonical.set(h, canonical.size);
      return canonical.get(h)!;
    });
    const base = { line: i + 1, arrivalMs: t, inputTokens, outputTokens: r.outputTokens };
    paths.push({ ...base, hashIds });
    tokens.push({ ...base, inputTokenIds: Uint32Array.from({ length: inputTokens }, (_, k) => ids[Math.floor(k / UNIT)]!) });
  });
  return { paths, tokens };
}

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`no progress: ${r.reason}`);
  return r;
}

describe("Mooncake path prompts replay as their tokens do", () => {
  it("linear profile, aggregated or P/D: same report, digest and records", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (s) => {
        const spec = traceSpec({
          profile: linearProfile(1000),
          topology: s.aggregated ? { kind: "aggregated", workers: 2 } : { kind: "disaggregated", prefill: { workers: 2 }, decode: { workers: 1 } },
          router: s.router,
          engine: { num_gpu_blocks: s.numGpuBlocks, block_size: s.blockSize, max_num_batched_tokens: 16, max_num_seqs: 4 },
          timing: { type: "fixed", prefill_ms: 2, decode_ms: 1 },
          workload: { trace: "t.jsonl", format: "mooncake", trace_block_size: UNIT },
        });
        const { paths, tokens } = traces(s);
        const a = ok(await runReplay({ spec, records: paths }));
        const b = ok(await runReplay({ spec, records: tokens }));
        expect(a.report).toEqual(b.report);
        expect(a.records).toEqual(b.records);
      }),
      { seed: 1212, numRuns: 120 },
    );
  }, 120_000);

  it("GLM-5.3-Flash in P/D (2,176-token blocks over 512-token ids): same report and records", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            gapMs: fc.integer({ min: 0, max: 30 }),
            ids: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 14 }),
            out: fc.integer({ min: 1, max: 3 }),
          }),
          { minLength: 1, maxLength: 5 },
        ),
        async (reqs) => {
          let t = 0;
          const canonical = new Map<number, number>();
          const paths: TraceRecord[] = [];
          const tokens: TraceRecord[] = [];
          reqs.forEach((r, i) => {
            t += r.gapMs;
            const hashIds = r.ids.map((_, d) => r.ids.slice(0, d + 1).reduce((h, x) => h * 4 + x + 1, 0));
            const inputTokens = hashIds.length * 512;
            const ids = hashIds.map((h) => {
              if (!canonical.has(h)) canonical.set(h, canonical.size);
              return canonical.get(h)!;
            });
            paths.push({ line: i + 1, arrivalMs: t, inputTokens, outputTokens: r.out, hashIds });
            tokens.push({
              line: i + 1,
              arrivalMs: t,
              inputTokens,
              outputTokens: r.out,
              inputTokenIds: Uint32Array.from({ length: inputTokens }, (_, k) => ids[Math.floor(k / 512)]!),
            });
          });
          const spec = traceSpec({
            profile: glmProfile("0.32.0"),
            topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
            router: "kv_aware",
            engine: { num_gpu_blocks: 24 },
            timing: { type: "fixed", prefill_ms: 3, decode_ms: 1 },
            kv_transfer: { bandwidth_gbps: 10 },
            workload: { trace: "t.jsonl", format: "mooncake", trace_block_size: 512 },
          });
          const a = ok(await runReplay({ spec, records: paths }));
          const b = ok(await runReplay({ spec, records: tokens }));
          expect(a.report).toEqual(b.report);
          expect(a.records).toEqual(b.records);
        },
      ),
      { seed: 1213, numRuns: 25 },
    );
  }, 120_000);
});
