import { InputError } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import { byLength, glmProfile, linearProfile, traceSpec } from "./test-fixtures.js";

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(r.reason);
  return r;
}

const fixed = { type: "fixed", prefill_ms: 1, decode_ms: 1 };

/** The engine sizes a 1,000-byte-per-token linear rank from 1 GiB of GPU memory with given terms. */
const gpuEngine = {
  gpu_memory_gib: 1,
  gpu_memory_utilization: 0.5,
  weights_gib: 0.25,
  activation_peak_gib: 0.125,
  cuda_graph_memory_gib: 0,
  block_size: 4,
  max_num_seqs: 4,
  max_num_batched_tokens: 64,
};

describe("KV capacity from GPU memory in a replay", () => {
  it("sizes the pool from the engine's GPU memory and reports the derivation", async () => {
    const spec = traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: gpuEngine, timing: fixed });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2)] }));
    // 1 GiB x 0.5 = 536,870,912; less 0.25 GiB weights (268,435,456) and 0.125 GiB activations
    // (134,217,728) = 134,217,728 bytes; a page is 1,000 x 4 = 4,000 bytes: 33,554 pages.
    expect(r.report.kv_capacity?.aggregated).toMatchObject({ kv_cache_bytes: 134_217_728, page_bytes: 4000, num_gpu_blocks: 33_554, kv_cache_tokens: 134_216 });
    expect(r.report.completed_requests).toBe(1);
  });

  it("leaves the report without kv_capacity when num_gpu_blocks is given", async () => {
    const spec = traceSpec({
      profile: linearProfile(1000),
      topology: { kind: "aggregated", workers: 1 },
      engine: { ...gpuEngine, num_gpu_blocks: 16 },
      timing: fixed,
    });
    expect(ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2)] })).report.kv_capacity).toBeUndefined();
  });

  it("sizes each P/D role from its own engine and names the role's field when it cannot", async () => {
    const engine = { gpu_memory_gib: 80, weights_gib: 20, activation_peak_gib: 2, cuda_graph_memory_gib: 0 };
    const spec = traceSpec({
      profile: glmProfile("0.32.0"),
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      engine,
      decode: { engine: { gpu_memory_utilization: 0.5 } },
      timing: fixed,
    });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 4000, 2)] }));
    // Prefill: 80 GiB x 0.9 = 72 GiB - 22 GiB = 50 GiB = 53,687,091,200 B / 13,045,120 B pages = 4,115.
    // Decode: 80 GiB x 0.5 = 40 GiB - 22 GiB = 18 GiB = 19,327,352,832 B / 13,045,120 = 1,481.
    expect(r.report.kv_capacity?.prefill?.num_gpu_blocks).toBe(4115);
    expect(r.report.kv_capacity?.decode?.num_gpu_blocks).toBe(1481);
    // floor(4,115 / 6 groups) x 2,176 tokens = 685 x 2,176
    expect(r.report.kv_capacity?.prefill?.kv_cache_tokens).toBe(685 * 2176);

    const tooSmall = traceSpec({ ...spec, decode: { engine: { gpu_memory_utilization: 0.2 } } });
    const e = await runReplay({ spec: tooSmall, records: [byLength(1, 0, 4000, 2)] }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).issues.map((i) => i.path)).toEqual(["engine.gpu_memory_gib"]);
    expect((e as InputError).issues[0]!.message).toMatch(/^decode rank: leaves no room for the KV cache: 16\.00 GiB usable/);
    // An explicit num_gpu_blocks wins over the memory fields, which are then unused.
    const explicit = traceSpec({ ...spec, engine: { num_gpu_blocks: 64 }, decode: { engine: { gpu_memory_utilization: 0.5 } } });
    expect(ok(await runReplay({ spec: explicit, records: [byLength(1, 0, 4000, 2)] })).report.kv_capacity).toBeUndefined();
  });
});
