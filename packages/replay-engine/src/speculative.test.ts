import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import { byLength, linearProfile, traceSpec } from "./test-fixtures.js";

const ok = (r: ReplayResult): Extract<ReplayResult, { ok: true }> => {
  if (!r.ok) throw new Error(r.reason);
  return r;
};

// 16 pages of 4 tokens, 4 sequences, a 64-token budget; fixed 10 ms prefill / 2 ms decode.
const engine = { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 };
const base = { profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 } };

describe("replay with speculative decoding", () => {
  it("a client sees several tokens per step: TPOT spreads the time over the tokens, ITL is between chunks", async () => {
    // ngram, k = 3, every draft accepted, a free lookup. One request of 4 + 9 tokens:
    //   pass 1 at 0: prefill 10 + decode 2 -> token 0 at 12;
    //   pass 2 at 12: verifies 1 + 3, all accepted -> tokens 1..4 at 14;
    //   pass 3 at 14: tokens 5..8 at 16.
    // TPOT (16 - 12) / 8 = 0.5 ms; ITL: two chunks after the first, 2 ms each.
    const speculative_config = { method: "ngram", num_speculative_tokens: 3, acceptance_rate: 1, ngram_cpu_us_per_row: 0 };
    const result = ok(await runReplay({ spec: traceSpec({ ...base, engine: { ...engine, speculative_config } }), records: [byLength(1, 0, 4, 9)] }));
    const r = result.records[0]!;
    expect([r.status, r.first_token_ms, r.last_token_ms, r.output_tokens, r.tpot_ms]).toEqual(["completed", 12, 16, 9, 0.5]);
    const rep = result.report;
    expect([rep.mean_tpot_ms, rep.mean_itl_ms, rep.p99_itl_ms]).toEqual([0.5, 2, 2]);
    // Two verifying rows, 3 drafts each, all accepted: mean acceptance length 1 + 6 / 2 = 4.
    expect(rep.speculative_decoding).toEqual({
      method: "ngram",
      num_speculative_tokens: 3,
      num_drafts: 2,
      num_draft_tokens: 6,
      num_accepted_tokens: 6,
      mean_acceptance_length: 4,
      draft_acceptance_rate: 1,
      acceptance_per_position: [1, 1, 1],
    });
  });

  it("off by default: no section, and acceptance 0 with a free drafter gives the run without speculation", async () => {
    const records = [byLength(1, 0, 4, 6), byLength(2, 3, 8, 4)];
    const off = ok(await runReplay({ spec: traceSpec({ ...base, engine }), records }));
    expect(off.report.speculative_decoding).toBeUndefined();
    const zero = { method: "ngram", num_speculative_tokens: 2, acceptance_rate: 0, ngram_cpu_us_per_row: 0 };
    const on = ok(await runReplay({ spec: traceSpec({ ...base, engine: { ...engine, speculative_config: zero } }), records }));
    // The fixed model prices a verification like a decode step: the same latencies and digest.
    expect(on.report.digest).toBe(off.report.digest);
    expect(on.report.speculative_decoding).toMatchObject({ num_accepted_tokens: 0, mean_acceptance_length: 1, acceptance_per_position: [0, 0] });
  });

  it("P/D: the decode rank speculates, the prefill rank does not", async () => {
    // The pdSpec of replay.test.ts with ngram k = 2, all accepted, free lookups; 4 + 7 tokens.
    // Prefill: one 10 ms pass, source held at 10; transfer 4 x 10^6 B / 10^9 B/s = 4 ms -> 14.
    // Decode: the one-token row 14 -> 16 emits token 0 (no drafts yet); then 1 + 2 per step:
    // tokens 1..3 at 18, 4..6 at 20. The prefill rank verified nothing: 2 drafts of 2 tokens.
    const speculative_config = { method: "ngram", num_speculative_tokens: 2, acceptance_rate: 1, ngram_cpu_us_per_row: 0 };
    const spec = traceSpec({
      ...base,
      profile: linearProfile(1_000_000),
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      engine: { ...engine, speculative_config },
      kv_transfer: { bandwidth_gbps: 1, mode: "full_prompt" },
    });
    const result = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 7)] }));
    const r = result.records[0]!;
    expect([r.status, r.first_token_ms, r.last_token_ms, r.output_tokens]).toEqual(["completed", 16, 20, 7]);
    expect(result.report.speculative_decoding).toMatchObject({ num_drafts: 2, num_draft_tokens: 4, num_accepted_tokens: 4, mean_acceptance_length: 3 });
  });
});
