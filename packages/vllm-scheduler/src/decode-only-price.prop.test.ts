import { engineSettings, validateProfile, type Timing } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createTimingModel, type StepBatch } from "./timing-model.js";

/** The decode fast path prices a decode-only step with `decodeOnlyMs`: it must be the number `step` gives. */
const profile = validateProfile({ schema_version: 1, model: "t/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 });

const timingArb: fc.Arbitrary<Timing> = fc.oneof(
  fc.record({
    type: fc.constant("fixed" as const),
    prefill_ms: fc.double({ min: 0, max: 10, noNaN: true }),
    decode_ms: fc.double({ min: 0, max: 10, noNaN: true }),
  }),
  fc.constant({ type: "polynomial" as const }),
  fc.record({
    type: fc.constant("linear" as const),
    step_ms: fc.double({ min: 0, max: 5, noNaN: true }),
    per_sequence_ms: fc.double({ min: 0, max: 1, noNaN: true }),
    per_kv_token_us: fc.double({ min: 0, max: 50, noNaN: true }),
    per_prompt_token_us: fc.double({ min: 0, max: 50, noNaN: true }),
    per_cached_token_us: fc.double({ min: 0, max: 5, noNaN: true }),
    prompt_step_ms: fc.double({ min: 0, max: 3, noNaN: true }),
  }),
);

describe("decodeOnlyMs = step's price of a decode-only batch", () => {
  it("fixed, polynomial and linear (with and without capture sizes)", () => {
    fc.assert(
      fc.property(
        timingArb,
        fc.option(
          fc.constantFrom([1, 2, 4, 8], [16]).map((sizes) => [...sizes]),
          { nil: undefined },
        ),
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 5_000_000 }),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        (timing, captureSizes, rows, kvTokens, t) => {
          const engine = engineSettings({
            num_gpu_blocks: 4096,
            block_size: 16,
            ...(captureSizes === undefined ? {} : { cudagraph_capture_sizes: captureSizes }),
          });
          const model = createTimingModel(timing, profile, engine);
          const batch: StepBatch = {
            prefill: { count: 0, sumIsl: 0, sumPrefix: 0 },
            decode: { count: rows, sumSequenceTokens: kvTokens },
            promptRows: 0,
            promptTokens: 0,
            promptContextTokens: 0,
            decodeRows: rows,
            decodeKvTokens: kvTokens,
          };
          const price = model.step(batch);
          expect(model.decodeOnlyMs).toBeDefined();
          // The step's end as the step path computes it, and as the fast path does.
          expect(t + model.decodeOnlyMs!(rows, kvTokens)).toBe(t + price.prefillMs + price.decodeMs);
        },
      ),
    );
  });
});
