import type { PromptTokens } from "@kvsim/kv-pool";
import { RouterSchema } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { KvRouterPlacement } from "./kv-router-placement.js";
import { LeastLoadedPlacement, PowerOfTwoPlacement } from "./load-placement.js";
import { createPlacement, PrefixOnlyPlacement, RoundRobinPlacement, type PlacementTarget } from "./placement.js";
import { WeightedScorerPlacement } from "./weighted-placement.js";

// Placement passes prompts through to the targets; a stand-in with a length is enough here.
const promptOf = (length: number) => ({ length, tokens: new Uint32Array(0), blockHashes: () => [] }) as PromptTokens;
const prompt = promptOf(0);
const target = (hit: number, load: number, usage = 0): PlacementTarget => ({ prefixHitTokens: () => hit, load: () => load, kvUsage: () => usage });

describe("round robin", () => {
  it("cycles 0, 1, 2, 0, 1 over three workers and reports no hit", () => {
    const rr = new RoundRobinPlacement(3);
    expect([1, 2, 3, 4, 5].map(() => rr.place().index)).toEqual([0, 1, 2, 0, 1]);
    expect(rr.place().hitTokens).toBe(0);
  });
  it("refuses an empty pool", () => {
    expect(() => new RoundRobinPlacement(0)).toThrow(/at least one worker/);
  });
});

describe("prefix_only (the former kv_aware)", () => {
  it("picks the longest prefix hit", () => {
    const p = new PrefixOnlyPlacement([target(16, 0), target(48, 9), target(32, 0)]);
    expect(p.place(prompt)).toEqual({ index: 1, hitTokens: 48 });
  });
  it("breaks a hit tie by the least load", () => {
    const p = new PrefixOnlyPlacement([target(32, 5), target(32, 2), target(16, 0)]);
    expect(p.place(prompt)).toEqual({ index: 1, hitTokens: 32 });
  });
  it("breaks a hit and load tie by the lowest index", () => {
    const p = new PrefixOnlyPlacement([target(0, 3), target(0, 1), target(0, 1)]);
    expect(p.place(prompt)).toEqual({ index: 1, hitTokens: 0 });
  });
});

/**
 * Three workers whose hits depend on the prompt (a table per prompt object), for Dynamo's cost:
 * cost_i = w x (P_i + isl - 16 o_i) / 16 + (B_i + floor(isl / 16) - o_i), block size 16, where
 * P_i, B_i are the router's booked prefill tokens and blocks and o_i the cached prefix blocks.
 */
function kvRouterScene(weight: number) {
  const hits = new Map<PromptTokens, readonly number[]>();
  const targets = [0, 1, 2].map((i): PlacementTarget => ({ prefixHitTokens: (p) => hits.get(p)?.[i] ?? 0, load: () => 0, kvUsage: () => 0 }));
  const router = new KvRouterPlacement(targets, { blockSize: 16, overlapScoreWeight: weight, temperature: 0, trackActiveBlocks: true, seed: 0 });
  const ask = (length: number, workerHits: readonly number[]) => {
    const p = promptOf(length);
    hits.set(p, workerHits);
    return router.place(p);
  };
  // Priming, every pool idle at first (P = B = 0), for every weight used below (0.25 to 5):
  // a1: 176 tokens (11 blocks), W0 caches 1 block: W0 costs 10w + 10, W1 and W2 11w + 11: W0,
  //     booking P0 += 160, B0 += 10; its prefill then ends: P0 = 0, B0 = 10.
  const a1 = ask(176, [16, 0, 0]);
  expect(a1.index).toBe(0);
  router.prefillDone(a1);
  // a2: 64 tokens (4 blocks), W1 caches 1: W0 4w + 14, W1 3w + 3, W2 4w + 4: W1, booking P1 48,
  //     B1 3; its prefill ends: P1 = 0, B1 = 3.
  const a2 = ask(64, [0, 16, 0]);
  expect(a2.index).toBe(1);
  router.prefillDone(a2);
  // a3: 256 tokens (16 blocks), W0 caches 14: W0 2w + 12, W1 16w + 19, W2 16w + 16: W0, booking
  //     P0 += 32, B0 += 2. State: P0 = 32, B0 = 12; P1 = 0, B1 = 3; P2 = B2 = 0.
  const a3 = ask(256, [224, 0, 0]);
  expect(a3.index).toBe(0);
  return { router, ask, a1, a2, a3 };
}

describe("kv_aware: Dynamo's KV router cost, derived by hand", () => {
  // The request: 128 tokens (8 blocks); W0 caches 6 blocks, W1 2, W2 none. Costs:
  //   W0: w (32 + 128 - 96) / 16 + (12 + 8 - 6) = 4w + 14
  //   W1: w (0 + 128 - 32) / 16 + (3 + 8 - 2)   = 6w + 9
  //   W2: w (0 + 128) / 16 + (0 + 8)            = 8w + 8
  const cases = [
    { weight: 0.25, costs: [15, 10.5, 10], expected: 2 },
    { weight: 1, costs: [18, 15, 16], expected: 1 },
    { weight: 2, costs: [22, 21, 24], expected: 1 },
    { weight: 3, costs: [26, 27, 32], expected: 0 },
    { weight: 5, costs: [34, 39, 48], expected: 0 },
  ];
  for (const { weight, costs, expected } of cases) {
    it(`overlap_score_weight ${weight}: costs ${costs.join(", ")} send the request to worker ${expected}`, () => {
      const { ask } = kvRouterScene(weight);
      expect(ask(128, [96, 32, 0])).toMatchObject({ index: expected, hitTokens: [96, 32, 0][expected] });
    });
  }

  it("gives back a request's prefill tokens when its prefill ends (weight 2: W1 before, W0 after)", () => {
    const { router, ask, a3 } = kvRouterScene(2);
    // a3's prefill ends: P0 = 0, so W0 costs 2 x (0 + 32) / 16 + 14 = 18 against W1 21 and W2 24.
    router.prefillDone(a3);
    router.prefillDone(a3); // a second call changes nothing
    expect(ask(128, [96, 32, 0]).index).toBe(0);
  });

  it("gives back a request's blocks when it leaves (weight 1: W1 before, W0 after)", () => {
    const { router, ask, a1 } = kvRouterScene(1);
    // a1 leaves: B0 = 12 - 10 = 2, so W0 costs (32 + 32) / 16 + (2 + 2) = 8 against W1 15 and W2 16.
    router.finished(a1);
    router.finished(a1);
    expect(ask(128, [96, 32, 0]).index).toBe(0);
  });

  it("temperature 0 and a seed give the same placements every time", () => {
    const run = () => {
      const { ask } = kvRouterScene(1);
      return [1, 2, 3, 4, 5, 6].map((k) => ask(16 * k, [0, 0, 0]).index);
    };
    expect(run()).toEqual(run());
  });

  it("in P/D the decode router gives overlap no weight and probes no cache", () => {
    let probes = 0;
    const targets = [0, 1].map((): PlacementTarget => ({ prefixHitTokens: () => (probes++, 64), load: () => 0, kvUsage: () => 0 }));
    const router = RouterSchema.parse("kv_aware");
    const decode = createPlacement(router, targets, 16, "decode");
    // Both idle: costs 0 x ... + 4 blocks each: a tie; the placement books 4 blocks on the winner,
    // so the next request (also 4 blocks) goes to the other worker (cost 4 against 8).
    const first = decode.place(promptOf(64)).index;
    expect(decode.place(promptOf(64)).index).toBe(1 - first);
    expect(probes).toBe(0);
  });
});

describe("least_loaded, power_of_two, weighted", () => {
  it("least_loaded takes the fewest requests, then the least KV in use, then the lowest index", () => {
    expect(new LeastLoadedPlacement([target(0, 3), target(0, 1, 0.5), target(0, 1, 0.2)]).place().index).toBe(2);
    expect(new LeastLoadedPlacement([target(0, 2, 0.1), target(0, 2, 0.1)]).place().index).toBe(0);
  });
  it("power_of_two on two workers compares both: the less loaded wins whatever the draw", () => {
    const p = new PowerOfTwoPlacement([target(0, 4), target(0, 1)], 7);
    expect([1, 2, 3, 4, 5].map(() => p.place().index)).toEqual([1, 1, 1, 1, 1]);
  });
  it("power_of_two never takes the busiest of three workers (it loses every pair it is drawn in)", () => {
    const p = new PowerOfTwoPlacement([target(0, 2), target(0, 9), target(0, 1)], 3);
    for (let k = 0; k < 50; k++) expect(p.place().index).not.toBe(1);
  });
  it("weighted sums prefix, queue and KV scores, each derived by hand", () => {
    // 128-token prompt (8 blocks), block size 16.
    // W0: hit 96 (prefix 6/8 = 0.75), 4 requests (queue (4 - 4)/(4 - 0) = 0), usage 0.5 (kv 0.5)
    // W1: hit 0 (prefix 0), 0 requests (queue 1), usage 0.9 (kv 0.1)
    // W2: hit 32 (prefix 0.25), 2 requests (queue 0.5), usage 0.2 (kv 0.8)
    const targets = [target(96, 4, 0.5), target(0, 0, 0.9), target(32, 2, 0.2)];
    const place = (prefixWeight: number, queueWeight: number, kvUtilizationWeight: number) =>
      new WeightedScorerPlacement(targets, { blockSize: 16, prefixWeight, queueWeight, kvUtilizationWeight, seed: 0 }).place(promptOf(128)).index;
    // 1/1/1: W0 0.75 + 0 + 0.5 = 1.25, W1 0 + 1 + 0.1 = 1.1, W2 0.25 + 0.5 + 0.8 = 1.55: W2.
    expect(place(1, 1, 1)).toBe(2);
    // 3/1/1: W0 2.25 + 0.5 = 2.75, W1 1.1, W2 0.75 + 1.3 = 2.05: W0.
    expect(place(3, 1, 1)).toBe(0);
    // 0/3/0: queue only: W1 3.
    expect(place(0, 3, 0)).toBe(1);
  });
});

describe("createPlacement", () => {
  it("maps every policy of the spec to its router", () => {
    const targets = [target(0, 1), target(64, 1)];
    const make = (r: string) => createPlacement(RouterSchema.parse(r), targets, 16, "aggregated");
    expect(make("prefix_only").place(promptOf(128)).index).toBe(1);
    expect(make("round_robin").place(promptOf(128)).index).toBe(0);
    expect(make("kv_aware")).toBeInstanceOf(KvRouterPlacement);
    expect(make("least_loaded")).toBeInstanceOf(LeastLoadedPlacement);
    expect(make("power_of_two")).toBeInstanceOf(PowerOfTwoPlacement);
    expect(make("weighted")).toBeInstanceOf(WeightedScorerPlacement);
  });
});
