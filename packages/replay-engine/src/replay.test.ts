import { InputError } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { runReplay, specProfilePaths, type ReplayResult } from "./replay.js";
import type { RequestRecord } from "./report.js";
import { byLength, byTokens, glmProfile, linearProfile, traceSpec } from "./test-fixtures.js";

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`replay failed: ${r.reason}`);
  return r;
}
const one = (r: ReplayResult): RequestRecord => {
  const records = ok(r).records;
  expect(records).toHaveLength(1);
  return records[0]!;
};

// The golden-seed engine of docs/rules/replay.md §6.2: 16 pages of 4 tokens, 4 seqs, 64-token budget.
const smallEngine = { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 };
const fixed = (prefill_ms: number, decode_ms: number) => ({ type: "fixed", prefill_ms, decode_ms });

describe("aggregated replay (fixed timing, hand-derived)", () => {
  it("S1: one request of 4 + 2 tokens at fixed 10 / 2 ms: TTFT 12, E2E 14", async () => {
    // Pass 1 at 0: prefill 10 + decode 2 (the first token costs both) -> token 0 at 12.
    // Pass 2 at 12: decode 2 -> token 1 at 14.
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: smallEngine, timing: fixed(10, 2) });
    const result = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2)] }));
    const r = result.records[0]!;
    expect([r.status, r.arrival_ms, r.admitted_ms, r.first_token_ms, r.last_token_ms]).toEqual(["completed", 0, 0, 12, 14]);
    expect([r.ttft_ms, r.e2e_ms, r.tpot_ms]).toEqual([12, 14, 2]);
    expect([r.input_tokens, r.output_tokens, r.requested_output_tokens]).toEqual([4, 2, 2]);
    expect(r.workers).toEqual({ aggregated: 0 });
    expect(r.handoff).toBeUndefined();
    const rep = result.report;
    expect([rep.num_requests, rep.completed_requests, rep.duration_ms, rep.total_input_tokens, rep.total_output_tokens]).toEqual([1, 1, 14, 4, 2]);
    expect([rep.mean_ttft_ms, rep.p99_e2e_ms, rep.mean_itl_ms]).toEqual([12, 14, 2]);
    expect(rep.handoffs).toEqual({ count: 0, payload_bytes: 0, mean_delay_ms: 0 });
  });

  it("spec.frontend: a request reaches the engine overhead_ms after it arrives, so TTFT and E2E gain it, TPOT does not, and the report says the clock is the client's", async () => {
    // S1 with a 3 ms front end: the engine sees the request at 3, pass 1 ends at 3 + 12 = 15, pass
    // 2 at 17. From the client's arrival at 0: TTFT 15, E2E 17; TPOT 2 as before.
    const base = { profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: smallEngine, timing: fixed(10, 2) };
    const withFrontend = ok(await runReplay({ spec: traceSpec({ ...base, frontend: { overhead_ms: 3 } }), records: [byLength(1, 0, 4, 2)] }));
    const r = withFrontend.records[0]!;
    expect([r.arrival_ms, r.admitted_ms, r.first_token_ms, r.last_token_ms]).toEqual([0, 3, 15, 17]);
    expect([r.ttft_ms, r.e2e_ms, r.tpot_ms]).toEqual([15, 17, 2]);
    expect([withFrontend.report.mean_ttft_ms, withFrontend.report.mean_e2e_ms, withFrontend.report.ttft_clock]).toEqual([15, 17, "client"]);
    const without = ok(await runReplay({ spec: traceSpec(base), records: [byLength(1, 0, 4, 2)] }));
    expect([without.report.mean_ttft_ms, without.report.ttft_clock]).toEqual([12, "engine"]);
    // The clock is outside the digest: a zero overhead keeps the digest of no front end.
    const zero = ok(await runReplay({ spec: traceSpec({ ...base, frontend: { overhead_ms: 0 } }), records: [byLength(1, 0, 4, 2)] }));
    expect([zero.report.ttft_clock, zero.report.digest]).toEqual(["client", without.report.digest]);
  });

  it("zero-duration passes complete in the same instant: fixed 0 / 0 gives every token at the arrival", async () => {
    // Request 2 arrives at 5 (request 1, at 0, is done by then): passes 5 -> 5 (prefill and the
    // first token), 5 -> 5, 5 -> 5 give its three tokens at 5.
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: smallEngine, timing: fixed(0, 0) });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 1), byLength(2, 5, 4, 3)] })).records[1]!;
    expect([r.status, r.arrival_ms, r.first_token_ms, r.last_token_ms, r.ttft_ms, r.e2e_ms, r.output_tokens]).toEqual(["completed", 5, 5, 5, 0, 0, 3]);
  });

  it("S2: two workers, four simultaneous requests under round robin: two requests per worker", async () => {
    // Placement in arrival order: 0, 1, 0, 1.
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 2 }, engine: smallEngine, timing: fixed(1, 1) });
    const records = [1, 2, 3, 4].map((line) => byLength(line, 0, 4, 1));
    const r = ok(await runReplay({ spec, records }));
    expect(r.records.map((x) => x.workers.aggregated)).toEqual([0, 1, 0, 1]);
    // Each worker runs its two requests in one pass: prefill 1 + decode 1 -> every token at 2.
    expect(r.records.map((x) => x.first_token_ms)).toEqual([2, 2, 2, 2]);
  });

  it("kv_aware sends a repeated prompt to the worker that holds its prefix (round robin would not)", async () => {
    // 32 tokens in blocks of 4: the hit is capped below the whole prompt, at 31 tokens rounded
    // down to whole blocks = 28.
    const prompt = Array.from({ length: 32 }, (_, k) => 500 + k);
    const spec = traceSpec({
      profile: linearProfile(1000),
      topology: { kind: "aggregated", workers: 2 },
      engine: smallEngine,
      timing: fixed(10, 2),
      router: "kv_aware",
    });
    const r = ok(await runReplay({ spec, records: [byTokens(1, 0, prompt, 1), byTokens(2, 100, prompt, 1)] }));
    // The first goes to either worker (both idle: a tie, broken at random); the second, at 100 ms
    // (the first is done), costs 1 prefill block + 1 new block = 2 on that worker, 8 + 8 on the other.
    const [first, second] = r.records.map((x) => x.workers.aggregated);
    expect(second).toBe(first);
    expect(r.records.map((x) => x.reused_tokens)).toEqual([0, 28]);
    // 28 of 64 input tokens reused.
    expect(r.report.prefix_cache_reused_ratio).toBe(28 / 64);
  });

  describe("routers on a shared prefix: one request, then five sharing its 16-token prefix at 100 ms", () => {
    // Each prompt: the shared 16 tokens (4 blocks of 4) and 6 own tokens: 22 tokens, 5 full blocks.
    const shared = Array.from({ length: 16 }, (_, k) => 900 + k);
    const records = [0, 1, 2, 3, 4, 5].map((i) =>
      byTokens(i + 1, i === 0 ? 0 : 100, [...shared, ...Array.from({ length: 6 }, (_, k) => 10_000 * (i + 1) + k)], 1),
    );
    const run = async (router: unknown) =>
      ok(
        await runReplay({
          spec: traceSpec({
            profile: linearProfile(1000),
            topology: { kind: "aggregated", workers: 2 },
            engine: { ...smallEngine, max_num_seqs: 8 },
            timing: fixed(10, 2),
            router,
          }),
          records,
        }),
      );

    it("kv_aware (weight 1) keeps four on the worker holding the prefix, then sends the fifth to the other", async () => {
      // Request 1 (both idle) goes to either worker, H; it is done at 12 ms. At 100 ms, with k
      // requests already booked on H: H costs (6k + 6) / 4 + (k + 1) = 2.5k + 2.5 (6 uncached
      // tokens, 1 new block each), the other worker 22 / 4 + 5 = 10.5. k = 0..3 cost 2.5, 5, 7.5,
      // 10: H; k = 4 costs 12.5: the other worker.
      const r = await run("kv_aware");
      const workers = r.records.map((x) => x.workers.aggregated!);
      const h = workers[0]!;
      expect(workers).toEqual([h, h, h, h, h, 1 - h]);
      // H computed 22 tokens for request 1 and 22 - 16 = 6 for each of the four; the other 22.
      const spread = r.report.routing?.aggregated;
      expect(spread?.workers[h]).toEqual({ requests: 5, prefill_tokens: 22 + 4 * 6 });
      expect(spread?.workers[1 - h]).toEqual({ requests: 1, prefill_tokens: 22 });
      expect(spread?.imbalance).toBeUndefined();
    });

    it("prefix_only sends all six to one worker, and the report warns that the other idles", async () => {
      const r = await run("prefix_only");
      expect(r.records.map((x) => x.workers.aggregated)).toEqual([0, 0, 0, 0, 0, 0]);
      const spread = r.report.routing?.aggregated;
      expect(spread?.max_request_share).toBe(1);
      expect(spread?.imbalance).toBe("worker 0 took 100% of the requests (fair share 50%) while worker 1 took 0%: the router concentrates the load");
    });

    it("kv_aware with a temperature is seeded: the same seed places every request the same way", async () => {
      const router = { policy: "kv_aware", router_temperature: 1, seed: 11 };
      const [a, b] = [await run(router), await run(router)];
      expect(b.records.map((x) => x.workers.aggregated)).toEqual(a.records.map((x) => x.workers.aggregated));
      expect(b.report.digest).toBe(a.report.digest);
    });
  });

  it("a request that can never fit is rejected with the rank's reason", async () => {
    // 15 usable pages of 4 tokens hold 60 tokens; a 100-token prompt needs 25 pages.
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: smallEngine, timing: fixed(10, 2) });
    const r = one(await runReplay({ spec, records: [byLength(1, 0, 100, 2)] }));
    expect(r.status).toBe("rejected");
    expect(r.reason).toMatch(/100 tokens/);
    expect([r.first_token_ms, r.ttft_ms, r.output_tokens]).toEqual([null, null, 0]);
  });
});

describe("P/D replay (fixed timing, hand-derived)", () => {
  // Linear profile of 1,000,000 bytes per token, full_prompt mode, 1 GB/s.
  const pdSpec = (extra: Record<string, unknown> = {}) =>
    traceSpec({
      profile: linearProfile(1_000_000),
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      engine: smallEngine,
      timing: fixed(10, 2),
      kv_transfer: { bandwidth_gbps: 1, mode: "full_prompt" },
      ...extra,
    });

  it("one request of 4 + 2 tokens: source held at 10, transfer 4 ms, TTFT 16, E2E 18", async () => {
    // Prefill rank: one pass of prefill 10 (a prefill rank charges no decode time) -> source held at 10.
    // The destination reserves at once (10); transfer 4 tokens x 10^6 B / 10^9 B/s = 4 ms -> 14.
    // Decode rank: activation at 14, the one-token row 14 -> 16 emits token 0, 16 -> 18 token 1.
    const r = one(await runReplay({ spec: pdSpec(), records: [byLength(1, 0, 4, 2)] }));
    expect([r.status, r.admitted_ms, r.first_token_ms, r.last_token_ms, r.ttft_ms, r.e2e_ms]).toEqual(["completed", 0, 16, 18, 16, 18]);
    expect(r.workers).toEqual({ prefill: 0, decode: 0 });
    expect(r.output_tokens).toBe(2);
    const h = r.handoff!;
    expect([h.source_held_ms, h.destination_reserved_ms, h.destination_activated_ms, h.source_released_ms]).toEqual([10, 10, 14, 14]);
    expect([h.unit, h.mode, h.prompt_units, h.bytes_per_unit, h.payload_bytes, h.delay_ms]).toEqual(["token", "full_prompt", 4, 1_000_000, 4_000_000, 4]);
  });

  it("without bandwidth the spec's fallback latency is the transfer delay", async () => {
    // Same as above with a 7.5 ms fallback: activation at 10 + 7.5 = 17.5, tokens at 19.5 and 21.5.
    const r = one(await runReplay({ spec: pdSpec({ kv_transfer: { mode: "full_prompt", fallback_latency_ms: 7.5 } }), records: [byLength(1, 0, 4, 2)] }));
    expect([r.first_token_ms, r.last_token_ms]).toEqual([19.5, 21.5]);
    expect(r.handoff?.delay_ms).toBe(7.5);
    expect(r.handoff?.bandwidth_gbps).toBeNull();
  });

  it("a zero delay activates in the same instant: TTFT 12", async () => {
    // Fallback 0: held at 10, activated at 10, decode row 10 -> 12, then 12 -> 14.
    const r = one(await runReplay({ spec: pdSpec({ kv_transfer: { mode: "full_prompt" } }), records: [byLength(1, 0, 4, 2)] }));
    expect([r.ttft_ms, r.e2e_ms]).toEqual([12, 14]);
  });
});

describe("grouped P/D replay on GLM-5.3-Flash", () => {
  it("each handoff's payload equals the transfer-rules oracle and every request completes", async () => {
    // docs/rules/grouped-pd.md §2: payload = 13,045,120 x cdiv(N - 1, 2,176) + 36,927,488.
    //   N 1,000: cdiv(999, 2,176) = 1 -> 49,972,608; N 2,177: cdiv(2,176, 2,176) = 1 -> 49,972,608;
    //   N 8,192: cdiv(8,191, 2,176) = 4 -> 52,180,480 + 36,927,488 = 89,107,968.
    // At 1 GB/s the delay is the payload in ms / 10^6.
    const spec = traceSpec({
      profile: glmProfile("0.32.0"),
      topology: { kind: "disaggregated", prefill: { workers: 2 }, decode: { workers: 2 } },
      engine: { num_gpu_blocks: 64 },
      timing: fixed(10, 2),
      kv_transfer: { bandwidth_gbps: 1 },
    });
    const records = [byLength(1, 0, 1000, 3), byLength(2, 0, 8192, 3), byLength(3, 5, 2177, 3)];
    const r = ok(await runReplay({ spec, records }));
    expect(r.records.map((x) => x.status)).toEqual(["completed", "completed", "completed"]);
    expect(r.records.map((x) => x.output_tokens)).toEqual([3, 3, 3]);
    expect(r.records.map((x) => x.handoff?.payload_bytes)).toEqual([49_972_608, 89_107_968, 49_972_608]);
    expect(r.records.map((x) => x.handoff?.delay_ms)).toEqual([49.972608, 89.107968, 49.972608]);
    // Grouped terms count full-attention blocks of 2,176 tokens; the prefill backs off one token.
    expect(r.records.map((x) => [x.handoff?.unit, x.handoff?.block_size_tokens, x.handoff?.backoff_tokens, x.handoff?.transferred_tokens])).toEqual([
      ["block", 2176, 1, 999],
      ["block", 2176, 1, 8191],
      ["block", 2176, 1, 2176],
    ]);
    // 49,972,608 x 2 + 89,107,968 = 189,053,184 bytes over 3 handoffs.
    expect(r.report.handoffs.count).toBe(3);
    expect(r.report.handoffs.payload_bytes).toBe(189_053_184);
    expect(r.report.completed_requests).toBe(3);
    // Round robin in each pool: prefill 0, 1, 0; decode in source-held order.
    expect(r.records.map((x) => x.workers.prefill)).toEqual([0, 1, 0]);
  });

  it("refuses a P/D pair whose cache layouts differ, naming the spec", async () => {
    const spec = traceSpec({
      profile: glmProfile("0.32.0"),
      decode: { profile: linearProfile(1000) },
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      timing: fixed(10, 2),
    });
    await expect(runReplay({ spec, specFile: "s.yaml", records: [] })).rejects.toThrow(InputError);
    await expect(runReplay({ spec, specFile: "s.yaml", records: [] })).rejects.toThrow(/^s\.yaml/);
  });

  it("refuses a grouped profile outside the P/D gate before replaying", async () => {
    const old = { ...glmProfile("0.31.0"), vllm_version: "0.30.0" };
    const spec = traceSpec({ profile: old, topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } }, timing: fixed(10, 2) });
    await expect(runReplay({ spec, specFile: "s.yaml", records: [] })).rejects.toThrow(/s\.yaml: profile: vllm_version: prefill role: .*0\.31\.0 or 0\.32\.0/);
  });
});

describe("max_model_len and the reasons of rejected and failed requests", () => {
  const engine = { ...smallEngine, num_gpu_blocks: 64, max_model_len: 10 };
  it("aggregated: a prompt reaching the limit and one whose output would pass it are rejected before running, grouped by reason", async () => {
    // Limit 10: 8 + 2 = 10 fits; 10 reaches it; 9 + 2 = 11 and 8 + 3 = 11 pass it.
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine, timing: fixed(10, 2) });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 8, 2), byLength(2, 0, 10, 2), byLength(3, 0, 9, 2), byLength(4, 0, 8, 3)] }));
    expect(r.records.map((x) => [x.request_id, x.status, x.output_tokens])).toEqual([
      ["r1", "completed", 2],
      ["r2", "rejected", 0],
      ["r3", "rejected", 0],
      ["r4", "rejected", 0],
    ]);
    expect(r.report.rejection_reasons).toEqual([
      {
        reason: "prompt of # tokens + # output tokens = # exceeds max_model_len #",
        count: 2,
        example: "prompt of 9 tokens + 2 output tokens = 11 exceeds max_model_len 10",
      },
      { reason: "prompt of # tokens reaches max_model_len #", count: 1, example: "prompt of 10 tokens reaches max_model_len 10" },
    ]);
    expect(r.report.failure_reasons).toEqual([]);
  });

  it("P/D: the prefill rank is asked for one token, so the decode rank refuses the output that passes the limit; the request fails with that reason", async () => {
    const spec = traceSpec({
      profile: linearProfile(1000),
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      engine,
      timing: fixed(10, 2),
    });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 9, 2)] }));
    expect(r.records.map((x) => [x.status, x.reason])).toEqual([
      ["failed", "decode worker 0 rejected the request: prompt of 9 tokens + 2 output tokens = 11 exceeds max_model_len 10"],
    ]);
    expect(r.report.failure_reasons).toEqual([
      {
        reason: "decode worker # rejected the request: prompt of # tokens + # output tokens = # exceeds max_model_len #",
        count: 1,
        example: "decode worker 0 rejected the request: prompt of 9 tokens + 2 output tokens = 11 exceeds max_model_len 10",
      },
    ]);
  });
});

describe("cutoff, no progress, inputs", () => {
  it("max_virtual_time_ms: events at the cutoff run, later ones do not; the request is in flight", async () => {
    // S1 with a cutoff at 12: token 0 lands at 12 (processed); token 1 at 14 is after the cutoff.
    // The arrival at 20 is after the cutoff too, so it never arrives.
    const spec = traceSpec({
      profile: linearProfile(1000),
      topology: { kind: "aggregated", workers: 1 },
      engine: smallEngine,
      timing: fixed(10, 2),
      max_virtual_time_ms: 12,
    });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2), byLength(2, 20, 4, 2), byLength(3, 30, 4, 2)] }));
    expect(r.records).toEqual([]);
    // The duration is the virtual time that ran (12 ms); token 0 (at 12) counts in the output throughput.
    expect([r.report.num_requests, r.report.completed_requests, r.report.in_flight_requests, r.report.duration_ms]).toEqual([1, 0, 1, 12]);
    // Requests 2 and 3 arrive after the cutoff.
    expect(r.report.cutoff).toEqual({ at_ms: 12, in_flight_requests: 1, not_arrived_requests: 2, in_flight_output_tokens: 1 });
    // 1 token over 0.012 s.
    expect(r.report.output_throughput_tok_s).toBeCloseTo(1 / 0.012, 9);
  });

  it("a synthetic workload cut off counts the requests that never arrived: 5 - 1 = 4", async () => {
    const spec = traceSpec({
      profile: linearProfile(1000),
      topology: { kind: "aggregated", workers: 1 },
      engine: smallEngine,
      timing: fixed(10, 2),
      workload: { synthetic: { requests: 5, input_tokens: 4, output_tokens: 2, rate_per_s: 0.01, seed: 3 } },
      max_virtual_time_ms: 100,
    });
    // At 0.01 req/s (the slowest rate allowed) the mean gap is 100 s: request 0 (at 0) completes at 14,
    // the rest come after 100 ms unless a gap is under 100 ms (probability 1 - e^(-0.001) per gap, 0.4 % for four).
    const r = ok(await runReplay({ spec }));
    expect([r.report.num_requests, r.report.completed_requests]).toEqual([1, 1]);
    expect(r.report.cutoff).toEqual({ at_ms: 100, in_flight_requests: 0, not_arrived_requests: 4, in_flight_output_tokens: 0 });
  });

  it("says which request is stuck where when nothing can move", async () => {
    // GLM 0.31.0, N = 2,177: the prefill computes T = 2,176 tokens = one full-attention block.
    // The decode pool has 7 pages (6 usable): the reservation takes 1 full + 1 ring + 4 KDA = 6.
    // The one-token row computes prompt token 2,176, which needs a second full-attention block
    // ((N - 1) is a multiple of B): no page is left and nothing else runs, so it waits forever.
    const spec = traceSpec({
      profile: glmProfile("0.31.0"),
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      decode: { engine: { num_gpu_blocks: 7 } },
      engine: { num_gpu_blocks: 64 },
      timing: fixed(10, 2),
    });
    const r = await runReplay({ spec, records: [byLength(1, 0, 2177, 2)] });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    // Prefill pass 0 -> 10; zero transfer delay (no bandwidth, fallback 0): activated at 10.
    expect(r.atMs).toBe(10);
    expect(r.reason).toMatch(/no progress at 10 ms/);
    expect(r.stuck).toHaveLength(1);
    expect(r.stuck[0]!.request_id).toBe("r1");
    expect(r.stuck[0]!.where).toBe("on decode worker 0, waiting to decode");
    expect(r.stuck[0]!.why).toMatch(/prompt of 2177 tokens.*decode worker 0.*0 of 6 pages free/);
  });

  it("reads the trace lazily: records after the first are pulled only as the clock reaches them", async () => {
    const pulled: number[] = [];
    function* records() {
      for (let i = 1; i <= 3; i++) {
        pulled.push(i);
        yield byLength(i, (i - 1) * 100, 4, 2);
      }
    }
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: smallEngine, timing: fixed(10, 2) });
    let seenAtFirstTerminal: number[] = [];
    await runReplay({
      spec,
      records: records(),
      progressEvery: 1,
      onProgress: (p) => {
        if (p.terminal === 1 && seenAtFirstTerminal.length === 0) seenAtFirstTerminal = [...pulled];
      },
    });
    // Request 1 ends at 14; by then only records 1 and 2 (the lookahead, arriving at 100) were read.
    expect(seenAtFirstTerminal).toEqual([1, 2]);
  });

  it("closes the record stream when the cutoff stops the replay early", async () => {
    let closed = false;
    function* records() {
      try {
        for (let i = 1; i <= 100; i++) yield byLength(i, i * 100, 4, 2);
      } finally {
        closed = true;
      }
    }
    // Request 1 arrives at 0 (normalised from 100); the cutoff at 50 stops before request 2 (at 100).
    const spec = traceSpec({
      profile: linearProfile(1000),
      topology: { kind: "aggregated", workers: 1 },
      engine: smallEngine,
      timing: fixed(10, 2),
      max_virtual_time_ms: 50,
    });
    const r = ok(await runReplay({ spec, records: records() }));
    expect([r.report.num_requests, r.report.completed_requests]).toEqual([1, 1]);
    // The 99 later records are read to count them, then the stream is closed.
    expect(r.report.cutoff?.not_arrived_requests).toBe(99);
    expect(closed).toBe(true);
  });

  it("a synthetic workload needs no records; specProfilePaths lists the paths to load", async () => {
    const spec = traceSpec({
      profile: linearProfile(1000),
      topology: { kind: "aggregated", workers: 1 },
      engine: smallEngine,
      timing: fixed(10, 2),
      workload: { synthetic: { requests: 3, input_tokens: 4, output_tokens: 2 } },
    });
    const r = ok(await runReplay({ spec }));
    // All arrive at 0 and share one pass each step: tokens at 12 and 14.
    expect(r.records.map((x) => [x.request_id, x.ttft_ms, x.e2e_ms])).toEqual([
      ["synthetic-0", 12, 14],
      ["synthetic-1", 12, 14],
      ["synthetic-2", 12, 14],
    ]);
    expect(specProfilePaths(spec)).toEqual([]);
    expect(specProfilePaths({ ...spec, profile: "/p/a.json", decode: { profile: "/p/b.json" } })).toEqual(["/p/a.json", "/p/b.json"]);
  });
});

describe("time that advances and stays resolvable (issue 11)", () => {
  const spec = (timing: object) => traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: smallEngine, timing });
  it("a replay whose clock would pass 10^13 ms stops as a failed run, naming the limit", async () => {
    // The second request arrives at 10^13 - 1 ms; its pass of 10^6 ms would end past 10^13.
    const r = await runReplay({ spec: spec(fixed(1e6, 0)), records: [byLength(1, 0, 4, 1), byLength(2, 1e13 - 1, 4, 1)] });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.reason).toBe(
      "the replay stopped at 9999999999999 ms: virtual time would pass 10^13 ms (about 317 years) (next event at 10000000999999 ms): the workload's passes and transfers take too long to model",
    );
  });
  it("an arrival beyond 10^13 ms after the first is refused at its line, even from records that skipped readTrace", async () => {
    const r = runReplay({ spec: spec(fixed(1, 1)), records: [byLength(1, 0, 4, 1), byLength(2, 2e13, 4, 1)] });
    await expect(r).rejects.toThrow(
      "test.jsonl:2: arrival: arrives 20000000000000 ms after the first request, beyond 10^13 ms (about 317 years) of virtual time",
    );
  });
  it("every record is causal: arrival <= first token <= last token", async () => {
    const records = [byLength(1, 0, 4, 3), byLength(2, 0.5, 4, 5), byLength(3, 7, 8, 2)];
    for (const r of ok(await runReplay({ spec: spec(fixed(10, 2)), records })).records) {
      expect(r.first_token_ms).not.toBeNull();
      expect(r.arrival_ms <= r.first_token_ms! && r.first_token_ms! <= r.last_token_ms!).toBe(true);
    }
  });
});

describe("memory grows with what is used", () => {
  it("48 requests of 2^24 output tokens each allocate nothing per requested token (cut off after 100 ms)", async () => {
    // One double per requested gap would be 48 x (2^24 - 1) x 8 bytes = 6.4 GB at the first tokens.
    // At fixed 10 / 2 ms the requests get about 45 tokens each before the cutoff; none finishes.
    const spec = traceSpec({
      profile: linearProfile(1000),
      topology: { kind: "aggregated", workers: 4 },
      engine: { num_gpu_blocks: 4096, block_size: 16, max_num_seqs: 64, max_num_batched_tokens: 1024 },
      timing: fixed(10, 2),
      max_virtual_time_ms: 100,
    });
    const records = Array.from({ length: 48 }, (_, i) => byLength(i + 1, 0, 16, 2 ** 24));
    const before = process.memoryUsage().arrayBuffers;
    const r = ok(await runReplay({ spec, records }));
    expect([r.report.num_requests, r.report.in_flight_requests, r.records.length]).toEqual([48, 48, 0]);
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * 2 ** 20);
  });
});
