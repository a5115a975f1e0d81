import { InputError } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import { byTokens, glmProfile, offloadScenario, range, traceSpec } from "./test-fixtures.js";

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`replay failed: ${r.reason}`);
  return r;
}

// offloadScenario (test-fixtures.ts): 4,096-byte blocks, four usable pages, fixed 10 / 2 ms, a CPU
// tier that loads three blocks in 1 ms after 0.5 ms; r3 repeats r1's prompt after r2 evicted it.
const { base, cpu, trace } = offloadScenario;

describe("a replay with a CPU tier", () => {
  it("serves an evicted prefix from the tier: the load delays the prefill, the record says what the tier served", async () => {
    const result = ok(await runReplay({ spec: traceSpec({ ...base, kv_offload: { tiers: [cpu] } }), records: trace }));
    const r3 = result.records[2]!;
    // At 40: no GPU hit, 12 tokens (blocks 0-2) from the tier, loaded by 40 + 0.5 + 1 = 41.5; the
    // last token's prefill then runs 41.5 + 10 + 2 = 53.5: TTFT 13.5 (12 without the tier, where
    // the whole prompt is recomputed in one fixed-time pass).
    expect([r3.admitted_ms, r3.first_token_ms, r3.ttft_ms, r3.reused_tokens]).toEqual([41.5, 53.5, 13.5, 12]);
    expect(r3.offload).toEqual({ tokens: { cpu: 12 }, load_ms: 1.5 });
    expect(result.records[0]!.offload).toBeUndefined();
    // Stored: r1's three blocks and r2's four (the loaded blocks are held already): 7 x 4,096.
    expect(result.report.kv_offload).toEqual({
      tiers: [
        {
          name: "cpu",
          store: "write_through",
          shared: "worker",
          instances: 1,
          capacity_bytes: 2 ** 20,
          loads: 1,
          tokens_served: 12,
          blocks_loaded: 3,
          bytes_loaded: 12_288,
          blocks_stored: 7,
          bytes_stored: 28_672,
          blocks_evicted: 0,
          blocks_dropped: 0,
          peak_bytes: 28_672,
        },
      ],
      loads: 1,
      tokens_served: 12,
      mean_load_ms: 1.5,
      p90_load_ms: 1.5,
    });
    // Reuse counts the tier's tokens: 12 of 13 + 16 + 13 prompt tokens.
    expect(result.report.prefix_cache_reused_ratio).toBeCloseTo(12 / 42, 12);
  });

  it("without kv_offload nothing changes, and the same spec with a tier the workload never fills gives the same report", async () => {
    const plain = ok(await runReplay({ spec: traceSpec(base), records: trace }));
    expect(plain.report.kv_offload).toBeUndefined();
    expect(plain.records[2]!.ttft_ms).toBe(12);
    // Requests that never share a prefix: the tier stores, never loads; every latency is the same.
    const distinct = [byTokens(1, 0, range(0, 13), 1), byTokens(2, 20, range(1000, 16), 1), byTokens(3, 40, range(2000, 13), 1)];
    const a = ok(await runReplay({ spec: traceSpec(base), records: distinct }));
    const b = ok(await runReplay({ spec: traceSpec({ ...base, kv_offload: { tiers: [cpu] } }), records: distinct }));
    expect(b.report.digest).toBe(a.report.digest);
    expect(b.report.kv_offload?.loads).toBe(0);
  });

  it("a tier shared by the workers of a node serves a prefix another worker stored", async () => {
    const spec = traceSpec({
      ...base,
      topology: { kind: "aggregated", workers: 2 },
      kv_offload: { tiers: [{ ...cpu, shared: "node" }], workers_per_node: 2 },
    });
    // Round robin: r1 on worker 0, r3 on worker 1, whose GPU never saw the prompt.
    const result = ok(await runReplay({ spec, records: [byTokens(1, 0, range(0, 13), 1), byTokens(3, 40, range(0, 13), 1)] }));
    expect(result.records[1]!.workers).toEqual({ aggregated: 1 });
    expect(result.records[1]!.offload).toEqual({ tokens: { cpu: 12 }, load_ms: 1.5 });
    expect(result.report.kv_offload!.tiers[0]!.instances).toBe(1);
  });

  it("offloaded blocks of two GPU blocks (block_size 8): only r1's first whole offloaded block comes back", async () => {
    // r1's 13 tokens cache GPU blocks 0-2: offloaded block 0 (GPU blocks 0-1) is stored; block 2
    // alone does not complete offloaded block 1. r3 loads 8 tokens, 2 x 4,096 bytes: 8,192 /
    // 12,288 ms after 0.5 ms, then computes its other 5 tokens in one 12 ms pass.
    const spec = traceSpec({ ...base, kv_offload: { tiers: [cpu], block_size: 8 } });
    const r3 = ok(await runReplay({ spec, records: trace })).records[2]!;
    expect(r3.reused_tokens).toBe(8);
    expect(r3.offload!.tokens).toEqual({ cpu: 8 });
    expect(r3.offload!.load_ms).toBeCloseTo(0.5 + 8192 / 12_288, 12);
    expect(r3.ttft_ms).toBeCloseTo(0.5 + 8192 / 12_288 + 12, 9);
    const bad = traceSpec({ ...base, kv_offload: { tiers: [cpu], block_size: 6 } });
    await expect(runReplay({ spec: bad, records: trace })).rejects.toThrow(
      /kv_offload\.block_size: aggregated rank: 6 tokens is not a multiple of the block of every cache group: kv \(4\)/,
    );
  });

  it("the decode fast path gives the same replay as stepping every pass, with tiers that evict", async () => {
    // 40 requests over 4 shared 8-token prefixes with 6-token tails and 9 outputs (decode runs
    // fill blocks), on pools of 12 pages and a CPU tier of six blocks that evicts into a disk tier.
    const records = Array.from({ length: 40 }, (_, i) => byTokens(i + 1, i * 7, [...range(1000 * (i % 4), 8), ...range(50_000 + 10 * i, 6)], 9));
    const spec = traceSpec({
      ...base,
      topology: { kind: "aggregated", workers: 2 },
      engine: { ...base.engine, num_gpu_blocks: 13 },
      kv_offload: {
        tiers: [
          { ...cpu, capacity: "24 KiB" },
          { ...cpu, name: "disk", capacity: "1 MiB", store: "on_evict", read_bandwidth: "4.096 MB/s" },
        ],
      },
    });
    const fast = ok(await runReplay({ spec, records }));
    const slow = ok(await runReplay({ spec, records, fastDecode: false }));
    expect(fast.report.kv_offload!.loads).toBeGreaterThan(0);
    expect(fast.report.kv_offload!.tiers[0]!.blocks_evicted).toBeGreaterThan(0);
    expect(fast.report.digest).toBe(slow.report.digest);
    expect(fast.report.kv_offload).toEqual(slow.report.kv_offload);
    expect(fast.records).toEqual(slow.records);
  });

  it("refuses tiers without prefix caching, naming the field", async () => {
    const spec = traceSpec({ ...base, engine: { ...base.engine, enable_prefix_caching: false }, kv_offload: { tiers: [cpu] } });
    await expect(runReplay({ spec, records: trace })).rejects.toThrow(InputError);
    await expect(runReplay({ spec, records: trace })).rejects.toThrow(
      /kv_offload: aggregated rank: offload tiers serve prefix hits; they need engine.enable_prefix_caching/,
    );
  });

  it("a grouped P/D prefill rank loads from its tier; the decode side is unchanged", async () => {
    const spec = traceSpec({
      profile: glmProfile("0.32.0"),
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      engine: { num_gpu_blocks: 64, enable_prefix_caching: true },
      timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
      prefill: { kv_offload: { tiers: [{ ...cpu, capacity: "100 GiB", read_bandwidth: "100 GB/s" }] } },
    });
    const prompt = range(0, 2 * 2176 + 10);
    const result = ok(await runReplay({ spec, records: [byTokens(1, 0, prompt, 2), byTokens(2, 100, prompt, 2)] }));
    expect(result.records.map((r) => r.status)).toEqual(["completed", "completed"]);
    expect(result.report.kv_offload!.tiers.map((t) => t.role)).toEqual(["prefill"]);
  });

  it("a P/D decode worker's tier hit shortens the handoff: only what the tier lacks moves", async () => {
    // Linear, 4-token blocks of 4,096 bytes. The decode pool (four pages) evicts r1's blocks for
    // r2; r3 repeats r1's 13-token prompt. Without the tier the handoff moves cdiv(13, 4) = 4
    // blocks (16,384 bytes); the decode tier holds blocks 0-2 (12 tokens, at most 13 - 1), so it
    // moves 4 - 3 = 1 block (4,096 bytes) and the tier loads the other three.
    const pd = {
      ...base,
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      engine: { num_gpu_blocks: 64, block_size: 4, enable_prefix_caching: true },
      decode: { engine: { num_gpu_blocks: 5 } },
      kv_transfer: { bandwidth: "4.096 GB/s", mode: "destination_missing" },
    };
    const without = ok(await runReplay({ spec: traceSpec(pd), records: trace }));
    const withTier = ok(await runReplay({ spec: traceSpec({ ...pd, decode: { ...pd.decode, kv_offload: { tiers: [cpu] } } }), records: trace }));
    expect(without.records[2]!.handoff!.payload_bytes).toBe(16_384);
    expect(withTier.records[2]!.handoff!.payload_bytes).toBe(4096);
    expect(withTier.records[2]!.handoff!.destination_hit_tokens).toBe(12);
    expect(withTier.records[2]!.offload).toEqual({ tokens: { "decode.cpu": 12 }, load_ms: 1.5 });
    expect(withTier.report.kv_offload!.tiers.map((t) => [t.role, t.loads])).toEqual([["decode", 1]]);
    expect(withTier.records.map((r) => r.status)).toEqual(["completed", "completed", "completed"]);
  });
});
