import { describe, expect, it } from "vitest";
import { compareRuns, percentile, type MeasuredRequest, type MeasuredRun } from "./index.js";

const req = (id: string, arrivalMs: number, ttftMs: number, e2eMs: number, outputTokens: number): MeasuredRequest => ({
  line: 1,
  requestId: id,
  arrivalMs,
  inputTokens: 10,
  outputTokens,
  ttftMs,
  e2eMs,
  tpotMs: outputTokens >= 2 ? (e2eMs - ttftMs) / (outputTokens - 1) : null,
});
const run = (requests: MeasuredRequest[], file = "m"): MeasuredRun => ({ format: "vllm-requests", file, requests, skipped: 0, lacks: [] });

describe("percentile", () => {
  it("interpolates linearly between closest ranks, as numpy does", () => {
    // [1, 2, 3, 4]: p50 at position 1.5 -> 2.5; p90 at 2.7 -> 3.7; p0 -> 1, p100 -> 4.
    expect(percentile([4, 1, 3, 2], 50)).toBeCloseTo(2.5, 12);
    expect(percentile([4, 1, 3, 2], 90)).toBeCloseTo(3.7, 12);
    expect(percentile([4, 1, 3, 2], 0)).toBe(1);
    expect(percentile([4, 1, 3, 2], 100)).toBe(4);
    expect(percentile([], 50)).toBeNull();
  });
});

describe("compareRuns", () => {
  // Measured: a (TTFT 100, E2E 300, 5 tokens -> TPOT 50), b (TTFT 200, E2E 600, 3 tokens -> TPOT 200).
  // Simulated: a (TTFT 110, E2E 310, 5 tokens -> TPOT 50), b (TTFT 180, E2E 580, 3 tokens -> TPOT 200).
  const m = run([req("a", 0, 100, 300, 5), req("b", 1000, 200, 600, 3)]);
  const s = run([req("b", 1000, 180, 580, 3), req("a", 0, 110, 310, 5)], "s");

  it("gives each statistic on both sides with its signed error", () => {
    const c = compareRuns(m, s);
    const ttftMean = c.latency.find((l) => l.metric === "ttft" && l.stat === "mean")!;
    // Measured mean (100 + 200) / 2 = 150; simulated (110 + 180) / 2 = 145: -5 ms, -5/150 = -3.33%.
    expect(ttftMean.measured).toBe(150);
    expect(ttftMean.simulated).toBe(145);
    expect(ttftMean.difference).toBe(-5);
    expect(ttftMean.error).toBeCloseTo(-5 / 150, 12);
    // Median of two values is their midpoint: measured E2E (300 + 600) / 2 = 450, simulated (310 + 580) / 2 = 445.
    const e2eMedian = c.latency.find((l) => l.metric === "e2e" && l.stat === "median")!;
    expect([e2eMedian.measured, e2eMedian.simulated]).toEqual([450, 445]);
    // Mean ITL over every gap: measured (200 + 400) / (4 + 2) = 100; simulated (200 + 400) / 6 = 100.
    const itlMean = c.latency.find((l) => l.metric === "itl" && l.stat === "mean")!;
    expect([itlMean.measured, itlMean.simulated, itlMean.error]).toEqual([100, 100, 0]);
    // Without per-token times, ITL percentiles are absent on both sides.
    expect(c.latency.find((l) => l.metric === "itl" && l.stat === "p90")!.measured).toBeNull();
    // Throughput: measured 2 requests from 0 to 1,600 ms -> 1.25 req/s, 8 tokens -> 5 tok/s;
    // simulated 0 to 1,580 ms -> 2000 / 1580 req/s.
    expect(c.throughput[0]!.measured).toBeCloseTo(1.25, 12);
    expect(c.throughput[1]!.measured).toBeCloseTo(5, 12);
    expect(c.throughput[0]!.simulated).toBeCloseTo(2000 / 1580, 12);
    expect(c.throughput[0]!.error).toBeCloseTo(2000 / 1580 / 1.25 - 1, 12);
  });

  it("restricts to the held-out part by position or by arrival time, and names missing requests", () => {
    const byIndex = compareRuns(m, s, { kind: "from_request", index: 1 });
    expect([byIndex.selected, byIndex.matched]).toEqual([1, 1]);
    // Only b: TTFT 200 vs 180 -> -10%.
    expect(byIndex.latency.find((l) => l.metric === "ttft" && l.stat === "p99")!.error).toBeCloseTo(-0.1, 12);
    const byTime = compareRuns(m, s, { kind: "after_ms", ms: 500 });
    expect(byTime.matched).toBe(1);
    const lost = compareRuns(m, run([req("a", 0, 110, 310, 5)], "s"));
    expect([lost.matched, lost.missingCount, lost.missing]).toEqual([1, 1, ["b"]]);
    expect(lost.notes.some((n) => n.includes("did not complete"))).toBe(true);
  });

  it("uses per-token gaps for ITL percentiles when both sides have them", () => {
    const withGaps = (r: MeasuredRequest, itlsMs: number[]): MeasuredRequest => ({ ...r, itlsMs });
    const mm = run([withGaps(req("a", 0, 100, 160, 3), [20, 40])]);
    const ss = run([withGaps(req("a", 0, 100, 160, 3), [30, 30])]);
    const c = compareRuns(mm, ss);
    // Measured gaps [20, 40]: p90 at position 0.9 -> 38; simulated [30, 30] -> 30.
    const p90 = c.latency.find((l) => l.metric === "itl" && l.stat === "p90")!;
    expect(p90.measured).toBeCloseTo(38, 12);
    expect(p90.simulated).toBe(30);
  });
});
