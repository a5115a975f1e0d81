import { validateProfile, type Profile, type TraceRecord } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import { byLength, byTokens, glmProfile, linearProfile, traceSpec } from "./test-fixtures.js";

/**
 * The decode fast path (ranks running many decode steps in one call) must give exactly what the
 * step-by-step path gives: the same per-request records and the same report digest, on random
 * small workloads that cross its stopping points (block boundaries with 4-token blocks,
 * completions, arrivals during runs, preemptions in small pools, max_model_len, cutoffs, P/D
 * reservations and transfers) under every timing model.
 */

/** Full attention plus a 10-token sliding window, 4-token blocks: window blocks are freed as decode goes on. */
const windowProfile: Profile = validateProfile({
  schema_version: 1,
  model: "test/window",
  vllm_version: "0.32.0",
  tensor_parallel_size: 1,
  page_size_bytes: 4096,
  kv_cache_groups: [
    { name: "full", kind: "full_attention", num_layers: 2, block_size_tokens: 4, prefix_cacheable: true, transfer_bytes_per_block: 2048 },
    { name: "swa", kind: "sliding_window", num_layers: 2, block_size_tokens: 4, window_tokens: 10, prefix_cacheable: true, transfer_bytes_per_block: 2048 },
  ],
});

const prefixes = [Array.from({ length: 24 }, (_, k) => 9000 + k), Array.from({ length: 40 }, (_, k) => 7000 + k), [] as number[]];

const timingArb = fc.oneof(
  fc.record({ type: fc.constant("fixed" as const), prefill_ms: fc.integer({ min: 0, max: 5 }), decode_ms: fc.integer({ min: 0, max: 3 }) }),
  fc.constant({ type: "polynomial" as const }),
  fc.record({
    type: fc.constant("linear" as const),
    step_ms: fc.double({ min: 0, max: 2, noNaN: true }),
    per_sequence_ms: fc.double({ min: 0, max: 0.5, noNaN: true }),
    per_kv_token_us: fc.double({ min: 0, max: 30, noNaN: true }),
    per_prompt_token_us: fc.double({ min: 0, max: 50, noNaN: true }),
    per_cached_token_us: fc.double({ min: 0, max: 5, noNaN: true }),
    prompt_step_ms: fc.double({ min: 0, max: 3, noNaN: true }),
  }),
);

const scenarioArb = fc.record({
  requests: fc.array(
    fc.record({
      gapMs: fc.integer({ min: 0, max: 40 }),
      prefix: fc.integer({ min: 0, max: prefixes.length - 1 }),
      ownTokens: fc.integer({ min: 1, max: 40 }),
      outputTokens: fc.integer({ min: 1, max: 40 }),
    }),
    { minLength: 1, maxLength: 8 },
  ),
  profile: fc.constantFrom("linear", "window"),
  topology: fc.oneof(
    fc.record({ kind: fc.constant("aggregated" as const), workers: fc.integer({ min: 1, max: 3 }) }),
    fc.record({
      kind: fc.constant("disaggregated" as const),
      prefill: fc.record({ workers: fc.integer({ min: 1, max: 2 }) }),
      decode: fc.record({ workers: fc.integer({ min: 1, max: 2 }) }),
    }),
  ),
  router: fc.constantFrom("round_robin", "kv_aware"),
  numGpuBlocks: fc.integer({ min: 10, max: 80 }),
  budget: fc.integer({ min: 4, max: 64 }),
  maxNumSeqs: fc.integer({ min: 1, max: 5 }),
  maxModelLen: fc.option(fc.integer({ min: 30, max: 90 }), { nil: undefined }),
  captureSizes: fc.option(fc.constantFrom([1, 2, 4], [2, 8]), { nil: undefined }),
  asyncScheduling: fc.boolean(),
  timing: timingArb,
  bandwidth: fc.option(fc.constantFrom(0.001, 1), { nil: undefined }),
  mode: fc.constantFrom("full_prompt", "destination_missing"),
  cutoff: fc.option(fc.integer({ min: 0, max: 400 }), { nil: undefined }),
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
    profile: s.profile === "linear" ? linearProfile(1000) : windowProfile,
    topology: s.topology,
    router: s.router,
    engine: {
      num_gpu_blocks: s.numGpuBlocks,
      ...(s.profile === "linear" ? { block_size: 4 } : {}),
      max_num_batched_tokens: s.budget,
      max_num_seqs: s.maxNumSeqs,
      ...(s.maxModelLen === undefined ? {} : { max_model_len: s.maxModelLen }),
      ...(s.captureSizes === undefined ? {} : { cudagraph_capture_sizes: s.captureSizes }),
      async_scheduling: s.asyncScheduling && s.topology.kind === "aggregated",
    },
    timing: s.timing,
    kv_transfer: { mode: s.mode, ...(s.bandwidth === undefined ? {} : { bandwidth_gbps: s.bandwidth }) },
    ...(s.cutoff === undefined ? {} : { max_virtual_time_ms: s.cutoff }),
  });
  return { spec, records };
}

/** Everything a run gives, as one comparable string: the records and report, or the failure. */
function outcome(r: ReplayResult): string {
  if (!r.ok) return JSON.stringify({ reason: r.reason, stuck: r.stuck, atMs: r.atMs });
  return JSON.stringify({ digest: r.report.digest, report: r.report, records: r.records });
}

async function both(spec: ReturnType<typeof traceSpec>, records: () => TraceRecord[]): Promise<{ fast: string; steps: string }> {
  const fast = outcome(await runReplay({ spec, records: records() }));
  const steps = outcome(await runReplay({ spec, records: records(), fastDecode: false }));
  return { fast, steps };
}

describe("decode fast path = step by step", () => {
  it("linear and sliding-window profiles, aggregated and P/D, every timing model", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (s) => {
        const { spec } = build(s);
        const { fast, steps } = await both(spec, () => build(s).records);
        expect(fast).toBe(steps);
      }),
      { numRuns: 250 },
    );
  }, 120_000);

  it("data-parallel workers (D = 2 or 3, independent or lockstep): the balancer sees the same loads either way", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, fc.integer({ min: 2, max: 3 }), fc.boolean(), async (s, dp, ep) => {
        const built = build(s);
        const spec = traceSpec({ ...built.spec, engine: { ...built.spec.engine, data_parallel_size: dp, enable_expert_parallel: ep } });
        const { fast, steps } = await both(spec, () => build(s).records);
        expect(fast).toBe(steps);
      }),
      { numRuns: 100 },
    );
  }, 120_000);

  it("GLM-5.3-Flash (full attention, a ring and Mamba-type states) in P/D and aggregated", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ gapMs: fc.integer({ min: 0, max: 60 }), input: fc.integer({ min: 2, max: 9000 }), output: fc.integer({ min: 1, max: 40 }) }), {
          minLength: 1,
          maxLength: 6,
        }),
        fc.constantFrom("0.31.0" as const, "0.32.0" as const),
        fc.boolean(),
        fc.integer({ min: 12, max: 64 }),
        async (reqs, version, pd, blocks) => {
          let t = 0;
          const records = () =>
            reqs.map((r, i) => {
              t = i === 0 ? r.gapMs : t + r.gapMs;
              return byLength(i + 1, t, r.input, r.output);
            });
          const spec = traceSpec({
            profile: glmProfile(version),
            topology: pd ? { kind: "disaggregated", prefill: { workers: 2 }, decode: { workers: 1 } } : { kind: "aggregated", workers: 2 },
            engine: { num_gpu_blocks: blocks },
            timing: { type: "polynomial" },
            kv_transfer: { bandwidth_gbps: 10 },
          });
          const { fast, steps } = await both(spec, records);
          expect(fast).toBe(steps);
        },
      ),
      { numRuns: 60 },
    );
  }, 120_000);
});

describe("decode fast path = step by step, P/D with a prefill rank that waits for room", () => {
  it("decode runs stop where a release could start the prefill rank again", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({ gapMs: fc.integer({ min: 0, max: 5 }), ownTokens: fc.integer({ min: 8, max: 40 }), outputTokens: fc.integer({ min: 5, max: 40 }) }),
          { minLength: 4, maxLength: 16 },
        ),
        fc.integer({ min: 12, max: 30 }),
        fc.integer({ min: 16, max: 48 }),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(0.01, 1, 100),
        async (reqs, prefillBlocks, decodeBlocks, decodeMs, bandwidth) => {
          let t = 0;
          const records = () => {
            t = 0;
            return reqs.map((r, i) => {
              t += r.gapMs;
              return byTokens(
                i + 1,
                t,
                Array.from({ length: r.ownTokens }, (_, k) => 100_000 * (i + 1) + k),
                r.outputTokens,
              );
            });
          };
          // Small pools: held sources fill the prefill rank (it waits for releases), and a decode rank
          // reserves a waiting destination only when a request of its own finishes.
          const spec = traceSpec({
            profile: linearProfile(1000),
            topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 2 } },
            engine: { num_gpu_blocks: decodeBlocks, block_size: 4, max_num_batched_tokens: 64, max_num_seqs: 4 },
            prefill: { engine: { num_gpu_blocks: prefillBlocks } },
            timing: { type: "fixed", prefill_ms: 2, decode_ms: decodeMs },
            kv_transfer: { mode: "full_prompt", bandwidth_gbps: bandwidth },
          });
          const { fast, steps } = await both(spec, records);
          expect(fast).toBe(steps);
        },
      ),
      { numRuns: 150 },
    );
  }, 120_000);
});
