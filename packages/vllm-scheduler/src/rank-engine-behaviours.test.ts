import type { Profile, Timing } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import type { StepResult } from "./contract.js";
import { expectOk, makeRank, rangePrompt, request, runToIdle, scheduledOf } from "./test-helpers.js";

/** [start, end, scheduled tokens per request] of every pass. */
const shape = (passes: readonly StepResult[]) => passes.map((p) => [p.startMs, p.endMs, scheduledOf(p)]);
const tokenTimes = (passes: readonly StepResult[]) => passes.flatMap((p) => p.effects.tokens.map((t) => `${t.requestId}#${t.index}@${t.atMs}`));

describe("linear timing through a rank", () => {
  // step_ms 100, 10 ms per sequence, 1 ms per decode KV token, 2 ms per prompt token, 0.5 ms per
  // context token of a prompt row, 1,000 ms per step with prompt work: every term is visible.
  const timing: Timing = {
    type: "linear",
    step_ms: 100,
    per_sequence_ms: 10,
    per_kv_token_us: 1000,
    per_prompt_token_us: 2000,
    per_cached_token_us: 500,
    prompt_step_ms: 1000,
  };

  it("prices prompt rows and decode rows of each step", () => {
    const rank = makeRank({ timing, engine: { max_num_batched_tokens: 6 } });
    expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 10), 2) }));
    const p1 = rank.step(0)!;
    // Chunk 1: 6 tokens, no context. Prompt terms 1000 + 2 x 6 = 1012; the rest 100 + 10 x 1 = 110.
    expect([p1.prefillMs, p1.decodeMs, p1.endMs]).toEqual([1012, 110, 1122]);
    const p2 = rank.step(p1.endMs)!;
    // Chunk 2: 4 tokens after 6 held: 1000 + 2 x 4 + 0.5 x 6 = 1011; 110; it samples token 0.
    expect([p2.prefillMs, p2.decodeMs, p2.endMs]).toEqual([1011, 110, 1122 + 1121]);
    expectOk(rank.submit({ type: "submit", request: request("b", rangePrompt(100, 3), 1) }));
    const p3 = rank.step(p2.endMs)!;
    // a decodes 1 token of an 11-token sequence (a decode row attending 11 tokens); b's 3-token
    // prompt is a prompt row: prompt terms 1000 + 2 x 3 = 1006; the rest 100 + 10 x 2 + 1 x 11 = 131.
    expect(scheduledOf(p3)).toEqual({ a: 1, b: 3 });
    expect([p3.prefillMs, p3.decodeMs, p3.durationMs]).toEqual([1006, 131, 1137]);
  });

  it("pads a decode-only step's sequences up to the next cudagraph capture size", () => {
    const perSequence: Timing = {
      type: "linear",
      step_ms: 0,
      per_sequence_ms: 1,
      per_kv_token_us: 0,
      per_prompt_token_us: 0,
      per_cached_token_us: 0,
      prompt_step_ms: 0,
    };
    const rank = makeRank({ timing: perSequence, engine: { cudagraph_capture_sizes: [1, 4] } });
    for (const id of ["a", "b"]) expectOk(rank.submit({ type: "submit", request: request(id, rangePrompt(id === "a" ? 0 : 100, 4), 2) }));
    const [prefill, decode] = runToIdle(rank, 0);
    // The prompt step is not padded: 2 sequences x 1 ms. The decode-only step of 2 rows runs the
    // 4-row graph: 4 x 1 ms.
    expect([prefill!.durationMs, decode!.durationMs]).toEqual([2, 4]);
  });
});

describe("scheduler_reserve_full_isl", () => {
  // 6 pages (5 usable) of 16 tokens, prefix caching off, a 64-token budget and a 32-token cap per
  // request per step: two 64-token prompts (4 pages each) cannot both be held.
  const engine = { num_gpu_blocks: 6, max_num_batched_tokens: 64, long_prefill_token_threshold: 32, enable_prefix_caching: false };
  const submitBoth = (rank: ReturnType<typeof makeRank>) => {
    expectOk(rank.submit({ type: "submit", request: request("r1", rangePrompt(0, 64), 2) }));
    expectOk(rank.submit({ type: "submit", request: request("r2", rangePrompt(1000, 64), 2) }));
  };

  it("off: the second prompt's first chunk is admitted and then preempted", () => {
    const rank = makeRank({ engine });
    submitBoth(rank);
    const passes = runToIdle(rank, 0);
    // 0: r1 32 (2 pages, 3 free), r2 32 (2 pages, 1 free); 10 ms of prefill.
    // 10: r1 needs 2 more pages, 1 free: the tail r2 is preempted (3 free), r1 gets 2 (1 free) and
    //     reaches its end: 10 + 2 = 22. No admission in a step that preempted.
    // 22: r1 decodes (65 tokens need a 5th page, 0 free): 2 ms; it finishes and frees 5 pages.
    // 24: r2 again from the start, 32 tokens; 34: its last 32 and token 0 (46); 46: token 1 (48).
    expect(shape(passes)).toEqual([
      [0, 10, { r1: 32, r2: 32 }],
      [10, 22, { r1: 32 }],
      [22, 24, { r1: 1 }],
      [24, 34, { r2: 32 }],
      [34, 46, { r2: 32 }],
      [46, 48, { r2: 1 }],
    ]);
    expect(passes.flatMap((p) => p.effects.preemptions)).toEqual([{ requestId: "r2" }]);
  });

  it("on: the second prompt waits until its whole sequence fits, and nothing is preempted", () => {
    const rank = makeRank({ engine: { ...engine, scheduler_reserve_full_isl: true } });
    submitBoth(rank);
    const passes = runToIdle(rank, 0);
    // 0: r1's whole 64 tokens need 4 pages, 5 free: admitted with 32 (3 free); r2 needs 4 > 3: waits.
    // 10: r1's last 32 (1 free), token 0 at 22; r2 needs 4 > 1. 22: r1 decodes (0 free), finishes.
    // 24: r2 needs 4 <= 5 free: admitted; then as before.
    expect(shape(passes)).toEqual([
      [0, 10, { r1: 32 }],
      [10, 22, { r1: 32 }],
      [22, 24, { r1: 1 }],
      [24, 34, { r2: 32 }],
      [34, 46, { r2: 32 }],
      [46, 48, { r2: 1 }],
    ]);
    expect(passes.flatMap((p) => p.effects.preemptions)).toEqual([]);
  });

  it("skips the gate on an idle rank with an empty pool, where a window group could never hold the whole prompt", () => {
    // One sliding-window group (window 32, blocks of 16) and 4 usable pages: a 96-token prompt
    // needs 6 pages at once but never more than 4 while its 32-token chunks advance (blocks below
    // the window are freed). Gated, it would wait forever; alone on the rank it is admitted.
    const profile: Profile = {
      schema_version: 1,
      model: "test/window",
      vllm_version: "0.32.0",
      tensor_parallel_size: 1,
      page_size_bytes: 1024,
      kv_cache_groups: [{ name: "swa", kind: "sliding_window", num_layers: 1, block_size_tokens: 16, window_tokens: 32 }],
    };
    const rank = makeRank({
      profile,
      engine: { num_gpu_blocks: 5, max_num_batched_tokens: 32, enable_prefix_caching: false, scheduler_reserve_full_isl: true },
    });
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 96), 1) }));
    // Three 32-token chunks: 0 -> 10, 10 -> 20, and the last samples: 20 -> 32.
    expect(shape(runToIdle(rank, 0))).toEqual([
      [0, 10, { r: 32 }],
      [10, 20, { r: 32 }],
      [20, 32, { r: 32 }],
    ]);
  });
});

describe("async_scheduling", () => {
  const asyncEngine = { async_scheduling: true };

  it("a lone request: two steps are planned at once from idle, and its tokens come when they would synchronously", () => {
    const rank = makeRank({ engine: asyncEngine });
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 32), 3) }));
    const passes = runToIdle(rank, 0);
    // Call at 0 plans S1 (the prompt, 10 + 2 ms) and S2 (its token 1, 2 ms) and runs S1: 0 -> 12.
    // At 12 S2 runs (12 -> 14) while S3 (token 2) is planned; at 14 S3 runs (14 -> 16) and nothing
    // more can be planned (r's last token is in flight); at 16 r is freed and the rank is idle.
    expect(shape(passes)).toEqual([
      [0, 12, { r: 32 }],
      [12, 14, { r: 1 }],
      [14, 16, { r: 1 }],
    ]);
    expect(tokenTimes(passes)).toEqual(["r#0@12", "r#1@14", "r#2@16"]);
    expect(passes[2]!.effects.finished).toEqual([{ requestId: "r" }]);
    expect(rank.isDrained()).toBe(true);
    expect(rank.metrics().pagesUsed).toBe(0);
  });

  it("a request that arrives during a step is scheduled at the next boundary into the step after the one that starts there", () => {
    const run = (engine: object) => {
      const rank = makeRank({ engine });
      expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 32), 4) }));
      const passes = [rank.step(0)!];
      // b arrives at 5, while the first step runs.
      expectOk(rank.submit({ type: "submit", request: request("b", rangePrompt(100, 16), 1) }));
      passes.push(...runToIdle(rank, passes[0]!.endMs));
      return passes;
    };
    const sync = run({});
    // Synchronous: 0 -> 12 a's prompt; at 12 a's token 1 and b's prompt (10 + 2): 12 -> 24; then a.
    expect(shape(sync)).toEqual([
      [0, 12, { a: 32 }],
      [12, 24, { a: 1, b: 16 }],
      [24, 26, { a: 1 }],
      [26, 28, { a: 1 }],
    ]);
    expect(tokenTimes(sync)).toEqual(["a#0@12", "a#1@24", "b#0@24", "a#2@26", "a#3@28"]);
    const pipelined = run(asyncEngine);
    // Async: at 0, S1 (a's prompt) and S2 (a's token 1) are planned; S1 runs 0 -> 12. At 12 S2 runs
    // (12 -> 14) and S3 is planned with b admitted: a's token 2 and b's prompt, 12 ms: 14 -> 26.
    // At 14, S4 is planned (a's last token; b's only token is in flight): 26 -> 28.
    expect(shape(pipelined)).toEqual([
      [0, 12, { a: 32 }],
      [12, 14, { a: 1 }],
      [14, 26, { a: 1, b: 16 }],
      [26, 28, { a: 1 }],
    ]);
    expect(tokenTimes(pipelined)).toEqual(["a#0@12", "a#1@14", "a#2@26", "b#0@26", "a#3@28"]);
    // b's admission (vLLM's scheduled_ts) is stamped at 12, one step before its prompt runs.
    expect(pipelined[1]!.effects.admissions).toEqual([{ requestId: "b", reusedTokens: 0, resumed: false }]);
    expect(pipelined.map((p) => p.effects.finished.map((f) => f.requestId))).toEqual([[], [], ["b"], ["a"]]);
  });

  it("blocks of a finished request are seen one step later", () => {
    // 7 pages (6 usable) of 16 tokens, caching off: r1 (48 tokens, 3 pages, one output) and r3 (16
    // tokens, 10 outputs) fill the pool so that r2 (48 tokens) must wait for r1's pages.
    const run = (engine: object) => {
      const rank = makeRank({ engine: { num_gpu_blocks: 7, enable_prefix_caching: false, ...engine } });
      expectOk(rank.submit({ type: "submit", request: request("r1", rangePrompt(0, 48), 1) }));
      expectOk(rank.submit({ type: "submit", request: request("r3", rangePrompt(500, 16), 3) }));
      expectOk(rank.submit({ type: "submit", request: request("r2", rangePrompt(1000, 48), 1) }));
      return runToIdle(rank, 0);
    };
    // Synchronous: 0: r1 (3 pages) and r3 (1) admitted, r2 needs 3 > 2 free; r1 finishes at 12 and
    // frees 3. 12: r3's token 1 (a second page, 4 free) and r2 (3 pages): 12 -> 24.
    expect(shape(run({})).slice(0, 2)).toEqual([
      [0, 12, { r1: 48, r3: 16 }],
      [12, 24, { r3: 1, r2: 48 }],
    ]);
    // Async: S2 is planned at 0 while r1 still holds its pages: r3's token 1 only (1 free). r1 is
    // freed at 12, when S3 is planned with r2: S2 runs 12 -> 14, S3 14 -> 26.
    expect(shape(run(asyncEngine)).slice(0, 3)).toEqual([
      [0, 12, { r1: 48, r3: 16 }],
      [12, 14, { r3: 1 }],
      [14, 26, { r3: 1, r2: 48 }],
    ]);
  });

  it("keeps counting a request whose last token is in flight as running", () => {
    const rank = makeRank({ engine: { ...asyncEngine, max_num_seqs: 1 } });
    expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(0, 16), 1) }));
    expectOk(rank.submit({ type: "submit", request: request("b", rangePrompt(100, 16), 1) }));
    const passes = runToIdle(rank, 0);
    // a's only token is sampled in S1; S2 is planned at 0 but a still takes the one running slot,
    // so S2 is empty. At 12 a is freed and b is planned and run at once: 12 -> 24.
    expect(shape(passes)).toEqual([
      [0, 12, { a: 16 }],
      [12, 24, { b: 16 }],
    ]);
    expect(rank.load()).toEqual({ running: 0, waiting: 0 });
  });

  it("is refused on a P/D rank", () => {
    expect(() => makeRank({ role: "decode", engine: asyncEngine })).toThrow(
      "engine.async_scheduling: is modelled on aggregated ranks only; this is a decode rank",
    );
  });
});
