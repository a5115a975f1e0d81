import { describe, expect, it } from "vitest";
import type { EngineOverrides, SpeculativeConfig } from "@kvsim/profile-schema";
import type { StepResult } from "./contract.js";
import { Speculation } from "./speculative.js";
import { expectOk, makeRank, rangePrompt, request, runToIdle, scheduledOf } from "./test-helpers.js";

const spec = (c: Partial<SpeculativeConfig>): SpeculativeConfig => ({ method: "ngram", num_speculative_tokens: 3, ...c });

/** One request of `prompt` tokens and `outputs` outputs, run alone to the end. */
function runOne(engine: EngineOverrides, prompt: number, outputs: number): StepResult[] {
  const rank = makeRank({ engine: { block_size: 16, ...engine } });
  expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(1, prompt), outputs) }));
  return runToIdle(rank);
}

const tokensPerPass = (passes: readonly StepResult[]) => passes.map((p) => p.effects.tokens.length);

describe("speculative decoding: steps", () => {
  it("k = 3, acceptance 1: a 100-token output takes 25 decode steps after its first token", () => {
    const passes = runOne({ speculative_config: spec({ acceptance_rate: 1 }) }, 16, 100);
    // The prefill pass samples token 0; 99 remain at 1 + 3 per step: 24 steps give 96, the 25th
    // the last 3 (it verifies 4, the output is cut at max_tokens).
    expect(passes.length).toBe(1 + 25);
    expect(tokensPerPass(passes)).toEqual([1, ...Array<number>(24).fill(4), 3]);
    // Every decode step verifies 1 + 3 tokens.
    expect(passes.slice(1).map((p) => p.scheduledTokens)).toEqual(Array<number>(25).fill(4));
    const indices = passes.flatMap((p) => p.effects.tokens.map((t) => t.index));
    expect(indices).toEqual(Array.from({ length: 100 }, (_, i) => i));
    // The tokens of one step arrive together, at its end.
    for (const p of passes) for (const t of p.effects.tokens) expect(t.atMs).toBe(p.endMs);
  });

  it("k = 3, acceptance 0: 99 decode steps, each verifying 4 tokens and emitting 1", () => {
    const passes = runOne({ speculative_config: spec({ acceptance_rate: 0 }) }, 16, 100);
    expect(passes.length).toBe(1 + 99);
    expect(tokensPerPass(passes)).toEqual(Array<number>(100).fill(1));
    expect(passes.slice(1).every((p) => p.scheduledTokens === 4)).toBe(true);
  });

  it("without speculation the same request takes 99 one-token decode steps", () => {
    const passes = runOne({}, 16, 100);
    expect(passes.length).toBe(100);
    expect(passes.slice(1).every((p) => p.scheduledTokens === 1)).toBe(true);
  });

  it("drafts count against the token budget and are cut to fit it", () => {
    const rank = makeRank({ engine: { block_size: 16, max_num_batched_tokens: 6, speculative_config: spec({ acceptance_rate: 1 }) } });
    expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(1, 4), 50) }));
    expectOk(rank.submit({ type: "submit", request: request("b", rangePrompt(100, 4), 50) }));
    const p1 = rank.step(0)!;
    // Budget 6: a's prompt (4), then a 2-token chunk of b's.
    expect(scheduledOf(p1)).toEqual({ a: 4, b: 2 });
    const p2 = rank.step(p1.endMs)!;
    // a verifies 1 + 3 = 4; b finishes its prompt with the last 2 of the budget.
    expect(scheduledOf(p2)).toEqual({ a: 4, b: 2 });
    expect(p2.effects.tokens.map((t) => t.requestId)).toEqual(["a", "a", "a", "a", "b"]);
    const p3 = rank.step(p2.endMs)!;
    // a takes 4 again; b's 1 + 3 is cut to the 2 left: its token and 1 draft.
    expect(scheduledOf(p3)).toEqual({ a: 4, b: 2 });
    expect(p3.scheduledTokens).toBe(6);
    // Acceptance 1: a emits 4, b its accepted draft and the bonus token, 2.
    expect(p3.effects.tokens.filter((t) => t.requestId === "a")).toHaveLength(4);
    expect(p3.effects.tokens.filter((t) => t.requestId === "b")).toHaveLength(2);
    expect(rank.speculationStats()).toMatchObject({ verifiedRows: 3, draftedTokens: 3 + 3 + 1, acceptedTokens: 7 });
  });

  it("KV slots cover the drafts, and the drafter's lookahead for EAGLE-style methods", () => {
    // Linear profile, 16-token blocks, a 12-token prompt. The prefill (a first allocation: no
    // lookahead) holds cdiv(12, 16) = 1 block. The first decode step computes token 12 and 3 drafts:
    // ngram needs slots up to 12 + 1 + 3 = 16 tokens, 1 block; mtp also holds k = 3 lookahead
    // slots, 19 tokens, 2 blocks.
    const pages = (method: "ngram" | "mtp") => {
      const c = spec({ method, acceptance_rate: 0, ...(method === "mtp" ? { draft_cost_fraction: 0.1 } : {}) });
      const rank = makeRank({ engine: { block_size: 16, speculative_config: c } });
      expectOk(rank.submit({ type: "submit", request: request("a", rangePrompt(1, 12), 10) }));
      const p1 = rank.step(0)!;
      const p2 = rank.step(p1.endMs)!;
      const p3 = rank.step(p2.endMs)!;
      const rest = runToIdle(rank, p3.endMs);
      return [p1.effects.metrics.pagesUsed, p2.effects.metrics.pagesUsed, p3.effects.metrics.pagesUsed, rest.at(-1)!.effects.metrics.pagesUsed];
    };
    // Acceptance 0: after step 2 the 3 rejected slots are given back (computed 13, not 16); step 3
    // then needs 13 + 4 = 17 tokens (ngram: 2 blocks) or 17 + 3 = 20 (mtp: 2 blocks). Freed at the end.
    expect(pages("ngram")).toEqual([1, 1, 2, 0]);
    expect(pages("mtp")).toEqual([1, 2, 2, 0]);
  });

  it("a rank without speculative_config reports no drafts; k = 1 emits up to 2 tokens per step", () => {
    const off = makeRank({ engine: { block_size: 16 } });
    expect(off.speculationStats()).toBeUndefined();
    const passes = runOne({ speculative_config: spec({ acceptance_rate: 1, num_speculative_tokens: 1 }) }, 8, 5);
    // 4 outputs after the first at 2 per step: 2 steps.
    expect(tokensPerPass(passes)).toEqual([1, 2, 2]);
  });

  it("is deterministic for a seed, and the seed changes the draws", () => {
    const run = (seed: number) => tokensPerPass(runOne({ speculative_config: spec({ acceptance_rate: 0.5, seed }) }, 16, 200));
    expect(run(7)).toEqual(run(7));
    expect(run(7)).not.toEqual(run(8));
  });
});

describe("speculative decoding: acceptance draws", () => {
  it("per-position rates give the closed form's tokens per step over many seeds", () => {
    // acceptance_per_position [0.9, 0.6, 0.3]: position i is accepted (with all before it) at
    // rate a_i, so a verifying row emits 1 + 0.9 + 0.6 + 0.3 = 2.8 tokens on average.
    const per = [0.9, 0.6, 0.3];
    let rows = 0;
    let tokens = 0;
    const at = [0, 0, 0];
    for (let seed = 0; seed < 100; seed++) {
      const s = new Speculation(spec({ acceptance_per_position: per, seed }));
      for (let r = 0; r < 20; r++) {
        for (let index = 0; index < 50; index++) {
          const a = s.accept(0x9e3779b9 ^ (r * 7919), index, 3);
          rows++;
          tokens += 1 + a;
          for (let i = 0; i < a; i++) at[i]!++;
        }
      }
    }
    // 100,000 rows; the tokens per row have variance <= 1 (Σ of three Bernoulli-like terms,
    // 0.9 x 0.1 + 0.6 x 0.4 + 0.3 x 0.7 + covariances ~ 0.84), so the mean's standard error
    // is ~ 0.003: 0.02 is more than 6 of them.
    expect(Math.abs(tokens / rows - 2.8)).toBeLessThan(0.02);
    at.forEach((n, i) => {
      expect(Math.abs(n / rows - per[i]!)).toBeLessThan(0.01);
    });
  });

  it("a constant rate p gives 1 + p + p^2 + p^3 tokens per step", () => {
    // p = 0.5: 1 + 0.5 + 0.25 + 0.125 = 1.875.
    const s = new Speculation(spec({ acceptance_rate: 0.5, seed: 3 }));
    let tokens = 0;
    const rows = 50_000;
    for (let i = 0; i < rows; i++) tokens += 1 + s.accept(i * 2654435761, i % 97, 3);
    expect(Math.abs(tokens / rows - 1.875)).toBeLessThan(0.02);
    const st = s.stats();
    expect(st.verifiedRows).toBe(rows);
    expect(st.draftedTokens).toBe(3 * rows);
    expect(st.acceptedTokens).toBe(tokens - rows);
  });
});
