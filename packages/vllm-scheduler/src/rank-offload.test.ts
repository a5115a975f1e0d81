import { KvOffload, TierStore, type TierConfig } from "@kvsim/kv-offload";
import { poolGroupsForProfile } from "@kvsim/kv-pool";
import { engineSettings, type EngineOverrides } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { Rank } from "./rank.js";
import { expectOk, linearProfile, rangePrompt, rankConfig, request, runToIdle } from "./test-helpers.js";

// 100 bytes a token in blocks of 4: 400 bytes a block. Four usable pages. Fixed timing: 10 ms a
// pass with prompt work, 2 ms its decode part.
const profile = linearProfile({ kv_bytes_per_token: 100 });
const engine: EngineOverrides = { block_size: 4, num_gpu_blocks: 5, enable_prefix_caching: true };

function offloadRank(tier: Partial<TierConfig> = {}): { rank: Rank; cpu: TierStore } {
  // Loads at 400 B/ms (1 ms a block) after 0.5 ms; stores at 400,000 B/ms (1 µs a block).
  const cpu = new TierStore({ name: "cpu", capacityBytes: 1e6, readBytesPerMs: 400, writeBytesPerMs: 4e5, latencyMs: 0.5, store: "write_through", ...tier });
  const groups = poolGroupsForProfile(profile, engineSettings(engine));
  const offload = new KvOffload([cpu], groups, true);
  return { rank: new Rank({ ...rankConfig({ profile, engine }), offload }), cpu };
}

/** A (13 tokens) runs and leaves its three whole blocks cached; B (16 tokens) then takes every page, evicting them. */
function evictA(rank: Rank): void {
  expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 13), 1) }));
  expect(runToIdle(rank, 0).map((p) => p.endMs)).toEqual([12]);
  expectOk(rank.submit({ type: "submit", request: request("b", rangePrompt(1000, 16), 1) }));
  expect(runToIdle(rank, 20).map((p) => p.endMs)).toEqual([32]);
}

describe("a prompt evicted from the GPU but kept in the CPU tier", () => {
  it("is served from the tier: the load reserves its blocks, takes latency + bytes / bandwidth, and the prefill goes on after it", () => {
    const { rank, cpu } = offloadRank();
    evictA(rank);
    // A's three blocks were stored when its pass ended (12 ms); B's four at 32 ms.
    expect(cpu.counters.blocksStored).toBe(7);
    expectOk(rank.submit({ type: "submit", request: request("a2", rangePrompt(0, 13), 1) }));
    const [start] = runToIdle(rank, 40);
    // No GPU hit; the tier holds blocks 0-2: 12 tokens (at most 13 - 1), 1,200 bytes, done at
    // 40 + 0.5 + 1,200 / 400 = 43.5. The pass that starts the load computes nothing.
    expect(start!.durationMs).toBe(0);
    expect(start!.effects.offloadLoads).toEqual([
      { requestId: "a2", gpuHitTokens: 0, tokens: 12, tokensPerTier: [12], bytesPerTier: [1200], startMs: 40, doneMs: 43.5 },
    ]);
    expect(rank.load()).toEqual({ running: 0, waiting: 1 });
    // Its three blocks are reserved while it loads.
    expect(rank.metrics().pagesUsed).toBe(3);
    expect(rank.step(41)).toBeUndefined();
    expect(rank.nextWakeMs()).toBe(43.5);
    // At 43.5 it is admitted with 12 tokens reused and computes the last one: 43.5 + 10 + 2.
    const passes = runToIdle(rank, 43.5);
    expect(passes[0]!.effects.admissions).toEqual([{ requestId: "a2", reusedTokens: 12, resumed: false }]);
    expect(passes[0]!.scheduled).toEqual([{ requestId: "a2", tokens: 1 }]);
    expect(passes[0]!.effects.tokens).toEqual([{ requestId: "a2", index: 0, atMs: 55.5 }]);
    expect(rank.isDrained()).toBe(true);
    expect(rank.nextWakeMs()).toBe(Infinity);
    expect(cpu.counters).toMatchObject({ loads: 1, blocksLoaded: 3, bytesLoaded: 1200, tokensServed: 12 });
  });

  it("a tier that keeps only evictions gets A's blocks when B evicts them", () => {
    const { rank, cpu } = offloadRank({ store: "on_evict" });
    evictA(rank);
    // B's pass (ending at 32) evicted A's three cached blocks: the tier took them then.
    expect(cpu.counters.blocksStored).toBe(3);
    expectOk(rank.submit({ type: "submit", request: request("a2", rangePrompt(0, 13), 1) }));
    expect(runToIdle(rank, 40)[0]!.effects.offloadLoads[0]).toMatchObject({ tokens: 12, doneMs: 43.5 });
  });

  it("a request cancelled while it loads gives back its pages and unpins its tier blocks", () => {
    const { rank, cpu } = offloadRank();
    evictA(rank);
    expectOk(rank.submit({ type: "submit", request: request("a2", rangePrompt(0, 13), 1) }));
    runToIdle(rank, 40);
    expect([...cpu.entries()].filter((e) => e.pins > 0).length).toBe(3);
    expectOk(rank.submit({ type: "cancel_request", requestId: "a2" }));
    expect(rank.metrics().pagesUsed).toBe(0);
    expect([...cpu.entries()].filter((e) => e.pins > 0).length).toBe(0);
    expect(rank.isDrained()).toBe(true);
    expect(rank.nextWakeMs()).toBe(Infinity);
  });

  it("other requests run while one loads", () => {
    const { rank } = offloadRank();
    evictA(rank);
    expectOk(rank.submit({ type: "submit", request: request("a2", rangePrompt(0, 13), 1) }));
    expectOk(rank.submit({ type: "submit", request: request("c", rangePrompt(5000, 3), 1) }));
    const passes = runToIdle(rank, 40);
    // At 40: a2 starts loading and c (no hit anywhere) is admitted in the same pass: 40 + 10 + 2.
    expect(passes[0]!.effects.offloadLoads.map((l) => l.requestId)).toEqual(["a2"]);
    expect(passes[0]!.scheduled).toEqual([{ requestId: "c", tokens: 3 }]);
    expect(passes[0]!.endMs).toBe(52);
  });
});
