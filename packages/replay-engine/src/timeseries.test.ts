import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import { byLength, glmProfile, linearProfile, traceSpec } from "./test-fixtures.js";
import { Sampler } from "./sampler.js";
import { DEFAULT_START_MS, MAX_ADAPTIVE_SAMPLES, timeSeriesRecords, timeSeriesTable } from "./timeseries.js";

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`replay failed: ${r.reason}`);
  return r;
}

const smallEngine = { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 };
const fixed = (prefill_ms: number, decode_ms: number) => ({ type: "fixed", prefill_ms, decode_ms });

describe("replay time series (hand-derived)", () => {
  it("one request of 4 + 2 tokens at fixed 10 / 2 ms, sampled every 5 ms", async () => {
    // Pass 1 at 0 (4 prompt tokens, 12 ms) gives token 0 at 12; pass 2 at 12 (1 token, 2 ms)
    // gives token 1 at 14. Samples at 0, 5, 10 and 15 (the first at or after the end, 14).
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: smallEngine, timing: fixed(10, 2) });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2)], timeseries: { sampleMs: 5 } }));
    const ts = r.timeseries!;
    expect(ts.sample_ms).toBe(5);
    expect(ts.adaptive).toBe(false);
    expect(ts.times_ms).toEqual([0, 5, 10, 15]);
    const d = ts.deployment;
    // The arrival at 0 falls in (-5, 0]; the completion at 14 in (10, 15].
    expect(d.arrivals).toEqual([1, 0, 0, 0]);
    expect(d.completions).toEqual([0, 0, 0, 1]);
    // Both tokens (12 and 14) fall in (10, 15]: 2 tokens / 5 ms = 400 tok/s; the prompt's 4
    // tokens finish prefill with the first token: 800 tok/s.
    expect(d.output_tokens_per_s).toEqual([0, 0, 0, 400]);
    expect(d.input_tokens_per_s).toEqual([0, 0, 0, 800]);
    expect(d.handoffs_in_flight).toEqual([0, 0, 0, 0]);
    const w = ts.workers[0]!;
    expect(w.label).toBe("W0");
    // Running from its admission at 0 until it finishes at 14.
    expect(w.running).toEqual([1, 1, 1, 0]);
    expect(w.waiting).toEqual([0, 0, 0, 0]);
    // 4 prompt tokens take 1 page; pass 2 writes token 4 into a 2nd page. At the end the full,
    // hashed first page stays cached (evictable) and the partial second one is plain free.
    expect(w.kv_used_pages).toEqual([1, 1, 1, 0]);
    expect(w.kv_cached_pages).toEqual([0, 0, 0, 1]);
    expect(w.groups).toEqual([{ name: "kv", used_pages: [1, 1, 1, 0], cached_pages: [0, 0, 0, 1] }]);
    // Pass 1 starts at 0 (4 tokens, 12 ms), pass 2 at 12 (1 token, 2 ms).
    expect(w.passes).toEqual([1, 0, 0, 1]);
    expect(w.batch_tokens).toEqual([4, null, null, 1]);
    expect(w.step_ms).toEqual([12, null, null, 2]);
    // Sampling stays out of the report: the same digest without it.
    const plain = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2)] }));
    expect(plain.timeseries).toBeUndefined();
    expect(r.report.digest).toBe(plain.report.digest);
  });

  it("P/D: the handoff is in flight between the prefill's end and its last byte; its bytes count when it lands", async () => {
    // Linear profile of 1,000,000 bytes per token, full_prompt, 1 GB/s (1e6 bytes per ms): a
    // 4-token prompt moves 4e6 bytes in 4 ms, from the destination's reservation on.
    const spec = traceSpec({
      profile: linearProfile(1_000_000),
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      engine: smallEngine,
      timing: fixed(10, 2),
      kv_transfer: { bandwidth_gbps: 1, mode: "full_prompt" },
    });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2)], timeseries: { sampleMs: 1 } }));
    const ts = r.timeseries!;
    const rec = r.records[0]!;
    const h = rec.handoff!;
    expect(ts.workers.map((w) => w.label)).toEqual(["P0", "D0"]);
    // In flight exactly at the samples in [reserved, reserved + delay).
    const start = h.destination_reserved_ms!;
    const end = start + h.delay_ms!;
    expect(h.payload_bytes).toBe(4_000_000);
    ts.times_ms.forEach((t, i) => {
      expect([t, ts.deployment.handoffs_in_flight[i]]).toEqual([t, t >= start && t < end ? 1 : 0]);
    });
    // The bytes land in the sample whose interval holds the transfer's end.
    const landed = ts.times_ms.findIndex((t) => t >= end);
    expect(ts.deployment.handoff_bytes[landed]).toBe(4_000_000);
    expect(ts.deployment.handoff_bytes.reduce((a, b) => a + b, 0)).toBe(4_000_000);
    // The prompt counts as input once, when the prefill rank holds it.
    expect(ts.deployment.input_tokens_per_s.reduce((a, b) => a + b, 0)).toBe(4 * 1000);
  });

  it("a grouped profile has one column pair per cache group", async () => {
    const spec = traceSpec({
      profile: glmProfile("0.32.0"),
      topology: { kind: "aggregated", workers: 1 },
      engine: { num_gpu_blocks: 64 },
      timing: fixed(10, 2),
    });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 8192, 2)], timeseries: {} }));
    const w = r.timeseries!.workers[0]!;
    expect(w.groups.map((g) => g.name)).toEqual(glmProfile("0.32.0").kv_cache_groups!.map((g) => g.name));
    // The groups add up to the totals at every sample.
    w.kv_used_pages.forEach((u, i) => {
      expect(w.groups.reduce((a, g) => a + g.used_pages[i]!, 0)).toBe(u);
    });
    const table = timeSeriesTable(r.timeseries!);
    expect(table.columns).toContain(`W0.kv_used_pages.${w.groups[0]!.name}`);
    expect(table.rows).toHaveLength(r.timeseries!.times_ms.length);
    const rec = timeSeriesRecords(r.timeseries!)[0] as { workers: Record<string, { groups: object }> };
    expect(Object.keys(rec.workers.W0!.groups)).toHaveLength(w.groups.length);
  });
});

describe("the decode fast path samples as step by step", () => {
  for (const [name, topology] of [
    ["aggregated", { kind: "aggregated", workers: 2 }],
    ["P/D", { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 2 } }],
  ] as const) {
    it(`${name}: the same series with runs of decode steps and with every pass on its own`, async () => {
      // Staggered requests with long outputs, so decode runs span many samples and are cut by arrivals.
      const spec = traceSpec({
        profile: linearProfile(1000),
        topology,
        engine: { num_gpu_blocks: 256, block_size: 4, max_num_seqs: 8, max_num_batched_tokens: 64 },
        timing: fixed(3, 1),
        kv_transfer: { bandwidth_gbps: 1, mode: "full_prompt" },
      });
      const records = Array.from({ length: 12 }, (_, k) => byLength(k + 1, k * 7, 8 + (k % 3) * 4, 20 + (k % 4) * 9));
      const run = async (fastDecode: boolean) => ok(await runReplay({ spec, records, fastDecode, timeseries: { sampleMs: 2 } })).timeseries!;
      expect(await run(true)).toEqual(await run(false));
    });
  }

  for (const [name, topology] of [
    ["GLM-5.3-Flash aggregated", { kind: "aggregated", workers: 1 }],
    ["GLM-5.3-Flash P/D", { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } }],
  ] as const) {
    it(`${name}: a run's recorded pages give each group's count inside the run`, async () => {
      // 2,176-token pages over six cache groups: prompts end 3 to 13 tokens before a page boundary,
      // so a decode run of 30 steps crosses it (a new page in some groups, a state page released
      // to the cache in others) with samples every 2 ms on both sides of that step.
      const spec = traceSpec({
        profile: glmProfile("0.32.0"),
        topology,
        engine: { num_gpu_blocks: 64, max_num_seqs: 4 },
        timing: fixed(3, 1),
        kv_transfer: { bandwidth_gbps: 1000, mode: "full_prompt" },
      });
      const records = Array.from({ length: 6 }, (_, k) => byLength(k + 1, k * 9, 2176 * (1 + (k % 2)) - 3 - 2 * k, 30));
      const run = async (fastDecode: boolean) => ok(await runReplay({ spec, records, fastDecode, timeseries: { sampleMs: 2 } })).timeseries!;
      expect(await run(true)).toEqual(await run(false));
    });
  }
});

describe("latency quantiles (for CDF plots)", () => {
  it("exact nearest rank at p = 0, 50, 100 of two overlapping requests", async () => {
    // a (0 ms, 4 + 2 tokens): pass 0-12 gives token 0 at 12. b arrives at 5 and joins pass 2
    // (12-24: b's prefill with a's decode costs 10 + 2) -> a's token 1 and b's token 0 at 24;
    // b decodes 24-26 and 26-28. a: TTFT 12, TPOT 12, ITL [12], E2E 24; b: TTFT 19, TPOT 2,
    // ITL [2, 2], E2E 23. Nearest rank: sorted[round((n - 1) p / 100)], half away from zero.
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: smallEngine, timing: fixed(10, 2) });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2), byLength(2, 5, 4, 3)], quantiles: 3 }));
    expect(r.quantiles).toEqual({ ttft: [12, 19, 19], tpot: [2, 12, 12], itl: [2, 2, 12], e2e: [23, 24, 24] });
    // The same report as without them.
    expect(r.report.digest).toBe(ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2), byLength(2, 5, 4, 3)] })).report.digest);
  });
});

describe("adaptive sampling", () => {
  it("doubles the interval past the cap, keeping gauges at their times and every counted event", () => {
    // One arrival every 10 ms from 0 to 99,990 ms; the probe's running count is the step number,
    // so sample t must read t / 10. 10,000 samples of 10 ms exceed 4,096 twice: the interval
    // ends at 40 ms, with samples 0, 40, ..., 100,000 (the first at or after the end) = 2,501.
    let running = 0;
    const probe = {
      role: "aggregated" as const,
      id: 0,
      groups: ["kv"],
      load: () => ({ running, waiting: 0 }),
      groupPages: () => ({ used: [running], cached: [0] }),
    };
    const s = new Sampler([probe], undefined);
    for (let i = 0; i < 10_000; i++) {
      running = i;
      s.onArrival();
      s.advance(i * 10 + 10);
    }
    s.finish(99_990);
    const ts = s.result();
    expect(DEFAULT_START_MS).toBe(10);
    expect(ts.sample_ms).toBe(40);
    expect(ts.times_ms).toHaveLength(2501);
    expect(ts.times_ms.length).toBeLessThanOrEqual(MAX_ADAPTIVE_SAMPLES + 1);
    ts.times_ms.forEach((t, j) => {
      expect(t).toBe(j * 40);
    });
    // Gauges: the state at each kept time (the last sample, at 100,000, still sees step 9,999).
    ts.workers[0]!.running.forEach((r, j) => {
      expect(r).toBe(Math.min(ts.times_ms[j]! / 10, 9999));
    });
    // Counters: (t - 40, t] holds 4 arrivals; sample 0 the one at 0; the last the 3 at 99,970..99,990.
    const a = ts.deployment.arrivals;
    expect([a[0], a[1], a[2499], a[2500]]).toEqual([1, 4, 4, 3]);
    expect(a.reduce((x, y) => x + y, 0)).toBe(10_000);
  });
});
