/**
 * Properties of speculative decoding on random workloads (fixed seeds): a request never gets more
 * tokens than it asked for and gets them in order; block conservation holds after every step and
 * the pool is empty at the end; drafts never push a step over its token budget; a run is
 * deterministic for its seed; a preempted request drops its drafts (its recompute schedules exactly
 * its tokens and its first step back emits one); with acceptance 0 the run emits exactly what a run without
 * speculation emits, step for step, and only the price of the steps differs.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { EngineOverrides, SpeculativeConfig, Timing } from "@kvsim/profile-schema";
import type { StepResult } from "./contract.js";
import { expectOk, makeRank, rangePrompt, request } from "./test-helpers.js";

interface Arrival {
  readonly len: number;
  readonly family: number;
  readonly maxOut: number;
  readonly atStep: number;
}

interface Run {
  readonly passes: StepResult[];
  /** Per request, the output indices in the order they came. */
  readonly tokens: Map<string, number[]>;
  readonly finished: Set<string>;
  readonly rejected: Set<string>;
  readonly usable: number;
}

const LINEAR: Timing = {
  type: "linear",
  step_ms: 1,
  per_sequence_ms: 0.25,
  per_kv_token_us: 1,
  prompt_step_ms: 2,
  per_prompt_token_us: 10,
  per_cached_token_us: 1,
};

/** Submits each request before the step numbered `atStep` and steps until everything ended. */
function run(arrivals: readonly Arrival[], engine: EngineOverrides, timing: Timing = LINEAR): Run {
  const rank = makeRank({ engine: { block_size: 4, ...engine }, timing });
  const tokens = new Map<string, number[]>();
  const finished = new Set<string>();
  const rejected = new Set<string>();
  const passes: StepResult[] = [];
  let usable = -1;
  let now = 0;
  // Preempted requests recomputing: the tokens to recompute (prompt + outputs so far) and those
  // scheduled since. A preempted request drops its drafts, so its recompute schedules exactly its
  // tokens (no draft rides on its last chunk) and its first step back emits one token.
  const recompute = new Map<string, { target: number; done: number }>();
  const checkRecompute = (r: StepResult) => {
    for (const p of r.effects.preemptions)
      recompute.set(p.requestId, { target: arrivals[Number(p.requestId.slice(1))]!.len + (tokens.get(p.requestId)?.length ?? 0), done: 0 });
    for (const a of r.effects.admissions) {
      const rc = recompute.get(a.requestId);
      if (rc !== undefined && a.resumed) rc.done = a.reusedTokens;
    }
    for (const w of r.scheduled) {
      const rc = recompute.get(w.requestId);
      if (rc !== undefined) rc.done += w.tokens;
    }
    for (const [id, rc] of recompute) {
      const emitted = r.effects.tokens.filter((t) => t.requestId === id).length;
      if (emitted === 0) continue;
      expect(rc.done).toBe(rc.target);
      expect(emitted).toBe(1);
      recompute.delete(id);
    }
  };
  const note = (fx: StepResult["effects"]) => {
    for (const t of fx.tokens) {
      const list = tokens.get(t.requestId) ?? [];
      list.push(t.index);
      tokens.set(t.requestId, list);
    }
    for (const f of fx.finished) finished.add(f.requestId);
    for (const r of fx.rejections) rejected.add(r.requestId);
    const sum = fx.metrics.pagesUsed + fx.metrics.pagesFree;
    if (usable < 0) usable = sum;
    // Block conservation: used + free is the pool's usable size after every command and step.
    expect(sum).toBe(usable);
  };
  for (let step = 0; step < 20_000; step++) {
    arrivals.forEach((a, i) => {
      if (a.atStep !== step) return;
      // Three prompt families share prefixes (prefix hits, and evictions of them).
      const outcome = expectOk(rank.submit({ type: "submit", request: request(`r${i}`, rangePrompt(1000 * a.family + 1, a.len), a.maxOut) }));
      note(outcome.effects);
    });
    const r = rank.step(now);
    if (r === undefined) {
      if (arrivals.every((a) => a.atStep <= step)) break;
      continue;
    }
    passes.push(r);
    checkRecompute(r);
    note(r.effects);
    now = r.endMs;
  }
  expect(rank.metrics().pagesUsed).toBe(0);
  return { passes, tokens, finished, rejected, usable };
}

const arrivalsArb = fc.array(
  fc.record({
    len: fc.integer({ min: 1, max: 40 }),
    family: fc.integer({ min: 0, max: 2 }),
    maxOut: fc.integer({ min: 1, max: 30 }),
    atStep: fc.integer({ min: 0, max: 12 }),
  }),
  { minLength: 1, maxLength: 8 },
);

/** A speculative config: a constant rate or non-increasing per-position rates. */
const specArb: fc.Arbitrary<SpeculativeConfig> = fc
  .record({
    method: fc.constantFrom("ngram" as const, "mtp" as const, "draft_model" as const),
    k: fc.integer({ min: 1, max: 4 }),
    rate: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
    conditional: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 4, maxLength: 4 }),
    seed: fc.nat({ max: 1000 }),
  })
  .map(({ method, k, rate, conditional, seed }) => {
    let all = 1;
    const per = conditional.slice(0, k).map((p) => (all *= p));
    return {
      method,
      num_speculative_tokens: k,
      ...(rate === undefined ? { acceptance_per_position: per } : { acceptance_rate: rate }),
      seed,
      ...(method === "ngram" ? {} : { draft_cost_fraction: 0.1 }),
    };
  });

describe("speculative decoding: properties", () => {
  it("outputs in order and never past max_tokens, budget kept, blocks conserved, deterministic per seed", () => {
    fc.assert(
      fc.property(arrivalsArb, specArb, fc.integer({ min: 6, max: 40 }), fc.integer({ min: 8, max: 48 }), (arrivals, speculative_config, pages, budget) => {
        const engine: EngineOverrides = { num_gpu_blocks: pages, max_num_batched_tokens: budget, max_num_seqs: 4, speculative_config };
        const a = run(arrivals, engine);
        arrivals.forEach((arr, i) => {
          const id = `r${i}`;
          const got = a.tokens.get(id) ?? [];
          // In order, from 0, never more than asked; all of them when it finished.
          expect(got).toEqual(Array.from({ length: got.length }, (_, j) => j));
          expect(got.length).toBeLessThanOrEqual(arr.maxOut);
          if (a.finished.has(id)) expect(got.length).toBe(arr.maxOut);
          else expect(a.rejected.has(id)).toBe(true);
        });
        for (const p of a.passes) expect(p.scheduledTokens).toBeLessThanOrEqual(budget);
        // The same inputs give the same steps and tokens.
        const b = run(arrivals, engine);
        expect(b.passes.map((p) => [p.endMs, p.scheduledTokens, p.effects.tokens])).toEqual(
          a.passes.map((p) => [p.endMs, p.scheduledTokens, p.effects.tokens]),
        );
      }),
      { seed: 41, numRuns: 60 },
    );
  });

  it("with acceptance 0 the steps emit what they emit without speculation; only the price differs", () => {
    fc.assert(
      fc.property(arrivalsArb, fc.integer({ min: 1, max: 4 }), fc.constantFrom("ngram" as const, "mtp" as const), (arrivals, k, method) => {
        // A pool and budget no draft can strain: the schedules can differ only through the drafts.
        const roomy: EngineOverrides = { num_gpu_blocks: 4096, max_num_batched_tokens: 4096, max_num_seqs: 16 };
        const spec = { method, num_speculative_tokens: k, acceptance_rate: 0, ...(method === "mtp" ? { draft_cost_fraction: 0.2 } : {}) } as SpeculativeConfig;
        const off = run(arrivals, roomy);
        const on = run(arrivals, { ...roomy, speculative_config: spec });
        expect(on.passes.length).toBe(off.passes.length);
        const emitted = (r: Run) => r.passes.map((p) => p.effects.tokens.map((t) => `${t.requestId}#${t.index}`));
        expect(emitted(on)).toEqual(emitted(off));
        // Verification (1 + k tokens per decode row) and the drafter only add time.
        on.passes.forEach((p, i) => {
          expect(p.durationMs).toBeGreaterThanOrEqual(off.passes[i]!.durationMs);
        });
      }),
      { seed: 4141, numRuns: 60 },
    );
  });

  it("with acceptance 0 and fixed timing and a free n-gram drafter the runs are identical in time too", () => {
    const arrivals: Arrival[] = [
      { len: 10, family: 0, maxOut: 12, atStep: 0 },
      { len: 30, family: 1, maxOut: 5, atStep: 2 },
      { len: 7, family: 0, maxOut: 20, atStep: 3 },
    ];
    const fixed: Timing = { type: "fixed", prefill_ms: 5, decode_ms: 2 };
    const off = run(arrivals, { num_gpu_blocks: 256 }, fixed);
    const on = run(
      arrivals,
      { num_gpu_blocks: 256, speculative_config: { method: "ngram", num_speculative_tokens: 3, acceptance_rate: 0, ngram_cpu_us_per_row: 0 } },
      fixed,
    );
    expect(on.passes.map((p) => [p.endMs, p.effects.tokens])).toEqual(off.passes.map((p) => [p.endMs, p.effects.tokens]));
  });
});
