import type { PromptTokens } from "@kvsim/kv-pool";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KvRouterPlacement } from "./kv-router-placement.js";
import type { PlacementTarget } from "./placement.js";

const promptOf = (length: number) => ({ length, tokens: new Uint32Array(0), blockHashes: () => [] }) as PromptTokens;

// A request: its length, each worker's hit, and whether its prefill ends / it leaves before the next.
const request = (workers: number) =>
  fc.record({
    length: fc.integer({ min: 1, max: 4096 }),
    hits: fc.array(fc.integer({ min: 0, max: 4096 }), { minLength: workers, maxLength: workers }),
    prefillDone: fc.boolean(),
    finished: fc.boolean(),
  });

const scenario = fc.integer({ min: 1, max: 6 }).chain((workers) =>
  fc.record({
    workers: fc.constant(workers),
    weight: fc.double({ min: 0, max: 8, noNaN: true }),
    temperature: fc.double({ min: 0.01, max: 10, noNaN: true }),
    seed: fc.nat(),
    requests: fc.array(request(workers), { minLength: 1, maxLength: 40 }),
  }),
);

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

/** Every placement of a run; hits at most the prompt's length, as a pool reports them. */
function placements(s: Scenario): number[] {
  let current: readonly number[] = [];
  const targets = Array.from({ length: s.workers }, (_, i): PlacementTarget => ({
    prefixHitTokens: (p) => Math.min(p.length, current[i]!),
    load: () => 0,
    kvUsage: () => 0,
  }));
  const router = new KvRouterPlacement(targets, {
    blockSize: 16,
    overlapScoreWeight: s.weight,
    temperature: s.temperature,
    trackActiveBlocks: true,
    seed: s.seed,
  });
  return s.requests.map((r) => {
    current = r.hits;
    const placed = router.place(promptOf(r.length));
    if (r.prefillDone) router.prefillDone(placed);
    if (r.finished) router.finished(placed);
    return placed.index;
  });
}

describe("kv_aware with a temperature above 0 (fast-check, fixed seed)", () => {
  it("places every request on a worker of the pool, and the same seed gives the same placements", () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const a = placements(s);
        for (const i of a) expect(i >= 0 && i < s.workers && Number.isInteger(i)).toBe(true);
        expect(placements(s)).toEqual(a);
      }),
      { seed: 42, numRuns: 200 },
    );
  });
});
