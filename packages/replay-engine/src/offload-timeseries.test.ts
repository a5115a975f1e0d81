import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import { Sampler } from "./sampler.js";
import { byTokens, offloadScenario, range, traceSpec } from "./test-fixtures.js";
import { timeSeriesRecords, timeSeriesTable } from "./timeseries.js";

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`replay failed: ${r.reason}`);
  return r;
}

// offload.test.ts's scenario (offloadScenario): 4,096-byte blocks, four usable pages, fixed 10 / 2
// ms (a pass with a prefill takes 12 ms), a 1 MiB write-through CPU tier.
const { base, cpu, trace } = offloadScenario;
const block = 4096;

describe("offload tier occupancy in the time series (hand-derived)", () => {
  it("the CPU tier's bytes at each sample: r1's 3 blocks from its pass's start, r2's 4 more from its own", async () => {
    const result = ok(await runReplay({ spec: traceSpec({ ...base, kv_offload: { tiers: [cpu] } }), records: trace, timeseries: { sampleMs: 4 } }));
    const ts = result.timeseries!;
    // r3 loads from 40 to 41.5 and its last prompt token runs 41.5 to 53.5: samples 0, 4, ... 56.
    expect(ts.times_ms).toEqual(range(0, 15).map((i) => 4 * i));
    // The rank runs a pass when it starts and hands the tier the blocks it fills then: r1's pass
    // 0-12 fills blocks 0-2, held from the sample at 0; r2's pass 20-32 its 4 blocks, from the
    // sample at 20. r3's hit loads blocks the tier holds and its partial 4th block is never
    // stored: 7 blocks to the end.
    const r1 = 3 * block;
    const r2 = 7 * block;
    expect(ts.offload).toEqual([{ name: "cpu 0", used_bytes: [r1, r1, r1, r1, r1, r2, r2, r2, r2, r2, r2, r2, r2, r2, r2] }]);
    // The peak the report gives is the series' largest value.
    expect(result.report.kv_offload!.tiers[0]!.peak_bytes).toBe(r2);

    const table = timeSeriesTable(ts);
    expect(table.columns.at(-1)).toBe("offload.cpu 0.used_bytes");
    expect(table.rows.map((r) => r.at(-1))).toEqual(ts.offload![0]!.used_bytes);
    const records = timeSeriesRecords(ts) as { offload?: Record<string, { used_bytes: number }> }[];
    expect(records[4]!.offload).toEqual({ "cpu 0": { used_bytes: r1 } });
    expect(records[14]!.offload).toEqual({ "cpu 0": { used_bytes: r2 } });
  });

  it("without kv_offload the series has no offload field, column or record key", async () => {
    const ts = ok(await runReplay({ spec: traceSpec(base), records: trace, timeseries: { sampleMs: 4 } })).timeseries!;
    expect("offload" in ts).toBe(false);
    expect(timeSeriesTable(ts).columns.some((c) => c.startsWith("offload"))).toBe(false);
    expect(timeSeriesRecords(ts).some((r) => "offload" in r)).toBe(false);
  });

  it("one series per worker's tier, one per node when shared", async () => {
    // Round robin: r1 on worker 0 (pass 0-12), r3 on worker 1 at 40 (pass 40-52 when it computes
    // its prompt). Samples 0, 10, ... 60; a pass's blocks count from its start (above).
    const records = [byTokens(1, 0, range(0, 13), 1), byTokens(3, 40, range(0, 13), 1)];
    const two = { ...base, topology: { kind: "aggregated", workers: 2 } };
    const own = ok(await runReplay({ spec: traceSpec({ ...two, kv_offload: { tiers: [cpu] } }), records, timeseries: { sampleMs: 10 } }));
    // Each worker's tier holds its own prompt's 3 blocks from its pass (0 and 40).
    const b3 = 3 * block;
    expect(own.timeseries!.offload).toEqual([
      { name: "cpu 0", used_bytes: [b3, b3, b3, b3, b3, b3, b3] },
      { name: "cpu 1", used_bytes: [0, 0, 0, 0, b3, b3, b3] },
    ]);
    const shared = ok(
      await runReplay({
        spec: traceSpec({ ...two, kv_offload: { tiers: [{ ...cpu, shared: "node" }], workers_per_node: 2 } }),
        records,
        timeseries: { sampleMs: 10 },
      }),
    );
    // One tier for the node: r3 loads r1's blocks from it (41.5, then its last token 41.5-53.5)
    // and stores nothing new. Samples 0 ... 60.
    expect(shared.timeseries!.offload).toEqual([{ name: "cpu 0", used_bytes: [b3, b3, b3, b3, b3, b3, b3] }]);
  });

  it("P/D with tiers on both roles: the role names each instance", async () => {
    const spec = traceSpec({ ...base, topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } }, kv_offload: { tiers: [cpu] } });
    const result = ok(await runReplay({ spec, records: [byTokens(1, 0, range(0, 13), 2)], timeseries: { sampleMs: 10 } }));
    const off = result.timeseries!.offload!;
    expect(off.map((o) => o.name)).toEqual(["prefill cpu 0", "decode cpu 0"]);
    // The prefill pass 0-12 fills blocks 0-2: its tier holds them from the first sample on.
    expect(off[0]!.used_bytes.every((v) => v === 3 * block)).toBe(true);
    expect(off[1]!.used_bytes).toHaveLength(result.timeseries!.times_ms.length);
  });

  it("adaptive merging keeps a tier's bytes at the kept (even) sample times", () => {
    let held = 0;
    const probe = {
      role: "aggregated" as const,
      id: 0,
      groups: ["kv"],
      load: () => ({ running: 0, waiting: 0 }),
      groupPages: () => ({ used: [0], cached: [0] }),
    };
    const tiers = {
      names: ["cpu 0", "disk 0"],
      read(out: Float64Array, at: number) {
        out[at] = held;
        out[at + 1] = 2 * held;
      },
    };
    const s = new Sampler([probe], undefined, tiers);
    // The tier holds i bytes from i x 10 ms on: at time t it holds t / 10.
    for (let i = 0; i < 10_000; i++) {
      held = i;
      s.advance(i * 10 + 10);
    }
    s.finish(99_990);
    const ts = s.result();
    // 10,000 samples at 10 ms halve twice (at 4,097 and again): every 40 ms, 2,501 of them.
    expect(ts.sample_ms).toBe(40);
    expect(ts.times_ms).toHaveLength(2501);
    const expected = ts.times_ms.map((t) => Math.min(t / 10, 9999));
    expect(ts.offload).toEqual([
      { name: "cpu 0", used_bytes: expected },
      { name: "disk 0", used_bytes: expected.map((v) => 2 * v) },
    ]);
    // The worker's columns before the tiers' are untouched.
    expect(ts.workers[0]!.running.every((v) => v === 0)).toBe(true);
  });
});
