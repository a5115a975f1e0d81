import { describe, expect, it } from "vitest";
import { canonicalReportJson, digestOf, MetricsCollector, withWallTime, type TerminalFacts } from "./report.js";

const done = (f: Partial<TerminalFacts>): TerminalFacts => ({
  status: "completed",
  inputTokens: 4,
  outputTokens: 2,
  arrivalMs: 0,
  terminalMs: 14,
  firstTokenMs: 12,
  lastTokenMs: 14,
  reusedTokens: 0,
  gaps: Float64Array.from([2]),
  ...f,
});

describe("MetricsCollector", () => {
  it("S1 (aisimulate-replay.md 6.2): one request 4 in / 2 out, tokens at 12 and 14", () => {
    const c = new MetricsCollector(undefined);
    c.onArrival();
    c.onTerminal(done({}));
    const r = c.report();
    // duration 14 ms = 0.014 s: 1 / 0.014 = 71.428... rps, 2 / 0.014 = 142.857... tok/s, 4 / 0.014 = 285.714...
    expect(r.num_requests).toBe(1);
    expect(r.completed_requests).toBe(1);
    expect(r.duration_ms).toBe(14);
    expect(r.request_throughput_rps).toBeCloseTo(1 / 0.014, 9);
    expect(r.output_throughput_tok_s).toBeCloseTo(2 / 0.014, 9);
    expect(r.input_throughput_tok_s).toBeCloseTo(4 / 0.014, 9);
    expect([r.mean_ttft_ms, r.p50_ttft_ms, r.p99_ttft_ms]).toEqual([12, 12, 12]);
    expect([r.mean_e2e_ms, r.p90_e2e_ms]).toEqual([14, 14]);
    // TPOT = (14 - 12) / (2 - 1) = 2; the one ITL gap is 2.
    expect([r.mean_tpot_ms, r.mean_itl_ms, r.p99_itl_ms]).toEqual([2, 2, 2]);
    expect(r.prefix_cache_reused_ratio).toBe(0);
    expect(r.in_flight_requests).toBe(0);
    expect(r.goodput_rps).toBeUndefined();
    expect(r.handoffs).toEqual({ count: 0, payload_bytes: 0, mean_delay_ms: 0 });
  });

  it("counts statuses apart; only completed requests give samples, tokens and duration; the rest are in flight", () => {
    const c = new MetricsCollector(undefined);
    for (let i = 0; i < 5; i++) c.onArrival();
    c.onTerminal(done({ inputTokens: 10, reusedTokens: 4 }));
    c.onTerminal(done({ inputTokens: 30, reusedTokens: 8, terminalMs: 20, lastTokenMs: 20, firstTokenMs: 12, gaps: Float64Array.from([8]) }));
    c.onTerminal(done({ status: "rejected", terminalMs: 99 }));
    c.onTerminal(done({ status: "failed", terminalMs: 99 }));
    const r = c.report();
    expect([r.completed_requests, r.rejected_requests, r.failed_requests, r.in_flight_requests]).toEqual([2, 1, 1, 1]);
    expect(r.total_input_tokens).toBe(40);
    expect(r.duration_ms).toBe(20);
    // (4 + 8) / (10 + 30) = 0.3
    expect(r.prefix_cache_reused_ratio).toBeCloseTo(0.3, 12);
    // E2E samples 14 and 20: mean 17; p50 = index round(0.5) = 1 -> 20.
    expect(r.mean_e2e_ms).toBe(17);
    expect(r.p50_e2e_ms).toBe(20);
    // ITL gaps 2 and 8: mean 5.
    expect(r.mean_itl_ms).toBe(5);
  });

  it("goodput: inclusive SLA bounds on TTFT and on TPOT as the average ITL", () => {
    const c = new MetricsCollector({ ttft_ms: 12, itl_ms: 2 });
    c.onTerminal(done({})); // ttft 12 <= 12, tpot 2 <= 2: good
    c.onTerminal(done({ firstTokenMs: 13, lastTokenMs: 14, terminalMs: 14 })); // ttft 13 > 12: not good
    c.onTerminal(done({ lastTokenMs: 15, terminalMs: 15 })); // tpot (15 - 12) / 1 = 3 > 2: not good
    const r = c.report();
    expect(r.goodput_requests).toBe(1);
    // 1 good request over a duration of 15 ms: 1 / 0.015 = 66.67 rps.
    expect(r.goodput_rps).toBeCloseTo(1 / 0.015, 9);
  });

  it("a tokenless completion is good only under an e2e-only SLA", () => {
    const tokenless = done({ outputTokens: 0, firstTokenMs: undefined, lastTokenMs: undefined, gaps: undefined, terminalMs: 5 });
    const e2eOnly = new MetricsCollector({ e2e_ms: 5 });
    e2eOnly.onTerminal(tokenless);
    expect(e2eOnly.report().goodput_requests).toBe(1);
    const withTtft = new MetricsCollector({ e2e_ms: 5, ttft_ms: 100 });
    withTtft.onTerminal(tokenless);
    expect(withTtft.report().goodput_requests).toBe(0);
  });

  it("handoffs: count, bytes and mean delay over started transfers", () => {
    const c = new MetricsCollector(undefined);
    c.onTransferStarted(4_000_000, 4);
    c.onTransferStarted(2_000_000, 2);
    expect(c.report().handoffs).toEqual({ count: 2, payload_bytes: 6_000_000, mean_delay_ms: 3 });
  });

  it("a zero duration reports zero rates instead of dividing by zero", () => {
    const c = new MetricsCollector(undefined);
    c.onTerminal(done({ firstTokenMs: 0, lastTokenMs: 0, terminalMs: 0, gaps: Float64Array.from([0]) }));
    expect(c.report().request_throughput_rps).toBe(0);
  });
});

describe("digest", () => {
  it("is the SHA-256 of the canonical JSON: sorted keys, without digest and wall-clock fields", () => {
    const c = new MetricsCollector(undefined);
    c.onArrival();
    c.onTerminal(done({}));
    const r = c.report();
    const json = canonicalReportJson(r);
    expect(json.startsWith('{"completed_requests":1,"duration_ms":14,')).toBe(true);
    expect(json).not.toContain("digest");
    expect(r.digest).toMatch(/^[0-9a-f]{64}$/);
    const timed = withWallTime(r, 500);
    expect(timed.wall_time_ms).toBe(500);
    // 1 request in 0.5 s of wall time = 2 per second.
    expect(timed.simulated_requests_per_wall_s).toBe(2);
    expect(digestOf(timed)).toBe(r.digest);
    expect(digestOf({ ...r, duration_ms: 15 })).not.toBe(r.digest);
  });
});
