import { engineSettings } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { createTimingModel, paddedBatchSize, polynomialDecodeMs, type StepBatch } from "./timing-model.js";
import { expectOk, linearProfile, makeRank, rangePrompt, request, runToIdle } from "./test-helpers.js";

// Edges of the timing models. Values by hand beside each.

const STEP: StepBatch = {
  prefill: { count: 1, sumIsl: 100, sumPrefix: 0 },
  decode: { count: 2, sumSequenceTokens: 300 },
  promptRows: 1,
  promptTokens: 100,
  promptContextTokens: 0,
  decodeRows: 2,
  decodeKvTokens: 300,
};

describe("timing edges", () => {
  it("fixed and polynomial timing never report a clamped query", () => {
    expect(createTimingModel({ type: "fixed", prefill_ms: 10, decode_ms: 2 }, linearProfile(), engineSettings()).step(STEP)).toEqual({
      prefillMs: 10,
      decodeMs: 2,
      clamped: 0,
    });
    expect(createTimingModel({ type: "polynomial" }, linearProfile(), engineSettings()).step(STEP).clamped).toBe(0);
  });

  it("a decode-only step of no rows costs nothing (fixed and linear)", () => {
    const model = createTimingModel({ type: "fixed", prefill_ms: 10, decode_ms: 2 }, linearProfile(), engineSettings());
    expect([model.decodeOnlyMs?.(0, 0), model.decodeOnlyMs?.(3, 300)]).toEqual([0, 2]);
    // Linear: no rows, no step (not step_ms 1); 3 rows over 300 KV tokens: 1 + 0.5 x 3 + 10 x 300 / 1000 = 5.5.
    const linearModel = createTimingModel(
      { type: "linear", step_ms: 1, per_sequence_ms: 0.5, per_kv_token_us: 10, prompt_step_ms: 0, per_prompt_token_us: 0, per_cached_token_us: 0 },
      linearProfile(),
      engineSettings(),
    );
    expect([linearModel.decodeOnlyMs?.(0, 0), linearModel.decodeOnlyMs?.(3, 300)]).toEqual([0, 5.5]);
  });

  it("the decode polynomial with no KV capacity and no active tokens takes p = 1", () => {
    // p = 1: -25.74 + 54.01 + 5.74 = 34.01 (0 / 0 would be NaN).
    expect(polynomialDecodeMs(0, 0)).toBe(34.01);
  });

  it("no sequences pad to no sequences", () => {
    expect(paddedBatchSize(0, [1, 2, 4])).toBe(0);
    // 3 pads to the next capture size, 4; 5 is above the largest and runs eagerly as 5.
    expect([paddedBatchSize(3, [1, 2, 4]), paddedBatchSize(5, [1, 2, 4])]).toEqual([4, 5]);
  });

  it("a decode rank with profile timing needs no prefill table", () => {
    // Decode points: batch_size {1, 2} x kv_tokens {100}: a complete 2 x 1 grid.
    const profile = linearProfile({
      forward_pass: {
        provenance: "test",
        prefill: [],
        decode: [
          { batch_size: 1, kv_tokens: 100, latency_ms: 2 },
          { batch_size: 2, kv_tokens: 100, latency_ms: 3 },
        ],
      },
    });
    expect(makeRank({ role: "decode", profile, timing: { type: "profile", outside_grid: "clamp" } }).isDrained()).toBe(true);
  });
});

describe("prompt rows and decode rows", () => {
  it("a 1-token prompt is a prompt row; its next 1-token step is a decode row", () => {
    // Linear timing: step_ms 1, prompt_step_ms 5, per_prompt_token_us 1000, every other term 0.
    const rank = makeRank({
      timing: { type: "linear", step_ms: 1, per_sequence_ms: 0, per_kv_token_us: 0, prompt_step_ms: 5, per_prompt_token_us: 1000, per_cached_token_us: 0 },
    });
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 1), 2) }));
    const passes = runToIdle(rank);
    // Pass 1: the prompt's 1 token, a prompt row: 1 + (5 + 1000 x 1 / 1000) = 7 ms.
    // Pass 2: token 1 after output 0, a decode row: 1 ms.
    expect(passes.map((p) => p.durationMs)).toEqual([7, 1]);
  });
});

describe("KV events", () => {
  it("are not collected unless asked for", () => {
    const rank = makeRank({ engine: { block_size: 4 } });
    // 8 tokens fill 2 blocks, which a collecting rank would report as stored.
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 8), 1) }));
    expect(runToIdle(rank).flatMap((p) => p.effects.kvEvents)).toEqual([]);
    const collecting = makeRank({ engine: { block_size: 4 }, collectKvEvents: true });
    expectOk(collecting.submit({ type: "submit", request: request("r", rangePrompt(0, 8), 1) }));
    expect(runToIdle(collecting).flatMap((p) => p.effects.kvEvents.map((e) => e.type))).toContain("stored");
  });
});
