import { describe, expect, it } from "vitest";
import { acceptanceRateFor, fitAcceptance, tokensPerStep } from "./acceptance.js";
import { parseMeasured } from "./measured.js";

describe("the acceptance rate from tokens per step", () => {
  it("tokens per step is 1 + p + ... + p^k", () => {
    // k = 3, p = 0.5: 1 + 0.5 + 0.25 + 0.125 = 1.875.
    expect(tokensPerStep(0.5, 3)).toBe(1.875);
    expect(tokensPerStep(0, 3)).toBe(1);
    expect(tokensPerStep(1, 3)).toBe(4);
  });

  it("inverts it, clamping outside [1, k + 1]", () => {
    expect(acceptanceRateFor(1.875, 3)).toBeCloseTo(0.5, 12);
    // k = 1: m = 1 + p, so 1.8 gives 0.8.
    expect(acceptanceRateFor(1.8, 1)).toBeCloseTo(0.8, 12);
    expect(acceptanceRateFor(0.9, 3)).toBe(0);
    expect(acceptanceRateFor(5, 3)).toBe(1);
  });

  it("reads a vllm bench file's chunks: tokens after the first over gaps", () => {
    // Two requests: 9 tokens in 1 + 4 chunks (8 tokens over 4 gaps) and 4 tokens in 1 + 2 chunks
    // (3 over 2): 11 / 6 = 1.8333 tokens per step; with k = 1 that is p = 0.8333.
    const text = JSON.stringify({
      duration: 1,
      input_lens: [10, 10],
      output_lens: [9, 4],
      ttfts: [0.1, 0.1],
      itls: [
        [0.01, 0.01, 0.01, 0.01],
        [0.01, 0.01],
      ],
      errors: ["", ""],
      start_times: [0, 0.5],
    });
    const fit = fitAcceptance(parseMeasured(text, "bench.json"), 1)!;
    expect([fit.tokens, fit.chunks]).toEqual([11, 6]);
    expect(fit.meanAcceptanceLength).toBeCloseTo(11 / 6, 12);
    expect(fit.acceptanceRate).toBeCloseTo(5 / 6, 12);
  });

  it("has nothing to say about a run without per-chunk gaps (kvsim records)", () => {
    const line = JSON.stringify({ request_id: "a", status: "completed", arrival_ms: 5, ttft_ms: 30, e2e_ms: 130, input_tokens: 10, output_tokens: 3 });
    const run = parseMeasured(line, "sim.jsonl");
    expect(run.format).toBe("kvsim-requests");
    expect(fitAcceptance(run, 3)).toBeUndefined();
  });
});
