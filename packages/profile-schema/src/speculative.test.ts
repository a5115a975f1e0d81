import { describe, expect, it } from "vitest";
import { EngineOverridesSchema } from "./engine.js";
import { acceptanceByPosition, expectedTokensPerStep, SpeculativeConfigSchema } from "./speculative.js";

/** The issues of a refused config as "path: message". */
function problems(input: unknown): string[] {
  const r = SpeculativeConfigSchema.safeParse(input);
  if (r.success) return [];
  return r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

describe("speculative_config", () => {
  it("accepts vLLM's shape with a constant or a per-position acceptance", () => {
    expect(problems({ method: "mtp", num_speculative_tokens: 1, acceptance_rate: 0.8 })).toEqual([]);
    expect(problems({ method: "eagle3", num_speculative_tokens: 3, acceptance_per_position: [0.8, 0.6, 0.4], seed: 7 })).toEqual([]);
    expect(problems({ method: "draft_model", num_speculative_tokens: 4, acceptance_rate: 0.7, draft_cost_fraction: 0.1 })).toEqual([]);
    expect(problems({ method: "ngram", num_speculative_tokens: 5, acceptance_rate: 0.3, ngram_cpu_us_per_row: 25 })).toEqual([]);
  });

  it("refuses with the field and the reason", () => {
    expect(problems({ method: "medusa", num_speculative_tokens: 1, acceptance_rate: 0.5 })[0]).toMatch(/^method: /);
    expect(problems({ method: "mtp", num_speculative_tokens: 0, acceptance_rate: 0.5 })).toEqual(["num_speculative_tokens: must be at least 1"]);
    expect(problems({ method: "mtp", num_speculative_tokens: 2 })).toEqual([
      "acceptance_rate: is required: give acceptance_rate (one probability for every position) or acceptance_per_position",
    ]);
    expect(problems({ method: "mtp", num_speculative_tokens: 2, acceptance_rate: 0.5, acceptance_per_position: [0.5, 0.2] })).toEqual([
      "acceptance_per_position: give acceptance_rate or acceptance_per_position, not both",
    ]);
    expect(problems({ method: "mtp", num_speculative_tokens: 3, acceptance_per_position: [0.5, 0.2] })).toEqual([
      "acceptance_per_position: must list one probability per draft position: 3 (num_speculative_tokens), got 2",
    ]);
    expect(problems({ method: "mtp", num_speculative_tokens: 2, acceptance_per_position: [0.5, 0.6] })).toEqual([
      "acceptance_per_position.1: must not exceed the position before it (0.5): a draft is accepted only when every draft before it is, so the per-position rates never rise",
    ]);
    expect(problems({ method: "mtp", num_speculative_tokens: 1, acceptance_rate: 1.5 })).toEqual(["acceptance_rate: must be from 0 to 1"]);
    expect(problems({ method: "draft_model", num_speculative_tokens: 1, acceptance_rate: 0.5 })[0]).toMatch(
      /^draft_cost_fraction: is required for method draft_model/,
    );
    expect(problems({ method: "ngram", num_speculative_tokens: 1, acceptance_rate: 0.5, draft_layers: 1 })).toEqual([
      "draft_layers: applies to mtp, eagle and eagle3 only, not ngram",
    ]);
    expect(problems({ method: "mtp", num_speculative_tokens: 1, acceptance_rate: 0.5, ngram_cpu_us_per_row: 1 })).toEqual([
      "ngram_cpu_us_per_row: applies to method ngram only, not mtp",
    ]);
    expect(problems({ method: "mtp", num_speculative_tokens: 1, acceptance_rate: 0.5, extra: 1 })[0]).toMatch(/extra/);
  });

  it("is an engine key, so a role may override it", () => {
    const r = EngineOverridesSchema.safeParse({ speculative_config: { method: "mtp", num_speculative_tokens: 2, acceptance_rate: 0.9 } });
    expect(r.success).toBe(true);
  });

  it("turns per-position rates into conditional probabilities, and gives the closed form", () => {
    // a = [0.8, 0.4, 0.1]: p = [0.8, 0.4 / 0.8, 0.1 / 0.4] = [0.8, 0.5, 0.25].
    const p = acceptanceByPosition({ method: "mtp", num_speculative_tokens: 3, acceptance_per_position: [0.8, 0.4, 0.1] });
    expect(p).toEqual([0.8, 0.5, 0.25]);
    // 1 + 0.8 + 0.8 x 0.5 + 0.8 x 0.5 x 0.25 = 1 + 0.8 + 0.4 + 0.1 = 2.3 (1 + Σ a_i).
    expect(expectedTokensPerStep(p)).toBeCloseTo(2.3, 12);
    // After a 0 every later position is 0.
    expect(acceptanceByPosition({ method: "mtp", num_speculative_tokens: 2, acceptance_per_position: [0, 0] })).toEqual([0, 0]);
    // A constant rate: 1 + 0.5 + 0.25 = 1.75.
    expect(expectedTokensPerStep(acceptanceByPosition({ method: "ngram", num_speculative_tokens: 2, acceptance_rate: 0.5 }))).toBe(1.75);
  });
});
