import type { Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import type { LifecycleFact, StepResult } from "./contract.js";
import { RankConfigError } from "./rank-config.js";
import { expectOk, glmProfile, linearProfile, makeRank, rangePrompt, request, runToIdle, scheduledOf } from "./test-helpers.js";

const reservedIds = (facts: readonly LifecycleFact[]) => facts.flatMap((f) => (f.type === "destination_reserved" ? [f.handoffId] : []));

describe("construction", () => {
  it("refuses with every problem at once", () => {
    // An old grouped profile without P/D markers, on vLLM 0.30.0, with profile timing but no tables.
    const old: Profile = {
      schema_version: 1,
      model: "test/old",
      vllm_version: "0.30.0",
      tensor_parallel_size: 1,
      page_size_bytes: 1024,
      kv_cache_groups: [{ name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: 16 }],
    };
    let error: unknown;
    try {
      makeRank({
        role: "prefill",
        profile: old,
        engine: { block_size: 16 },
        timing: { type: "profile", outside_grid: "refuse" },
        kvTransfer: { mode: "full_prompt", bandwidthGbps: 0 },
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RankConfigError);
    const problems = (error as RankConfigError).problems;
    expect(problems.map((p) => [p.role, p.path])).toEqual([
      ["prefill", "vllm_version"],
      ["prefill", "kv_cache_groups[0].prefix_cacheable"],
      ["prefill", "kv_cache_groups[0].transfer_bytes_per_block"],
      ["prefill", "profile.forward_pass"],
      ["prefill", "engine.block_size"],
      ["prefill", "kv_transfer.bandwidth_gbps"],
    ]);
    expect((error as RankConfigError).message).toContain("the prefill rank configuration is refused (6 problems)");
    expect((error as RankConfigError).message).toContain("engine.block_size: applies to linear profiles only");
    // The same profile serves an aggregated rank: the P/D gate does not apply there.
    expect(makeRank({ role: "aggregated", profile: old }).isDrained()).toBe(true);
  });

  it("needs the forward_pass table of each phase the role prices", () => {
    const onlyPrefill = linearProfile({
      forward_pass: { provenance: "test", prefill: [{ batch_size: 1, new_tokens: 0, cached_tokens: 0, latency_ms: 1 }], decode: [] },
    });
    const timing = { type: "profile", outside_grid: "refuse" } as const;
    expect(makeRank({ role: "prefill", profile: onlyPrefill, timing }).role).toBe("prefill");
    expect(() => makeRank({ role: "decode", profile: onlyPrefill, timing })).toThrow(
      "profile.forward_pass.decode: must list measured points: a decode rank prices decode work from it",
    );
    expect(() => makeRank({ role: "aggregated", profile: onlyPrefill, timing })).toThrow("profile.forward_pass.decode");
  });

  it("refuses a token budget below the Mamba-type block when chunks align to it", () => {
    // GLM on 0.31.0 has no checkpoint blocks, so with prefix caching its prefill chunks end on
    // 2,176-token boundaries: a 2,048-token budget could never schedule a chunk.
    expect(() => makeRank({ profile: glmProfile("0.31.0"), engine: { num_gpu_blocks: 32, max_num_batched_tokens: 2048 } })).toThrow(
      "engine.max_num_batched_tokens: 2048 is below the Mamba-type block of 2176 tokens",
    );
    // Without prefix caching (vLLM's "none" mode) there is no alignment.
    expect(makeRank({ profile: glmProfile("0.31.0"), engine: { num_gpu_blocks: 32, max_num_batched_tokens: 2048, enable_prefix_caching: false } }).role).toBe(
      "aggregated",
    );
  });
});

describe("rejections of prompts that can never be served", () => {
  it("rejects a prompt that reaches max_model_len, or needs more pages than the pool, or the budget without chunking", () => {
    // 5 pages = 4 usable of 16 tokens: 64 tokens fit (4 blocks), 65 need cdiv(65, 16) = 5.
    const rank = makeRank({ engine: { block_size: 16, num_gpu_blocks: 5, max_model_len: 100 } });
    const outcomes = [
      rank.submit({ type: "submit", request: request("long", rangePrompt(0, 100), 1) }),
      rank.submit({ type: "submit", request: request("big", rangePrompt(0, 65), 1) }),
      rank.submit({ type: "submit", request: request("fits", rangePrompt(0, 64), 1) }),
    ].map(expectOk);
    expect(outcomes.map((o) => o.effects.rejections)).toEqual([
      [{ requestId: "long", reason: "prompt of 100 tokens reaches max_model_len 100" }],
      [{ requestId: "big", reason: "prompt of 65 tokens needs at least 5 pages across its cache groups, more than the 4 usable pages of the pool" }],
      [],
    ]);
    expect(rank.load()).toEqual({ running: 0, waiting: 1 });
    const noChunks = makeRank({ engine: { max_num_batched_tokens: 32, enable_chunked_prefill: false } });
    expect(expectOk(noChunks.submit({ type: "submit", request: request("r", rangePrompt(0, 33), 1) })).effects.rejections).toEqual([
      { requestId: "r", reason: "prompt of 33 tokens exceeds max_num_batched_tokens 32 with chunked prefill off" },
    ]);
  });

  it("counts vLLM 0.32.0's checkpoint blocks in the admission threshold only with prefix caching on", () => {
    // GLM-5.3-Flash (B = 2,176 in every group), aggregated, N = 8,192 in one chunk (budget 8,192):
    // full attention cdiv(8192, 2176) = 4 blocks (3 x 2,176 = 6,528 < 8,192 <= 8,704), the ring 1,
    // the four KDA groups 1 running block each: 4 + 1 + 4 = 9 pages. With prefix caching on, 0.32.0
    // adds prefill_checkpoint_blocks = 1 per KDA group: 9 + 4 = 13. Without caching the pool takes
    // no checkpoint (vLLM's "none" mode). Two output tokens end at 8,194 <= 8,704: still 4 blocks.
    const outcome = (version: "0.31.0" | "0.32.0", caching: boolean, numGpuBlocks: number) => {
      const rank = makeRank({ profile: glmProfile(version), engine: { num_gpu_blocks: numGpuBlocks, enable_prefix_caching: caching } });
      const rejected = expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 8192), 2) })).effects.rejections;
      if (rejected.length > 0) return rejected.map((x) => x.reason);
      return runToIdle(rank).flatMap((p) => [...p.effects.finished.map((f) => `${f.requestId} finished`), ...p.effects.rejections.map((x) => x.reason)]);
    };
    const needs = (pages: number, usable: number) => [
      `prompt of 8192 tokens needs at least ${pages} pages across its cache groups, more than the ${usable} usable pages of the pool`,
    ];
    // Caching off: 10 pages (9 usable, page 0 is null) run it on both versions; 9 pages (8 usable) cannot.
    expect(outcome("0.32.0", false, 10)).toEqual(["r finished"]);
    expect(outcome("0.32.0", false, 9)).toEqual(needs(9, 8));
    expect(outcome("0.31.0", false, 10)).toEqual(["r finished"]);
    // Caching on, 0.32.0: 14 pages (13 usable) run it; 13 pages (12 usable) cannot.
    expect(outcome("0.32.0", true, 14)).toEqual(["r finished"]);
    expect(outcome("0.32.0", true, 13)).toEqual(needs(13, 12));
  });

  it("rejects a request whose prompt and output exceed max_model_len before it runs, as vLLM's server does", () => {
    // max_model_len 100: 99 + 1 = 100 fits exactly; 99 + 2 = 101 and 60 + 41 = 101 do not.
    const rank = makeRank({ engine: { block_size: 16, num_gpu_blocks: 64, max_model_len: 100 } });
    const outcomes = [
      rank.submit({ type: "submit", request: request("fits", rangePrompt(0, 99), 1) }),
      rank.submit({ type: "submit", request: request("over", rangePrompt(0, 99), 2) }),
      rank.submit({ type: "submit", request: request("long-output", rangePrompt(0, 60), 41) }),
    ].map(expectOk);
    expect(outcomes.map((o) => o.effects.rejections)).toEqual([
      [],
      [{ requestId: "over", reason: "prompt of 99 tokens + 2 output tokens = 101 exceeds max_model_len 100" }],
      [{ requestId: "long-output", reason: "prompt of 60 tokens + 41 output tokens = 101 exceeds max_model_len 100" }],
    ]);
    expect(rank.load()).toEqual({ running: 0, waiting: 1 });
  });

  it("rejects a request whose sequence outgrows the whole pool instead of recomputing forever", () => {
    // 4 usable pages of 16 tokens, no caching: a 60-token prompt with 20 outputs. Pass 1 computes
    // the prompt (4 blocks); passes 2-5 compute tokens 60-63 (cdiv(64, 16) = 4 blocks); pass 6
    // needs a 5th block for token 64 with nothing else on the rank: it can never finish.
    const rank = makeRank({ engine: { block_size: 16, num_gpu_blocks: 5, enable_prefix_caching: false } });
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 60), 20) }));
    const passes = runToIdle(rank);
    expect(passes.map((p) => p.scheduledTokens)).toEqual([60, 1, 1, 1, 1, 0]);
    expect(passes[5]!.durationMs).toBe(0);
    expect(passes[5]!.effects.preemptions).toEqual([]);
    expect(passes[5]!.effects.rejections).toEqual([
      { requestId: "r", reason: "its sequence of 65 tokens outgrew the pool: 64 computed + 1 new do not fit even in the empty pool of 4 usable pages" },
    ]);
    expect(rank.isDrained()).toBe(true);
    expect(rank.metrics().pagesUsed).toBe(0);
  });

  it("rejects a waiting request whose first chunk cannot fit even in the empty pool", () => {
    // Full attention and a 4-token sliding window, both with 4-token blocks; 7 usable pages. A
    // 20-token prompt passes the submit check (5 full-attention blocks + cdiv(20, 4) -
    // floor((20 - 4 + 1) / 4) = 1 window block = 6 pages), but its one-chunk prefill holds every
    // window block of its own step: 5 + 5 = 10 pages. vLLM would wait forever; the rank rejects it.
    const profile: Profile = {
      schema_version: 1,
      model: "test/swa",
      vllm_version: "0.31.0",
      tensor_parallel_size: 1,
      page_size_bytes: 100,
      kv_cache_groups: [
        { name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: 4 },
        { name: "swa", kind: "sliding_window", num_layers: 1, block_size_tokens: 4, window_tokens: 4 },
      ],
    };
    const rank = makeRank({ profile, engine: { num_gpu_blocks: 8 } });
    expect(expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 20), 1) })).effects.rejections).toEqual([]);
    const pass = rank.step(0)!;
    expect(pass.effects.rejections).toEqual([{ requestId: "r", reason: "its 20-token chunk does not fit even in the empty pool of 7 usable pages" }]);
    expect(rank.isDrained()).toBe(true);
    // With an 8-token budget the same prompt prefills in chunks that fit (window blocks trimmed between chunks).
    const chunked = makeRank({ profile, engine: { num_gpu_blocks: 8, max_num_batched_tokens: 8 } });
    expectOk(chunked.submit({ type: "submit", request: request("r", rangePrompt(0, 20), 1) }));
    expect(runToIdle(chunked).flatMap((p) => p.effects.finished)).toEqual([{ requestId: "r" }]);
  });

  it("rejects a preempted request that no longer fits one pass with chunked prefill off", () => {
    // Chunked prefill off, budget 16, 5 usable pages of 4 tokens, no caching. Pass 1 admits r1 (2
    // tokens, 1 block) and r0 (14 tokens, 4 blocks): the pool is full. Passes 2 and 3 need no new
    // block. Pass 4: r1's token 4 needs a 2nd block; r0 (the tail) is preempted with 17 tokens.
    // Pass 5: r0 would recompute 17 > 16 tokens in one pass: it can never be scheduled.
    const rank = makeRank({
      engine: { block_size: 4, num_gpu_blocks: 6, max_num_batched_tokens: 16, enable_chunked_prefill: false, enable_prefix_caching: false },
    });
    expectOk(rank.submit({ type: "submit", request: request("r1", rangePrompt(100, 2), 10) }));
    expectOk(rank.submit({ type: "submit", request: request("r0", rangePrompt(0, 14), 6) }));
    const passes = [0, 1, 2, 3, 4].reduce<StepResult[]>((acc) => [...acc, rank.step(acc.at(-1)?.endMs ?? 0)!], []);
    expect(passes.map((p) => scheduledOf(p))).toEqual([{ r1: 2, r0: 14 }, { r1: 1, r0: 1 }, { r1: 1, r0: 1 }, { r1: 1 }, { r1: 1 }]);
    expect(passes[3]!.effects.preemptions).toEqual([{ requestId: "r0" }]);
    expect(passes[4]!.effects.rejections).toEqual([
      { requestId: "r0", reason: "needs 17 tokens in one pass with chunked prefill off, more than max_num_batched_tokens 16" },
    ]);
  });

  it("a destination that can never be reserved is rejected at the command", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 3 } });
    // 9 tokens need cdiv(9, 4) = 3 blocks; 2 are usable.
    const out = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("r", rangePrompt(0, 9), 1) }));
    expect(out.effects.rejections).toEqual([
      { requestId: "r", reason: "prompt of 9 tokens needs at least 3 pages across its cache groups, more than the 2 usable pages of the pool" },
    ]);
    expect(rank.isDrained()).toBe(true);
    // Cleanup of the rejected handoff is harmless; activating it is refused; its id stays used.
    expect(expectOk(rank.submit({ type: "cancel_destination", handoffId: "h" })).result).toBe("noop");
    expect(rank.submit({ type: "activate_destination", handoffId: "h" })).toEqual({ ok: false, reason: 'destination handoff "h" was rejected' });
    expect(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("r", rangePrompt(0, 4), 1) })).toEqual({
      ok: false,
      reason: 'handoff "h" was already used on this rank',
    });
  });
});

describe("command validation", () => {
  it("a refused command says why and changes nothing", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 10 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("r", rangePrompt(0, 24), 1) }));
    const before = rank.metrics();
    expect(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("q", rangePrompt(0, 4), 1) })).toEqual({
      ok: false,
      reason: 'handoff "h" was already used on this rank',
    });
    expect(rank.submit({ type: "reserve_destination", handoffId: "h2", request: request("r", rangePrompt(0, 4), 1) })).toEqual({
      ok: false,
      reason: 'request "r" is already on this rank',
    });
    expect(rank.submit({ type: "submit", request: request("e", rangePrompt(0, 0), 1) })).toEqual({
      ok: false,
      reason: 'request "e": a prompt needs at least one token',
    });
    expect(rank.submit({ type: "submit", request: request("m", rangePrompt(0, 4), -1) })).toEqual({
      ok: false,
      reason: 'request "m": maxOutputTokens must be an integer >= 0, got -1',
    });
    expect(rank.submit({ type: "activate_destination", handoffId: "nope" })).toEqual({ ok: false, reason: 'unknown destination handoff "nope"' });
    expect(rank.metrics()).toEqual(before);
  });

  it("activation waits for the reservation, repeats are no-ops, activation after a cancel is refused", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 10 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h0", request: request("r0", rangePrompt(0, 24), 1) }));
    // 6 of 9 pages reserved; h1 (6 more) stays pending.
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h1", request: request("r1", rangePrompt(100, 24), 1) }));
    expect(rank.submit({ type: "activate_destination", handoffId: "h1" })).toEqual({
      ok: false,
      reason: 'destination handoff "h1" is not reserved yet: wait for destination_reserved',
    });
    expect(expectOk(rank.submit({ type: "activate_destination", handoffId: "h0" })).result).toBe("applied");
    expect(expectOk(rank.submit({ type: "activate_destination", handoffId: "h0" })).result).toBe("noop");
    expect(expectOk(rank.submit({ type: "cancel_destination", handoffId: "h1" })).result).toBe("applied");
    expect(expectOk(rank.submit({ type: "cancel_destination", handoffId: "h1" })).result).toBe("noop");
    expect(rank.submit({ type: "activate_destination", handoffId: "h1" })).toEqual({ ok: false, reason: 'destination handoff "h1" was cancelled' });
  });
});

describe("destination FIFO", () => {
  it("a pending head blocks fresh admissions; cancelling a reservation reserves the next head at once", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 10 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h0", request: request("r0", rangePrompt(0, 24), 1) }));
    const pending = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h1", request: request("r1", rangePrompt(100, 24), 1) }));
    expect(reservedIds(pending.effects.lifecycle)).toEqual([]);
    // A 4-token request would fit in the 3 free pages, but the pending head blocks it.
    expectOk(rank.submit({ type: "submit", request: request("q", rangePrompt(500, 4), 1) }));
    expect(rank.hasWork()).toBe(true);
    expect(rank.step(0)).toBeUndefined();
    // Cancelling the reserved h0 frees 6 pages: h1 is reserved in the same command's effects.
    const cancel = expectOk(rank.submit({ type: "cancel_destination", handoffId: "h0" }));
    expect(reservedIds(cancel.effects.lifecycle)).toEqual(["h1"]);
    const pass = rank.step(0)!;
    expect(scheduledOf(pass)).toEqual({ q: 4 });
  });

  it("cancelling a pending destination behind the head removes it; cancel_request drops an activated one", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 10 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h0", request: request("r0", rangePrompt(0, 24), 2) }));
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h1", request: request("r1", rangePrompt(100, 24), 2) }));
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h2", request: request("r2", rangePrompt(200, 4), 2) }));
    expect(expectOk(rank.submit({ type: "cancel_destination", handoffId: "h1" })).effects.lifecycle.map((f) => f.handoffId)).toEqual(["h2"]);
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h0" }));
    expect(rank.load()).toEqual({ running: 0, waiting: 2 });
    expect(expectOk(rank.submit({ type: "cancel_request", requestId: "r0" })).result).toBe("applied");
    expect(expectOk(rank.submit({ type: "cancel_request", requestId: "r0" })).result).toBe("noop");
    expect(expectOk(rank.submit({ type: "cancel_destination", handoffId: "h0" })).result).toBe("noop");
    // Only h2's reservation (cdiv(4, 4) = 1 page) is left.
    expect([rank.metrics().pagesUsed, rank.load().waiting]).toEqual([1, 1]);
  });
});

describe("source holds", () => {
  const prefillRank = () => makeRank({ role: "prefill", engine: { block_size: 4, num_gpu_blocks: 32 } });

  it("cancel_source while pending drops the request; while held frees the hold", () => {
    const rank = prefillRank();
    expectOk(rank.submit({ type: "submit_handoff_prefill", handoffId: "a", request: request("ra", rangePrompt(0, 8), 1) }));
    expect(expectOk(rank.submit({ type: "cancel_source", handoffId: "a" })).result).toBe("applied");
    expect(rank.step(0)).toBeUndefined();
    expect(rank.isDrained()).toBe(true);
    expectOk(rank.submit({ type: "submit_handoff_prefill", handoffId: "b", request: request("rb", rangePrompt(0, 8), 1) }));
    const pass = rank.step(0)!;
    // A linear model keeps the whole prompt: 8 tokens, cdiv(8, 4) = 2 blocks held, nothing released.
    expect(pass.effects.lifecycle).toMatchObject([
      { type: "source_held", handoffId: "b", heldPages: 2, releasedPages: 0, terms: { unit: "token", promptUnits: 8 } },
    ]);
    expect(expectOk(rank.submit({ type: "cancel_source", handoffId: "b" })).effects.metrics.pagesUsed).toBe(0);
    expect(expectOk(rank.submit({ type: "release_source", handoffId: "b" })).result).toBe("noop");
  });

  it("release_source before completion unregisters the hold: the request frees its blocks when it finishes", () => {
    const rank = prefillRank();
    expectOk(rank.submit({ type: "submit_handoff_prefill", handoffId: "a", request: request("r", rangePrompt(0, 8), 1) }));
    expect(expectOk(rank.submit({ type: "release_source", handoffId: "a" })).result).toBe("applied");
    const pass = rank.step(0)!;
    expect(pass.effects.lifecycle).toEqual([]);
    expect(pass.effects.finished).toEqual([{ requestId: "r" }]);
    expect(pass.effects.metrics.pagesUsed).toBe(0);
    expect(rank.isDrained()).toBe(true);
  });
});

describe("no admission in a step that preempted", () => {
  it("holds back even an activated destination that needs no new block", () => {
    // Decode rank, B 2, 8 pages (7 usable). d0 and d1: 5-token prompts, cdiv(5, 2) = 3 blocks each;
    // d2: a 2-token prompt, 1 block. All 7 pages are taken.
    const rank = makeRank({ role: "decode", engine: { block_size: 2, num_gpu_blocks: 8 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h0", request: request("d0", rangePrompt(0, 5), 4) }));
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h1", request: request("d1", rangePrompt(100, 5), 4) }));
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h2", request: request("d2", rangePrompt(200, 2), 1) }));
    expect(rank.metrics().pagesFree).toBe(0);
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h0" }));
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h1" }));
    const s1 = rank.step(0)!; // tokens 4 of d0 and d1 (computed 4 of 5)
    const s2 = rank.step(s1.endMs)!; // tokens 5: cdiv(6, 2) = 3 blocks, none new
    expect([scheduledOf(s1), scheduledOf(s2)]).toEqual([
      { d0: 1, d1: 1 },
      { d0: 1, d1: 1 },
    ]);
    // d2 is activated now: computed min(2, 1) = 1; its one token has a slot in its block.
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h2" }));
    // Step 3: d0's token 6 needs a 4th block: d1 (the tail) is preempted; d2 waits for the next step.
    const s3 = rank.step(s2.endMs)!;
    expect(s3.effects.preemptions).toEqual([{ requestId: "d1" }]);
    expect(scheduledOf(s3)).toEqual({ d0: 1 });
    const s4 = rank.step(s3.endMs)!;
    expect(s4.effects.admissions).toEqual([{ requestId: "d2", reusedTokens: 0, resumed: false }]);
    expect(scheduledOf(s4)).toEqual({ d0: 1, d2: 1 });
  });
});
