import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import type { TerminalFacts } from "./metrics-collector.js";
import { SlaStopWatch, type SlaStop } from "./sla-stop.js";
import { byLength, linearProfile, traceSpec } from "./test-fixtures.js";

/** A completed request that arrived at 0 with first token at `ttft` and `tokens` tokens 10 ms apart. */
const done = (ttft: number, tokens = 2): TerminalFacts => ({
  status: "completed",
  inputTokens: 4,
  outputTokens: tokens,
  arrivalMs: 0,
  terminalMs: ttft + 10 * (tokens - 1),
  firstTokenMs: ttft,
  lastTokenMs: ttft + 10 * (tokens - 1),
  reusedTokens: 0,
  gaps: undefined,
});

describe("SlaStopWatch", () => {
  it("loses a p90 bound at the count that puts p90 over it for any final count", () => {
    // 10 requests: p90 is the value at rank round(9 x 0.9) = 8 of 0..9, over the bound once
    // 10 - 8 = 2 values are.
    const w = new SlaStopWatch({ total: 10, terms: [{ metric: "ttft", stat: 90, limit: 100 }], allComplete: false });
    w.onTerminal(done(500));
    expect(w.lost).toBeUndefined();
    w.onTerminal(done(50));
    w.onTerminal(done(101));
    expect(w.lost).toBe("p90_ttft_ms over 100: 2 of at most 10 requests are over it");
  });

  it("loses a mean bound once the latencies seen sum past bound x total", () => {
    // Mean TPOT <= 15 over 4 requests: lost past 60 ms in all. Tokens 10 ms apart: TPOT 10 each, then 50.
    const w = new SlaStopWatch({ total: 4, terms: [{ metric: "tpot", stat: "mean", limit: 15 }], allComplete: false });
    w.onTerminal(done(5, 3)); // TPOT 10
    w.onTerminal(done(5, 1)); // one token: no TPOT
    w.onTerminal({ ...done(5, 2), lastTokenMs: 55, terminalMs: 55 }); // TPOT 50: 60 in all, not past 60
    expect(w.lost).toBeUndefined();
    w.onTerminal({ ...done(5, 2), lastTokenMs: 6, terminalMs: 6 }); // TPOT 1: 61
    expect(w.lost).toBe("mean_tpot_ms over 15 whatever the other requests do");
  });

  it("loses at the first rejected request when every request must complete", () => {
    const stop: SlaStop = { total: 3, terms: [], allComplete: true };
    const w = new SlaStopWatch(stop);
    w.onTerminal({ ...done(1), status: "rejected", reason: "too long" });
    expect(w.lost).toBe("a request was rejected (too long)");
    const lenient = new SlaStopWatch({ ...stop, allComplete: false });
    lenient.onTerminal({ ...done(1), status: "rejected" });
    expect(lenient.lost).toBeUndefined();
  });
});

const fixed = { type: "fixed", prefill_ms: 10, decode_ms: 2 };
const spec = traceSpec({
  profile: linearProfile(1000),
  topology: { kind: "aggregated", workers: 1 },
  engine: { num_gpu_blocks: 256, block_size: 4, max_num_seqs: 2, max_num_batched_tokens: 64 },
  timing: fixed,
});

describe("runReplay with stopWhen", () => {
  it("stops a replay whose p50 TTFT is lost, early, and says so", async () => {
    // 20 requests at once on a rank taking 2 at a time: TTFTs grow by about 14 ms a pair.
    const records = Array.from({ length: 20 }, (_, i) => byLength(i + 1, 0, 8, 2));
    const r = await runReplay({ spec, records, stopWhen: { total: 20, terms: [{ metric: "ttft", stat: 50, limit: 30 }], allComplete: true } });
    expect(r.ok).toBe(false);
    const failed = r as Extract<ReplayResult, { ok: false }>;
    expect(failed.stopped).toBe(true);
    expect(failed.reason).toMatch(/^stopped at \d+ ms after \d+ requests: the SLA is lost: p50_ttft_ms over 30: 10 of at most 20 requests are over it$/);
  });

  it("changes nothing when the SLA holds: the same report as without it (fixed seed)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.nat(200), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 6 })), { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 400 }),
        async (reqs, limit) => {
          const records = [...reqs].sort((a, b) => a[0] - b[0]).map(([at, input, output], i) => byLength(i + 1, at, input, output));
          const plain = await runReplay({ spec, records });
          const watched = await runReplay({
            spec,
            records,
            stopWhen: { total: records.length, terms: [{ metric: "ttft", stat: 90, limit }], allComplete: true },
          });
          if (!plain.ok) return;
          if (watched.ok) expect(watched.report.digest).toBe(plain.report.digest);
          else {
            // Stopped only when the full replay does lose it.
            expect(watched.stopped).toBe(true);
            expect(plain.report.p90_ttft_ms).toBeGreaterThan(limit);
          }
        },
      ),
      { seed: 41, numRuns: 80 },
    );
  });
});
