import { describe, expect, it } from "vitest";
import type { Profile } from "@kvsim/profile-schema";
import type { StepResult } from "./contract.js";
import { expectOk, glmProfile, makeRank, rangePrompt, request, runToIdle, scheduledOf } from "./test-helpers.js";

// Admission and preemption at their exact edges. Every expected value is worked out by hand in
// the comment beside it.

const schedules = (passes: readonly StepResult[]) => passes.map(scheduledOf);

describe("long_prefill_token_threshold", () => {
  it("caps a running request's later chunks too, not only its first", () => {
    // Threshold 32 under a 256-token budget: a 100-token prompt runs 32 + 32 + 32 + 4 (uncapped
    // after admission it would run 32 + 68).
    const rank = makeRank({ engine: { block_size: 16, num_gpu_blocks: 64, max_num_batched_tokens: 256, long_prefill_token_threshold: 32 } });
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 100), 1) }));
    expect(runToIdle(rank).map((p) => p.scheduledTokens)).toEqual([32, 32, 32, 4]);
  });
});

describe("chunked prefill off", () => {
  it("a prompt of exactly max_num_batched_tokens is accepted and waits for a whole budget", () => {
    // Budget 32. a (4 tokens, 3 outputs) and b (32 tokens) are submitted; b = 32 is not more than 32,
    // so it is not refused. Pass 1: a's 4 tokens leave 28 < 32: b waits (head of line, not refused:
    // it fits a pass of its own). Passes 2 and 3: a's decode rows leave 31. Pass 4: a finished (3
    // tokens at the ends of passes 1-3), b runs alone with all 32.
    const rank = makeRank({ engine: { block_size: 16, num_gpu_blocks: 64, max_num_batched_tokens: 32, enable_chunked_prefill: false } });
    const a = expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 4), 3) }));
    const b = expectOk(rank.submit({ type: "submit", request: request("b", rangePrompt(100, 32), 1) }));
    expect([a.effects.rejections, b.effects.rejections]).toEqual([[], []]);
    const passes = runToIdle(rank);
    expect(schedules(passes)).toEqual([{ a: 4 }, { a: 1 }, { a: 1 }, { b: 32 }]);
    expect(passes.flatMap((p) => p.effects.rejections)).toEqual([]);
  });
});

describe("scheduler_reserve_full_isl with another request running", () => {
  it("admits a partial first chunk when the whole sequence fits the free pages exactly", () => {
    // B 16, 6 pages (5 usable), caching off, threshold 32. r1 (32 tokens, 1 output) takes 2 pages:
    // 3 free. r2 (48 tokens) gets a 32-token chunk (partial: 32 < 48), so the gate asks whether its
    // whole sequence fits: cdiv(48, 16) = 3 pages <= 3 free. It is admitted in the same pass.
    // Pass 2: r1 finished and freed its pages; r2 computes its last 16 tokens (3 pages).
    const rank = makeRank({
      engine: {
        block_size: 16,
        num_gpu_blocks: 6,
        max_num_batched_tokens: 64,
        long_prefill_token_threshold: 32,
        enable_prefix_caching: false,
        scheduler_reserve_full_isl: true,
      },
    });
    expectOk(rank.submit({ type: "submit", request: request("r1", rangePrompt(0, 32), 1) }));
    expectOk(rank.submit({ type: "submit", request: request("r2", rangePrompt(1000, 48), 1) }));
    const passes = runToIdle(rank);
    expect(schedules(passes)).toEqual([{ r1: 32, r2: 32 }, { r2: 16 }]);
    expect(passes.flatMap((p) => p.effects.preemptions)).toEqual([]);
  });
});

describe("an activated destination whose last token needs a new block", () => {
  it("waits for free pages, and the activated ones behind it wait with it", () => {
    // GLM-5.3-Flash 0.31.0 (B 2,176 in every group) on a decode rank, 19 pages (18 usable). A
    // destination holds T = N - 1 tokens (the Mamba-type back-off): full attention cdiv(T, 2176)
    // blocks, the ring 1, each of the 4 KDA groups 1 (its running state).
    //   b: N 2,176, T 2,175: 1 + 1 + 4 = 6 pages; its last token (index 2,175) stays in block 0.
    //   a: N 2,177, T 2,176: 6 pages; its last token (index 2,176) starts a 2nd full-attention
    //      block and a new running state in each KDA group: 1 + 4 = 5 new pages.
    //   d: N 2,176 like b: 6 pages. 18 pages reserved, none free. Activated in the order b, a, d.
    // Pass 1: b runs, samples its only output and frees its 6 pages; a needs 5 with none free: it
    // waits, and d behind it. Pass 2: a takes 5 of the 6 freed pages; d needs none.
    const rank = makeRank({ role: "decode", profile: glmProfile("0.31.0"), engine: { num_gpu_blocks: 19 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "hb", request: request("b", rangePrompt(0, 2176), 1) }));
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "ha", request: request("a", rangePrompt(100_000, 2177), 1) }));
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "hd", request: request("d", rangePrompt(200_000, 2176), 1) }));
    expect(rank.metrics().pagesFree).toBe(0);
    for (const h of ["hb", "ha", "hd"]) expectOk(rank.submit({ type: "activate_destination", handoffId: h }));
    const passes = runToIdle(rank);
    expect(schedules(passes)).toEqual([{ b: 1 }, { a: 1, d: 1 }]);
    expect(passes.flatMap((p) => p.effects.finished.map((f) => f.requestId))).toEqual(["b", "a", "d"]);
  });
});

describe("pages held for a handoff keep the pool from being empty", () => {
  it("a request alone in running that outgrows the free pages preempts itself and waits, instead of being rejected", () => {
    // Prefill rank, B 4, 4 pages (3 usable), a 4-token budget. Source a (8 tokens, linear: all kept)
    // prefills in 2 chunks and holds cdiv(8, 4) = 2 pages: 1 free.
    const rank = makeRank({ role: "prefill", engine: { block_size: 4, num_gpu_blocks: 4, max_num_batched_tokens: 4 } });
    expectOk(rank.submit({ type: "submit_handoff_prefill", handoffId: "a", request: request("ra", rangePrompt(0, 8), 1) }));
    const held = runToIdle(rank);
    expect(held.at(-1)!.effects.lifecycle).toMatchObject([{ type: "source_held", handoffId: "a", heldPages: 2 }]);
    // b: 12 tokens (3 pages at most: accepted). Pass 1: its first 4 tokens take the free page.
    expectOk(rank.submit({ type: "submit", request: request("b", rangePrompt(100, 12), 1) }));
    const s1 = rank.step(100)!;
    expect(scheduledOf(s1)).toEqual({ b: 4 });
    // Pass 2: tokens 4-7 need a second page, none is free. b is the tail of running: it preempts
    // itself. Running is empty but the pool still holds a's 2 pages, so it can fit later: requeued,
    // not rejected.
    const s2 = rank.step(s1.endMs)!;
    expect([s2.durationMs, s2.effects.preemptions, s2.effects.rejections]).toEqual([0, [{ requestId: "b" }], []]);
    // Pass 3: b's first block is cached (a 4-token hit, evictable) and its next 4 tokens need a
    // fresh page: 2 pages with 1 free. Nothing runs, but the pool is not empty: b waits.
    expect(rank.step(s2.endMs)).toBeUndefined();
    expect(rank.load()).toEqual({ running: 0, waiting: 1 });
    // Releasing a's hold frees 2 pages (3 free): b is re-admitted over its hit and finishes.
    expectOk(rank.submit({ type: "release_source", handoffId: "a" }));
    const rest = runToIdle(rank, 200);
    expect(rest[0]!.effects.admissions).toEqual([{ requestId: "b", reusedTokens: 4, resumed: true }]);
    expect(schedules(rest)).toEqual([{ b: 4 }, { b: 4 }]);
    expect(rest.flatMap((p) => p.effects.rejections)).toEqual([]);
  });
});

describe("a failed destination head is retried when a step frees pages", () => {
  it("after a preemption and a completion in the same step", () => {
    // Decode rank, linear, B 4, 4 pages (3 usable); a linear destination holds its whole prompt.
    // d1 (8 tokens: 2 blocks, 2 outputs) and d2 (4 tokens: 1 block, 10 outputs) take all 3 pages;
    // p (9 tokens: cdiv(9, 4) = 3 blocks) stays pending.
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 4 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h1", request: request("d1", rangePrompt(0, 8), 2) }));
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h2", request: request("d2", rangePrompt(100, 4), 10) }));
    const pending = expectOk(rank.submit({ type: "reserve_destination", handoffId: "hp", request: request("p", rangePrompt(200, 9), 1) }));
    expect(pending.effects.lifecycle).toEqual([]);
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h1" }));
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h2" }));
    // Pass 1: d1 token 7 (cdiv(8, 4) = 2 blocks) and d2 token 3 (1 block) need no new block; nothing
    // is freed, so p is not retried.
    const s1 = rank.step(0)!;
    expect([scheduledOf(s1), s1.effects.lifecycle]).toEqual([{ d1: 1, d2: 1 }, []]);
    // Pass 2: d1 token 8 needs a 3rd block, none free: the tail d2 is preempted (1 page back) and d1
    // takes it. d1 samples its 2nd and last output and frees its 3 pages. Pages were freed twice
    // in the step, so p is retried at its end: 3 blocks of 3 free, reserved, lacking 3 x 4 tokens.
    const s2 = rank.step(s1.endMs)!;
    expect(scheduledOf(s2)).toEqual({ d1: 1 });
    expect(s2.effects.preemptions).toEqual([{ requestId: "d2" }]);
    expect(s2.effects.finished).toEqual([{ requestId: "d1" }]);
    expect(s2.effects.lifecycle).toEqual([
      { type: "destination_reserved", handoffId: "hp", requestId: "p", missing: { unit: "token", units: 12 }, hitTokens: 0 },
    ]);
  });
});

describe("async scheduling: preempting a request whose last token is in flight", () => {
  it("frees its pages at once, and it still finishes with that token", () => {
    // Linear, B 4, 3 pages (2 usable), caching off, async scheduling. At 0 two steps are planned:
    //   S1: a (4 tokens, 3 outputs) and f (3 tokens, 1 output) prefill, 1 page each (0 free); f's
    //       only token is sampled in S1, so f stays in running as finishing.
    //   S2: a's token 4 needs cdiv(5, 4) = 2 pages, none free: the tail f is preempted (its page
    //       goes now) and a takes it. f's token is already in S1, so f finishes when S1 ends.
    // S1 runs 0 -> 12 (prefill 10 + decode 2), S2 12 -> 14 (a's token 1), S3 14 -> 16 (a's last).
    const rank = makeRank({ engine: { block_size: 4, num_gpu_blocks: 3, enable_prefix_caching: false, async_scheduling: true } });
    expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 4), 3) }));
    expectOk(rank.submit({ type: "submit", request: request("f", rangePrompt(100, 3), 1) }));
    const passes = runToIdle(rank);
    expect(passes.map((p) => [p.startMs, p.endMs, scheduledOf(p)])).toEqual([
      [0, 12, { a: 4, f: 3 }],
      [12, 14, { a: 1 }],
      [14, 16, { a: 1 }],
    ]);
    expect(passes[0]!.effects.preemptions).toEqual([{ requestId: "f" }]);
    expect(passes.map((p) => p.effects.finished.map((x) => x.requestId))).toEqual([["f"], [], ["a"]]);
    expect(passes.flatMap((p) => p.effects.tokens.map((t) => `${t.requestId}#${t.index}@${t.atMs}`))).toEqual(["a#0@12", "f#0@12", "a#1@14", "a#2@16"]);
    expect([rank.hasWork(), rank.isDrained(), rank.metrics().pagesUsed]).toEqual([false, true, 0]);
  });
});

describe("a resumed request's recompute is not cut to Mamba-type blocks", () => {
  it("after eviction took its cached state, it recomputes prompt and output in one chunk", () => {
    // One Mamba-type state group (vLLM 0.31.0 align mode), B 4, prefix caching on, 3 pages (2
    // usable), budget 8. a: prompt [0..3], 3 outputs; r: prompt [100..103], 2 outputs.
    const profile: Profile = {
      schema_version: 1,
      model: "test/mamba",
      vllm_version: "0.31.0",
      tensor_parallel_size: 1,
      page_size_bytes: 100,
      kv_cache_groups: [{ name: "mamba", kind: "state", num_layers: 1, block_size_tokens: 4, prefix_cacheable: true }],
    };
    const rank = makeRank({ profile, engine: { num_gpu_blocks: 3, max_num_batched_tokens: 8 } });
    expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 4), 3) }));
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(100, 4), 2) }));
    const passes = runToIdle(rank);
    // Pass 1: a and r each prefill 4 tokens (the last block boundary, so alignment keeps 4) into
    // one state block, cached at 4 tokens: both pages used. Each samples an output: 5 tokens each.
    // Pass 2: a's token 4 needs cdiv(5, 4) = 2 table entries, a new state block, none free: the
    // tail r is preempted (1 output, 5 tokens) and its block, the only free page, goes to a,
    // evicting r's cached state. Waiting admission is skipped after a preemption.
    // Pass 3: a's token 5 releases its previous state (cached, free); r's prefix hit is 0 (its
    // state at 4 tokens was evicted), so it recomputes all 5 tokens in one chunk: a resumed
    // request is not aligned (aligned, the chunk would stop at the boundary, 4 tokens, as its
    // prompt's first chunk would). It takes the 1 free page (needs 1: the running state) and
    // samples its 2nd and last output; a samples its 3rd and last.
    expect(schedules(passes)).toEqual([{ a: 4, r: 4 }, { a: 1 }, { a: 1, r: 5 }]);
    expect(passes[1]!.effects.preemptions).toEqual([{ requestId: "r" }]);
    expect(passes[2]!.effects.admissions).toEqual([{ requestId: "r", reusedTokens: 0, resumed: true }]);
  });
});
