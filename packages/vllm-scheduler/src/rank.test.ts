import { createPromptTokens } from "@kvsim/kv-pool";
import type { Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { expectOk, linearProfile, makeRank, rangePrompt, request, runToIdle, scheduledOf } from "./test-helpers.js";

describe("step timing with fixed 10 ms / 2 ms", () => {
  it("one request of 4 prompt and 2 output tokens: first token at 12 ms, last at 14 ms", () => {
    const rank = makeRank();
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 4), 2) }));
    const passes = runToIdle(rank, 0);
    // Pass 1: the 4-token prompt (10 ms) and its first token sampled in the same pass (2 ms): 0 + 10 + 2 = 12.
    // Pass 2: one decode row (2 ms): 12 + 2 = 14.
    expect(passes.map((p) => [p.startMs, p.prefillMs, p.decodeMs, p.endMs])).toEqual([
      [0, 10, 2, 12],
      [12, 0, 2, 14],
    ]);
    expect(passes.flatMap((p) => p.effects.tokens)).toEqual([
      { requestId: "r", index: 0, atMs: 12 },
      { requestId: "r", index: 1, atMs: 14 },
    ]);
    expect(passes[1]!.effects.finished).toEqual([{ requestId: "r" }]);
    expect(rank.isDrained()).toBe(true);
    expect(rank.metrics().pagesUsed).toBe(0);
  });

  it("a 192-token prompt with a 64-token budget: three prefill passes, first token at 32 ms, last at 34 ms", () => {
    const rank = makeRank({ engine: { max_num_batched_tokens: 64 } });
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 192), 2) }));
    const passes = runToIdle(rank, 0);
    // 192 / 64 = 3 chunks of 64; the first two sample nothing (10 ms each), the third reaches the
    // end of the prompt and samples: 10 + 10 + (10 + 2) = 32; then one decode pass: 32 + 2 = 34.
    expect(passes.map((p) => [p.scheduledTokens, p.endMs])).toEqual([
      [64, 10],
      [64, 20],
      [64, 32],
      [1, 34],
    ]);
    expect(passes.flatMap((p) => p.effects.tokens.map((t) => [t.index, t.atMs]))).toEqual([
      [0, 32],
      [1, 34],
    ]);
  });

  it("a request with no output tokens finishes after its prefill without a token and without decode time", () => {
    const rank = makeRank();
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 8), 0) }));
    const [pass, ...rest] = runToIdle(rank, 5);
    expect(rest).toEqual([]);
    // 5 + 10 (prefill only) = 15
    expect([pass!.prefillMs, pass!.decodeMs, pass!.endMs]).toEqual([10, 0, 15]);
    expect(pass!.effects.tokens).toEqual([]);
    expect(pass!.effects.finished).toEqual([{ requestId: "r" }]);
  });

  it("returns undefined when there is nothing to run", () => {
    const rank = makeRank();
    expect(rank.step(0)).toBeUndefined();
    expect(rank.hasWork()).toBe(false);
    expect(rank.isDrained()).toBe(true);
  });
});

describe("pass composition priced from profile tables", () => {
  // Affine tables with power-of-two extents, so interpolation is exact and the query can be read
  // back from the latency: prefill = 100 b + new + cached / 8; decode = 10 b + kv / 16.
  const prefill = [1, 3].flatMap((b) =>
    [0, 8192].flatMap((n) => [0, 8192].map((c) => ({ batch_size: b, new_tokens: n, cached_tokens: c, latency_ms: 100 * b + n + c / 8 }))),
  );
  const decode = [1, 3].flatMap((b) => [0, 8192].map((kv) => ({ batch_size: b, kv_tokens: kv, latency_ms: 10 * b + kv / 16 })));
  const profile: Profile = linearProfile({ forward_pass: { provenance: "test", prefill, decode } });

  it("prefill over the requests with prompt work, decode over the requests that sample", () => {
    const rank = makeRank({ profile, engine: { max_num_batched_tokens: 1000 }, timing: { type: "profile", outside_grid: "refuse" } });
    expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 600), 3) }));
    expectOk(rank.submit({ type: "submit", request: request("b", rangePrompt(10_000, 600), 3) }));
    const p1 = rank.step(0)!;
    // Pass 1: a computes its 600 tokens, b its first 400 (budget 1000 - 600).
    // Prefill: batch 2, new 600 + 400 = 1000, cached 0 -> 200 + 1000 + 0 = 1200.
    // Decode: only a samples, sequence length 600 -> 10 + 600 / 16 = 47.5.
    expect(scheduledOf(p1)).toEqual({ a: 600, b: 400 });
    expect([p1.prefillMs, p1.decodeMs, p1.endMs]).toEqual([1200, 47.5, 1247.5]);
    const p2 = rank.step(p1.endMs)!;
    // Pass 2: a decodes 1 token; b computes its last 200 with 400 before the chunk.
    // Prefill: batch 1, new 200, cached 400 -> 100 + 200 + 50 = 350.
    // Decode: a (sequence 601) and b (600) sample -> 20 + 1201 / 16 = 95.0625.
    expect(scheduledOf(p2)).toEqual({ a: 1, b: 200 });
    expect([p2.prefillMs, p2.decodeMs, p2.clampedTimingQueries]).toEqual([350, 95.0625, 0]);
  });

  it("counts clamped queries in the step result", () => {
    const rank = makeRank({ profile, timing: { type: "profile", outside_grid: "clamp" } });
    expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 9000), 1) }));
    const p = rank.step(0)!;
    // Pass 1: the budget caps the 9000-token prompt at 8192 tokens: prefill (1, 8192, 0) is on the grid.
    expect(p.scheduledTokens).toBe(8192);
    expect(p.clampedTimingQueries).toBe(0);
    const p2 = rank.step(p.endMs)!;
    // Pass 2: the last 808 tokens with 8192 before them (cached 8192 inside the grid) and the
    // sample at sequence 9000 > 8192 kv tokens: the decode query clamps to 10 + 8192 / 16 = 522.
    expect([p2.prefillMs, p2.decodeMs, p2.clampedTimingQueries]).toEqual([100 + 808 + 1024, 522, 1]);
  });

  it("refuses a query outside the grid with an error naming it", () => {
    const rank = makeRank({ profile, engine: { max_num_seqs: 8 }, timing: { type: "profile", outside_grid: "refuse" } });
    for (let i = 0; i < 4; i++) expectOk(rank.submit({ type: "submit", request: request(`r${i}`, rangePrompt(i * 100, 10), 1) }));
    // Four prompts in one pass: batch_size 4 is above the grid's 1..3.
    expect(() => rank.step(0)).toThrow("forward_pass.prefill: the query (batch_size 4, new_tokens 40, cached_tokens 0) is outside the measured grid");
  });
});

describe("prefix hits at admission", () => {
  it("reuses the cached whole blocks of an earlier prompt and counts them as prefix in the pass", () => {
    const rank = makeRank({ engine: { block_size: 16 } });
    const shared = Array.from({ length: 40 }, (_, i) => i);
    expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 40), 1) }));
    runToIdle(rank);
    // b shares a's first 40 tokens and adds 8: a's full blocks are 0..15 and 16..31 (40 / 16 = 2
    // whole blocks), so b reuses 32 tokens and computes 48 - 32 = 16.
    const b = Uint32Array.from([...shared, 900, 901, 902, 903, 904, 905, 906, 907]);
    expectOk(rank.submit({ type: "submit", request: request("b", createPromptTokens(b), 1) }));
    expect(rank.peekPrefixHitTokens(createPromptTokens(b))).toBe(32);
    const p = rank.step(100)!;
    expect(p.effects.admissions).toEqual([{ requestId: "b", reusedTokens: 32, resumed: false }]);
    expect(p.scheduledTokens).toBe(16);
  });
});
