import type { TraceRecord } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import type { RequestRecord } from "./report.js";
import { byTokens, glmProfile, linearProfile, traceSpec } from "./test-fixtures.js";

/**
 * Random small traces on random topologies. Prompts draw from a small alphabet of shared
 * prefixes so prefix hits, preemptions (small pools) and rejections (prompts beyond a pool) occur.
 */
const prefixes = [Array.from({ length: 24 }, (_, k) => 9000 + k), Array.from({ length: 40 }, (_, k) => 7000 + k), [] as number[]];

const requestArb = fc.record({
  gapMs: fc.integer({ min: 0, max: 30 }),
  prefix: fc.integer({ min: 0, max: prefixes.length - 1 }),
  ownTokens: fc.integer({ min: 1, max: 48 }),
  outputTokens: fc.integer({ min: 1, max: 6 }),
});

const scenarioArb = fc.record({
  requests: fc.array(requestArb, { minLength: 1, maxLength: 10 }),
  topology: fc.oneof(
    fc.record({ kind: fc.constant("aggregated" as const), workers: fc.integer({ min: 1, max: 3 }) }),
    fc.record({
      kind: fc.constant("disaggregated" as const),
      prefill: fc.record({ workers: fc.integer({ min: 1, max: 2 }) }),
      decode: fc.record({ workers: fc.integer({ min: 1, max: 2 }) }),
    }),
  ),
  router: fc.constantFrom("round_robin", "kv_aware"),
  numGpuBlocks: fc.integer({ min: 8, max: 64 }),
  budget: fc.integer({ min: 4, max: 64 }),
  prefillMs: fc.integer({ min: 0, max: 5 }),
  decodeMs: fc.integer({ min: 0, max: 3 }),
  bandwidth: fc.option(fc.constantFrom(0.001, 1), { nil: undefined }),
  mode: fc.constantFrom("full_prompt", "destination_missing"),
  cutoff: fc.option(fc.integer({ min: 0, max: 200 }), { nil: undefined }),
});

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

function build(s: Scenario): { spec: ReturnType<typeof traceSpec>; records: TraceRecord[] } {
  let t = 0;
  const records = s.requests.map((r, i) => {
    t += r.gapMs;
    const own = Array.from({ length: r.ownTokens }, (_, k) => 100_000 * (i + 1) + k);
    return byTokens(i + 1, t, [...prefixes[r.prefix]!, ...own], r.outputTokens);
  });
  const spec = traceSpec({
    profile: linearProfile(1000),
    topology: s.topology,
    router: s.router,
    engine: { num_gpu_blocks: s.numGpuBlocks, block_size: 4, max_num_batched_tokens: s.budget, max_num_seqs: 4 },
    timing: { type: "fixed", prefill_ms: s.prefillMs, decode_ms: s.decodeMs },
    kv_transfer: { mode: s.mode, ...(s.bandwidth === undefined ? {} : { bandwidth_gbps: s.bandwidth }) },
    ...(s.cutoff === undefined ? {} : { max_virtual_time_ms: s.cutoff }),
  });
  return { spec, records };
}

function okResult(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`no progress: ${r.reason}`);
  return r;
}

const le = (a: number | null | undefined, b: number | null | undefined) => a === null || a === undefined || b === null || b === undefined || a <= b;

function checkCausality(r: RequestRecord): void {
  expect(le(r.arrival_ms, r.admitted_ms)).toBe(true);
  expect(le(r.admitted_ms, r.first_token_ms)).toBe(true);
  expect(le(r.arrival_ms, r.first_token_ms)).toBe(true);
  expect(le(r.first_token_ms, r.last_token_ms)).toBe(true);
  const h = r.handoff;
  if (h !== undefined) {
    expect(le(r.admitted_ms, h.source_held_ms)).toBe(true);
    expect(le(h.source_held_ms, h.destination_reserved_ms)).toBe(true);
    expect(le(h.destination_reserved_ms, h.destination_activated_ms)).toBe(true);
    expect(le(h.source_held_ms, h.destination_activated_ms)).toBe(true);
    expect(le(h.destination_activated_ms, h.source_released_ms)).toBe(true);
    expect(le(h.destination_activated_ms, r.first_token_ms)).toBe(true);
  }
}

describe("replay invariants on random traces", () => {
  it("conservation, token counts, causality and determinism (linear profile)", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (s) => {
        const { spec, records } = build(s);
        const a = okResult(await runReplay({ spec, records }));
        const rep = a.report;
        // Request conservation: every arrived request is terminal or in flight at the cutoff.
        expect(rep.completed_requests + rep.rejected_requests + rep.failed_requests + rep.in_flight_requests).toBe(rep.num_requests);
        expect(a.records).toHaveLength(rep.completed_requests + rep.rejected_requests + rep.failed_requests);
        if (s.cutoff === undefined) {
          expect(rep.num_requests).toBe(records.length);
          expect(rep.in_flight_requests).toBe(0);
        }
        for (const r of a.records) {
          if (r.status === "completed") expect(r.output_tokens).toBe(r.requested_output_tokens);
          else expect(r.reason).toMatch(/\S/);
          if (s.cutoff !== undefined && r.last_token_ms !== null) expect(r.last_token_ms).toBeLessThanOrEqual(s.cutoff);
          checkCausality(r);
        }
        // Tokens out = tokens requested, summed over completed requests.
        const requested = a.records.filter((r) => r.status === "completed").reduce((n, r) => n + r.requested_output_tokens, 0);
        expect(rep.total_output_tokens).toBe(requested);
        // Determinism: a second run gives the same digest and the same records.
        const b = okResult(await runReplay({ spec, records: build(s).records }));
        expect(b.report.digest).toBe(rep.digest);
        expect(JSON.stringify(b.records)).toBe(JSON.stringify(a.records));
      }),
    );
  });

  it("data-parallel workers (D = 2 or 3, lockstep or not, async scheduling or not): conservation, causality, determinism", async () => {
    const dpArb = fc.record({
      scenario: scenarioArb,
      dp: fc.integer({ min: 2, max: 3 }),
      ep: fc.boolean(),
      // Per role in P/D: the other role keeps one rank, so mixed layouts occur.
      roles: fc.constantFrom("both", "prefill", "decode"),
      asyncScheduling: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(dpArb, async ({ scenario: s, dp, ep, roles, asyncScheduling }) => {
        const built = build(s);
        const layout = { data_parallel_size: dp, enable_expert_parallel: ep };
        const agg = s.topology.kind === "aggregated";
        const spec = traceSpec({
          ...built.spec,
          profile: linearProfile(1000),
          engine: { ...built.spec.engine, ...(agg || roles === "both" ? layout : {}), ...(agg ? { async_scheduling: asyncScheduling } : {}) },
          ...(agg || roles === "both" ? {} : { [roles]: { engine: layout } }),
        });
        const a = okResult(await runReplay({ spec, records: built.records }));
        const rep = a.report;
        // Request conservation (block conservation: the replay checks every rank ends without a page).
        expect(rep.completed_requests + rep.rejected_requests + rep.failed_requests + rep.in_flight_requests).toBe(rep.num_requests);
        if (s.cutoff === undefined) expect(rep.num_requests).toBe(built.records.length);
        for (const r of a.records) {
          if (r.status === "completed") expect(r.output_tokens).toBe(r.requested_output_tokens);
          if (s.cutoff !== undefined && r.last_token_ms !== null) expect(r.last_token_ms).toBeLessThanOrEqual(s.cutoff);
          checkCausality(r);
          for (const d of Object.values(r.dp_ranks ?? {})) expect(d).toBeLessThan(dp);
        }
        // Every request placed on a DP worker counts once per role it reached.
        const pools = Object.values(rep.data_parallel ?? {});
        expect(pools.length).toBeGreaterThan(0);
        for (const pool of pools) {
          expect([pool.data_parallel_size, pool.expert_parallel]).toEqual([dp, ep]);
          for (const w of pool.workers) expect(w.placed).toHaveLength(dp);
        }
        const b = okResult(await runReplay({ spec, records: build(s).records }));
        expect(b.report.digest).toBe(rep.digest);
        expect(JSON.stringify(b.records)).toBe(JSON.stringify(a.records));
      }),
      { numRuns: 60 },
    );
  });

  it("grouped P/D on GLM-5.3-Flash: every request completes with its output and a priced handoff", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ gapMs: fc.integer({ min: 0, max: 40 }), input: fc.integer({ min: 2, max: 9000 }), output: fc.integer({ min: 1, max: 4 }) }), {
          minLength: 1,
          maxLength: 5,
        }),
        fc.constantFrom("0.31.0" as const, "0.32.0" as const),
        async (reqs, version) => {
          let t = 0;
          const records = reqs.map((r, i) => {
            t += r.gapMs;
            return { line: i + 1, requestId: `r${i + 1}`, arrivalMs: t, inputTokens: r.input, outputTokens: r.output };
          });
          const spec = traceSpec({
            profile: glmProfile(version),
            topology: { kind: "disaggregated", prefill: { workers: 2 }, decode: { workers: 1 } },
            engine: { num_gpu_blocks: 256 },
            timing: { type: "fixed", prefill_ms: 3, decode_ms: 1 },
            kv_transfer: { bandwidth_gbps: 10 },
          });
          const a = okResult(await runReplay({ spec, records }));
          expect(a.report.completed_requests).toBe(records.length);
          for (const r of a.records) {
            expect(r.output_tokens).toBe(r.requested_output_tokens);
            // Fresh prompts share nothing: payload = 13,045,120 x cdiv(N - 1, 2,176) + 36,927,488.
            expect(r.handoff?.payload_bytes).toBe(13_045_120 * Math.ceil((r.input_tokens - 1) / 2176) + 36_927_488);
            checkCausality(r);
          }
        },
      ),
      { numRuns: 30 },
    );
  });
});
