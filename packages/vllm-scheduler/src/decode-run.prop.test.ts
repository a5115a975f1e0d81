/**
 * The decode fast path against the step path, within this package. Two ranks get the same
 * requests at the same times; one only ever calls `step`, the other calls `decodeRun` first (with
 * the next arrival as its horizon and random step and time caps) and `step` only when no fast run
 * is possible. decode-run.ts promises the state
 * and the tokens of that many `step` calls, so the tokens (request, index, time), the finished and
 * preempted requests and the final metrics must be equal, and the fast rank must have used runs.
 */
import { engineSettings, type Timing } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Rank } from "./rank.js";
import { FIXED_10_2, hybridProfile, linearProfile, rangePrompt, request } from "./test-helpers.js";

const TIMINGS: readonly Timing[] = [
  FIXED_10_2,
  { type: "polynomial" },
  { type: "linear", step_ms: 1, per_sequence_ms: 0.25, per_kv_token_us: 3, prompt_step_ms: 2, per_prompt_token_us: 7, per_cached_token_us: 1 },
];

interface Arrival {
  readonly atMs: number;
  readonly family: number;
  readonly len: number;
  readonly outputs: number;
}

interface Setup {
  readonly grouped: boolean;
  readonly caching: boolean;
  readonly pages: number;
  readonly timing: number;
  readonly captureSizes: boolean;
  readonly maxModelLen: number | undefined;
  readonly arrivals: readonly Arrival[];
  readonly caps: readonly { readonly steps: number; readonly endAfterMs: number }[];
}

const setupArb: fc.Arbitrary<Setup> = fc.record({
  grouped: fc.boolean(),
  caching: fc.boolean(),
  pages: fc.integer({ min: 12, max: 48 }),
  timing: fc.integer({ min: 0, max: TIMINGS.length - 1 }),
  captureSizes: fc.boolean(),
  maxModelLen: fc.constantFrom(undefined, undefined, 40),
  arrivals: fc.array(
    fc.record({
      atMs: fc.integer({ min: 0, max: 200 }),
      family: fc.integer({ min: 0, max: 2 }),
      len: fc.integer({ min: 1, max: 20 }),
      outputs: fc.integer({ min: 1, max: 16 }),
    }),
    { minLength: 1, maxLength: 6 },
  ),
  caps: fc.array(fc.record({ steps: fc.integer({ min: 1, max: 8 }), endAfterMs: fc.constantFrom(Infinity, 5, 30, 100) }), { minLength: 1, maxLength: 4 }),
});

interface Outcome {
  readonly tokens: string[];
  readonly finished: string[];
  readonly preempted: string[];
  readonly metrics: unknown;
  readonly fastSteps: number;
}

function run(setup: Setup, fast: boolean): Outcome {
  const rank = new Rank({
    role: "aggregated",
    profile: setup.grouped ? hybridProfile("0.31.0") : linearProfile(),
    engine: engineSettings({
      ...(setup.grouped ? {} : { block_size: 4 }),
      num_gpu_blocks: setup.pages,
      max_num_batched_tokens: 16,
      enable_prefix_caching: setup.caching,
      ...(setup.captureSizes ? { cudagraph_capture_sizes: [1, 2, 4, 8] } : {}),
      ...(setup.maxModelLen === undefined ? {} : { max_model_len: setup.maxModelLen }),
    }),
    timing: TIMINGS[setup.timing]!,
  });
  const arrivals = [...setup.arrivals].map((a, i) => ({ ...a, id: `r${i}` })).sort((a, b) => a.atMs - b.atMs);
  const out = { tokens: [] as string[], finished: [] as string[], preempted: [] as string[] };
  let fastSteps = 0;
  let next = 0;
  let now = 0;
  let capIndex = 0;
  for (let guard = 0; guard < 10_000; guard++) {
    while (next < arrivals.length && arrivals[next]!.atMs <= now) {
      const a = arrivals[next++]!;
      const outcome = rank.submit({ type: "submit", request: request(a.id, rangePrompt(a.family * 1000, a.len), a.outputs) });
      if (outcome.ok) out.finished.push(...outcome.effects.rejections.map((r) => `rejected ${r.requestId}`));
    }
    const horizon = next < arrivals.length ? arrivals[next]!.atMs : Infinity;
    if (fast) {
      const cap = setup.caps[capIndex++ % setup.caps.length]!;
      const r = rank.decodeRun(now, { startBeforeMs: horizon, endByMs: now + cap.endAfterMs, maxSteps: cap.steps });
      if (r !== undefined) {
        expect(r.steps).toBeGreaterThan(0);
        expect([r.startMs, r.endMs]).toEqual([now, r.stepEndsMs[r.steps - 1]]);
        for (let s = 0; s < r.steps; s++) {
          r.requestIds.forEach((id, i) => out.tokens.push(`${id}#${r.firstTokenIndex[i]! + s}@${r.stepEndsMs[s]}`));
        }
        expect(r.metrics).toEqual(rank.metrics());
        fastSteps += r.steps;
        now = r.endMs;
        continue;
      }
    }
    const step = rank.step(now);
    if (step === undefined) {
      if (next >= arrivals.length) break;
      now = Math.max(now, horizon);
      continue;
    }
    out.tokens.push(...step.effects.tokens.map((t) => `${t.requestId}#${t.index}@${t.atMs}`));
    out.finished.push(...step.effects.finished.map((f) => f.requestId), ...step.effects.rejections.map((r) => `rejected ${r.requestId}`));
    out.preempted.push(...step.effects.preemptions.map((p) => p.requestId));
    now = step.endMs;
  }
  return { ...out, metrics: rank.metrics(), fastSteps };
}

describe("decodeRun", () => {
  it("gives the tokens, finishes and state of the steps it replaces", () => {
    let fastSteps = 0;
    fc.assert(
      fc.property(setupArb, (setup) => {
        const slow = run(setup, false);
        const fast = run(setup, true);
        expect({ ...fast, fastSteps: 0 }).toEqual(slow);
        fastSteps += fast.fastSteps;
      }),
      { seed: 17, numRuns: 150 },
    );
    // The runs did replace steps (a fast path never taken would prove nothing).
    expect(fastSteps).toBeGreaterThan(500);
  });
});
