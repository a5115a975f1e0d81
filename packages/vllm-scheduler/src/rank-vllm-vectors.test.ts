/**
 * The scheduler vectors of docs/rules/vllm-scheduling.md §6 (T13-T21). vLLM's test fixture
 * (`create_scheduler`): max_num_seqs 16, max_num_batched_tokens 8192, chunked prefill on, prefix
 * caching off unless asked, 10,000 blocks of 16 tokens, max_model_len = the token budget; request
 * i's prompt is [i] * num_tokens and max_tokens 16.
 */
import type { EngineOverrides } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import type { LifecycleFact } from "./contract.js";
import { expectOk, makeRank, rangePrompt, repeatedPrompt, request, runToIdle, scheduledOf } from "./test-helpers.js";

const fixture = (overrides: EngineOverrides = {}): EngineOverrides => ({
  max_num_seqs: 16,
  max_num_batched_tokens: 8192,
  max_model_len: overrides.max_num_batched_tokens ?? 8192,
  num_gpu_blocks: 10_000,
  block_size: 16,
  enable_prefix_caching: false,
  ...overrides,
});

const reservedFacts = (facts: readonly LifecycleFact[]) => facts.filter((f) => f.type === "destination_reserved");

describe("T13 test_schedule", () => {
  it("schedules 10 requests of 10 tokens in one step, 10 tokens each, in insertion order", () => {
    const rank = makeRank({ engine: fixture() });
    for (let i = 0; i < 10; i++) expectOk(rank.submit({ type: "submit", request: request(`r${i}`, repeatedPrompt(i, 10), 16) }));
    const pass = rank.step(0)!;
    expect(pass.scheduled).toEqual(Array.from({ length: 10 }, (_, i) => ({ requestId: `r${i}`, tokens: 10 })));
    expect(pass.effects.admissions.map((a) => a.requestId)).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
    expect(rank.load()).toEqual({ running: 10, waiting: 0 });
  });
});

describe("T14 test_schedule_concurrent_partial_requests", () => {
  it("caps each request at the long-prefill threshold within the budget", () => {
    const rank = makeRank({ engine: fixture({ max_num_batched_tokens: 1024, long_prefill_token_threshold: 400 }) });
    for (let i = 0; i < 3; i++) expectOk(rank.submit({ type: "submit", request: request(`r${i}`, repeatedPrompt(i, 800), 16) }));
    // Step 1: 400 (threshold), 400 (threshold), 1024 - 800 = 224 (budget).
    const s1 = rank.step(0)!;
    expect(scheduledOf(s1)).toEqual({ r0: 400, r1: 400, r2: 224 });
    // Step 2: the same caps again; r0 and r1 reach 800 and sample.
    const s2 = rank.step(s1.endMs)!;
    expect(scheduledOf(s2)).toEqual({ r0: 400, r1: 400, r2: 224 });
    expect(s2.effects.tokens.map((t) => t.requestId)).toEqual(["r0", "r1"]);
    // Step 3: r0 and r1 decode 1 token each; r2 has 800 - 448 = 352 left (under the threshold).
    const s3 = rank.step(s2.endMs)!;
    expect(scheduledOf(s3)).toEqual({ r0: 1, r1: 1, r2: 352 });
  });
});

describe("T15 test_schedule_order", () => {
  const prompts = [800, 800, 10, 10];
  const submitAll = (chunked: boolean) => {
    const rank = makeRank({ engine: fixture({ max_num_batched_tokens: 1024, max_num_seqs: 3, enable_chunked_prefill: chunked }) });
    prompts.forEach((n, i) => expectOk(rank.submit({ type: "submit", request: request(`r${i}`, repeatedPrompt(i, n), 16) })));
    return rank.step(0)!;
  };

  it("chunked prefill on: 2 new requests in step 1 (800 + 224)", () => {
    expect(scheduledOf(submitAll(true))).toEqual({ r0: 800, r1: 224 });
  });

  it("chunked prefill off: 1 new request (head-of-line stop; the short ones are not pulled ahead)", () => {
    // r1 needs 800 > the 224 left: the waiting pass stops instead of skipping to r2.
    expect(scheduledOf(submitAll(false))).toEqual({ r0: 800 });
  });
});

describe("T17 test_preempt_during_execution", () => {
  it("preempts the tail of running when the head's next decode needs a block", () => {
    // 11 blocks (10 usable) of 16 tokens, two 80-token prompts, 5 blocks each. vLLM's test reaches
    // "both hold 5 blocks, r0 needs a 6th" through async scheduling (two schedule() calls before the
    // first output); a synchronous rank reaches the same state with both prefills in one pass
    // (budget 160 instead of 100).
    const rank = makeRank({ engine: fixture({ num_gpu_blocks: 11, max_num_batched_tokens: 160 }) });
    expectOk(rank.submit({ type: "submit", request: request("r0", repeatedPrompt(0, 80), 16) }));
    expectOk(rank.submit({ type: "submit", request: request("r1", repeatedPrompt(1, 80), 16) }));
    const s1 = rank.step(0)!;
    expect(scheduledOf(s1)).toEqual({ r0: 80, r1: 80 });
    expect(s1.effects.metrics.pagesUsed).toBe(10); // 2 x cdiv(80, 16)
    // Step 2: r0's token 80 needs cdiv(81, 16) = 6 blocks, the pool is full: r1 (the tail) is
    // preempted, its 5 blocks freed, r0 takes one: 6 used, 4 free. No admission in this step.
    const s2 = rank.step(s1.endMs)!;
    expect(s2.effects.preemptions).toEqual([{ requestId: "r1" }]);
    expect(scheduledOf(s2)).toEqual({ r0: 1 });
    expect(s2.effects.admissions).toEqual([]);
    expect(rank.load()).toEqual({ running: 1, waiting: 1 });
    expect([s2.effects.metrics.pagesUsed, s2.effects.metrics.pagesFree]).toEqual([6, 4]);

    const rest = runToIdle(rank, s2.endMs);
    const passes = [s1, s2, ...rest];
    // r1's token from step 1 (index 0) is kept; it resumes with index 1.
    const r1Tokens = passes.flatMap((p) => p.effects.tokens.filter((t) => t.requestId === "r1").map((t) => t.index));
    expect(r1Tokens).toEqual(Array.from({ length: 16 }, (_, i) => i));
    // r0 never needs more than cdiv(80 + 16 - 1 + 1, 16) = 6 blocks and finishes in pass 16 (its
    // 16th token); r1 (81 tokens, 6 blocks) cannot be admitted with 4 free until then.
    const readmit = passes.findIndex((p) => p.effects.admissions.some((a) => a.requestId === "r1" && a.resumed));
    expect(readmit).toBe(16);
    expect(passes[readmit]!.effects.admissions).toEqual([{ requestId: "r1", reusedTokens: 0, resumed: true }]);
    // It recomputes the prompt and its output token: 80 + 1 = 81 tokens, then samples index 1.
    expect(scheduledOf(passes[readmit]!)).toEqual({ r1: 81 });
    // Times: pass 1 ends at 10 + 2 = 12; passes 2-16 decode only, 15 x 2 = 30 -> 42; the re-admission
    // pass has prompt work and samples: 42 + 10 + 2 = 54.
    expect(passes[15]!.endMs).toBe(42);
    expect(passes[readmit]!.effects.tokens).toEqual([{ requestId: "r1", index: 1, atMs: 54 }]);
    expect(passes.reduce((n, p) => n + p.effects.preemptions.length, 0)).toBe(1);
  });
});

describe("T18 test_kv_connector_handles_preemption (mapped onto destinations)", () => {
  // vLLM: B 2, 7 blocks (6 usable), prefix caching on, a mock connector that matches 2 external
  // tokens of two 5-token prompts, max_tokens 4. Mapping: the external KV becomes a P/D handoff on a
  // decode rank (reserve + activate, transferring the whole 5-token prompt), so each request
  // computes 1 token in its first pass instead of 3. Everything after that is the same: 1 token
  // each, then r0's 4th block forces the preemption of r1, r0 finishes and frees all 6 blocks, and
  // r1 comes back as a resumed request with a local hit of 4 tokens because its 3rd block, freed
  // first (tail first), was the first evicted. Without a connector on re-admission it computes
  // 7 - 4 = 3 tokens (vLLM's connector adds 2 external tokens there and computes 1).
  it("preempts r1, then re-admits it with a 4-token local hit as a resumed request", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 2, num_gpu_blocks: 7 } });
    for (const [h, base] of [
      ["h0", 0],
      ["h1", 100],
    ] as const) {
      const out = expectOk(rank.submit({ type: "reserve_destination", handoffId: h, request: request(`r${h[1]}`, rangePrompt(base, 5), 4) }));
      // T = 5 (no Mamba-type state): cdiv(5, 2) = 3 blocks missing = 6 tokens.
      expect(reservedFacts(out.effects.lifecycle).map((f) => f.missing)).toEqual([{ unit: "token", units: 6 }]);
    }
    expect(rank.metrics().pagesFree).toBe(0);
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h0" }));
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h1" }));
    // computed = min(T, N - 1) = 4: each computes token 4 (its block exists) and samples.
    const s1 = rank.step(0)!;
    expect(scheduledOf(s1)).toEqual({ r0: 1, r1: 1 });
    const s2 = rank.step(s1.endMs)!;
    expect(scheduledOf(s2)).toEqual({ r0: 1, r1: 1 }); // token 5: cdiv(6, 2) = 3 blocks, none new
    const s3 = rank.step(s2.endMs)!;
    // token 6 needs a 4th block for r0: r1 is preempted.
    expect(s3.effects.preemptions).toEqual([{ requestId: "r1" }]);
    expect(rank.load()).toEqual({ running: 1, waiting: 1 });
    const s4 = rank.step(s3.endMs)!;
    // r0 samples its 4th token and finishes; r1 (4 hit + 2 new = 4 pages > 2 free) waited.
    expect(s4.effects.finished).toEqual([{ requestId: "r0" }]);
    expect([s4.effects.metrics.pagesUsed, s4.effects.metrics.pagesFree]).toEqual([0, 6]);
    const s5 = rank.step(s4.endMs)!;
    expect(s5.effects.admissions).toEqual([{ requestId: "r1", reusedTokens: 4, resumed: true }]);
    expect(scheduledOf(s5)).toEqual({ r1: 3 });
    expect(s5.effects.tokens).toEqual([{ requestId: "r1", index: 2, atMs: s5.endMs }]);
  });
});

describe("T20 test_kv_connector_unable_to_allocate (mapped onto destinations)", () => {
  // vLLM: B 4, 10 blocks (9 usable), two 24-token requests with 8 external tokens: one is admitted,
  // the other waits without preemption and runs after the first finishes; at the end 9 are free.
  // Mapping: each external load is a destination reservation of cdiv(24, 4) = 6 blocks; the second
  // cannot get 6 of the 3 left, so it waits in the pending FIFO (no preemption) until the first
  // finishes and frees its blocks.
  it("the second reservation waits without preemption and is reserved when the first finishes", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 10 } });
    const a = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h0", request: request("r0", rangePrompt(0, 24), 2) }));
    expect(reservedFacts(a.effects.lifecycle).map((f) => f.missing)).toEqual([{ unit: "token", units: 24 }]);
    const b = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h1", request: request("r1", rangePrompt(1000, 24), 2) }));
    expect(b.result).toBe("accepted");
    expect(reservedFacts(b.effects.lifecycle)).toEqual([]);
    expect(rank.load()).toEqual({ running: 0, waiting: 2 });
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h0" }));
    const s1 = rank.step(0)!;
    expect(scheduledOf(s1)).toEqual({ r0: 1 });
    // Pass 2: r0's token 24 takes a 7th block (cdiv(25, 4)), r0 finishes, frees 7 pages, and the
    // pending head is reserved at the end of the same pass.
    const s2 = rank.step(s1.endMs)!;
    expect(s2.effects.finished).toEqual([{ requestId: "r0" }]);
    expect(reservedFacts(s2.effects.lifecycle).map((f) => [f.handoffId, f.missing])).toEqual([["h1", { unit: "token", units: 24 }]]);
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h1" }));
    const rest = runToIdle(rank, s2.endMs);
    const all = [s1, s2, ...rest];
    expect(all.every((p) => p.effects.preemptions.length === 0)).toBe(true);
    expect(rest.flatMap((p) => p.effects.finished)).toEqual([{ requestId: "r1" }]);
    expect([rank.metrics().pagesUsed, rank.metrics().pagesFree]).toEqual([0, 9]);
    expect(rank.isDrained()).toBe(true);
  });
});

describe("T21 remote-prefill lifecycle (mapped onto reserve and activate)", () => {
  // vLLM: a 40-token prompt (2.5 blocks of 16) waits for remote KV holding 3 fresh unhashed blocks;
  // after the receive it is scheduled with num_computed 39 and 1 token, exactly 2 blocks hashed.
  it("a 40-token destination holds 3 unhashed blocks, then computes 1 token with 2 blocks cached", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 16, num_gpu_blocks: 100 }, collectKvEvents: true });
    const prompt = rangePrompt(0, 40);
    const r = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("r", prompt, 3) }));
    // cdiv(40, 16) = 3 blocks missing = 48 tokens; nothing is hashed yet.
    expect(reservedFacts(r.effects.lifecycle).map((f) => [f.missing, f.hitTokens])).toEqual([[{ unit: "token", units: 48 }, 0]]);
    expect(r.effects.kvEvents).toEqual([]);
    expect(r.effects.metrics.pagesUsed).toBe(3);
    // test_no_spurious_prefix_caching: blocks still being received serve no hit.
    expect(rank.peekPrefixHitTokens(prompt)).toBe(0);
    // Step "1" and "2" of vLLM: nothing to schedule while the transfer runs.
    expect(rank.step(0)).toBeUndefined();
    const act = expectOk(rank.submit({ type: "activate_destination", handoffId: "h" }));
    // The received blocks become cache-visible: the 2 full blocks (40 / 16 = 2) are stored.
    const stored = act.effects.kvEvents.flatMap((e) => (e.type === "stored" ? e.blocks : []));
    expect(stored).toHaveLength(2);
    // A hit stays below the whole prompt: at most 39 tokens, whole blocks: 32.
    expect(rank.peekPrefixHitTokens(prompt)).toBe(32);
    const s = rank.step(1)!;
    expect(scheduledOf(s)).toEqual({ r: 1 }); // num_computed 39, 1 token
    expect(s.effects.metrics.pagesUsed).toBe(3); // the 40th token has its slot: no new block
    expect(s.effects.kvEvents).toEqual([]); // no third block is full yet
    expect(s.effects.tokens).toEqual([{ requestId: "r", index: 0, atMs: s.endMs }]);
  });

  it("a 32-token destination holds 2 blocks and computes its last token without a new block", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 16, num_gpu_blocks: 100 } });
    const r = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("r", rangePrompt(0, 32), 3) }));
    expect(reservedFacts(r.effects.lifecycle).map((f) => f.missing)).toEqual([{ unit: "token", units: 32 }]);
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h" }));
    const s = rank.step(0)!;
    expect(scheduledOf(s)).toEqual({ r: 1 }); // computed 31
    expect(s.effects.metrics.pagesUsed).toBe(2); // cdiv(32, 16) = 2: the recomputed token has its slot
    // The next token (index 32) needs a third block.
    const s2 = rank.step(s.endMs)!;
    expect(scheduledOf(s2)).toEqual({ r: 1 });
    expect(s2.effects.metrics.pagesUsed).toBe(3);
  });
});
