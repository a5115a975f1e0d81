import { describe, expect, it } from "vitest";
import { MetricsCollector, type TerminalFacts } from "./metrics-collector.js";
import { CANONICAL_KEYS, canonicalReportJson, digestOf, withWallTime } from "./report.js";

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
  it("S1 (docs/rules/replay.md §6.2): one request 4 in / 2 out, tokens at 12 and 14", () => {
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

describe("vLLM's benchmark names, extra percentiles and reason groups (outside the digest)", () => {
  it("S1 under vLLM's names: duration 0.014 s, 1 completed, throughputs per second, median = p50, std 0", () => {
    const c = new MetricsCollector(undefined);
    c.onArrival(0);
    c.onTerminal(done({}));
    const r = c.report();
    expect([r.duration, r.completed, r.failed, r.request_goodput]).toEqual([0.014, 1, 0, null]);
    expect(r.request_throughput).toBeCloseTo(1 / 0.014, 9);
    expect(r.output_throughput).toBeCloseTo(2 / 0.014, 9);
    // 4 input + 2 output tokens over 0.014 s.
    expect(r.total_token_throughput).toBeCloseTo(6 / 0.014, 9);
    expect([r.median_ttft_ms, r.std_ttft_ms, r.mean_e2el_ms, r.median_e2el_ms, r.p99_e2el_ms, r.median_itl_ms]).toEqual([12, 0, 14, 14, 14, 2]);
  });

  it("failed counts rejected and failed requests (vLLM counts every unsuccessful request); goodput under its name", () => {
    const c = new MetricsCollector({ ttft_ms: 100 });
    c.onTerminal(done({ status: "rejected", reason: "no" }));
    c.onTerminal(done({ status: "failed", reason: "no" }));
    c.onTerminal(done({}));
    const r = c.report();
    expect(r.failed).toBe(2);
    // 1 good request over 14 ms.
    expect(r.request_goodput).toBeCloseTo(1 / 0.014, 9);
  });

  it("percentiles 95 and 99.9 of TTFTs 1..10: ranks round(9 x 0.95) = 9 and round(9 x 0.999) = 9 -> 10; std sqrt(8.25)", () => {
    const c = new MetricsCollector(undefined, { percentiles: [95, 99.9, 50] });
    for (const t of [7, 3, 10, 1, 5, 9, 2, 8, 6, 4]) c.onTerminal(done({ arrivalMs: 0, firstTokenMs: t, lastTokenMs: t + 2, terminalMs: t + 2 }));
    const r = c.report();
    expect([r.p95_ttft_ms, r["p99.9_ttft_ms"], r.p50_ttft_ms, r.median_ttft_ms]).toEqual([10, 10, 6, 6]);
    expect(r.std_ttft_ms).toBe(Math.sqrt(8.25));
    // E2E = TTFT + 2 -> 3..12: p95 = 12; both names.
    expect([r.p95_e2e_ms, r.p95_e2el_ms]).toEqual([12, 12]);
  });

  it("groups reasons that differ only in numbers, most frequent first, with the first one in full", () => {
    const c = new MetricsCollector(undefined);
    c.onTerminal(done({ status: "rejected", reason: "prompt of 200 tokens reaches max_model_len 100" }));
    c.onTerminal(done({ status: "failed", reason: "decode worker 1 rejected the request: pool full" }));
    c.onTerminal(done({ status: "rejected", reason: "prompt of 300 tokens reaches max_model_len 100" }));
    c.onTerminal(done({ status: "rejected", reason: "request id must be a non-empty string" }));
    const r = c.report();
    expect(r.rejection_reasons).toEqual([
      { reason: "prompt of # tokens reaches max_model_len #", count: 2, example: "prompt of 200 tokens reaches max_model_len 100" },
      { reason: "request id must be a non-empty string", count: 1, example: "request id must be a non-empty string" },
    ]);
    expect(r.failure_reasons).toEqual([
      { reason: "decode worker # rejected the request: pool full", count: 1, example: "decode worker 1 rejected the request: pool full" },
    ]);
  });

  it("a cutoff makes the duration the cutoff and counts the in-flight requests' tokens in the output throughput", () => {
    const c = new MetricsCollector(undefined);
    c.onArrival(0);
    c.onArrival(1);
    c.onTerminal(done({}));
    c.onCutoff(20, 3, 5);
    const r = c.report();
    expect(r.cutoff).toEqual({ at_ms: 20, in_flight_requests: 1, not_arrived_requests: 5, in_flight_output_tokens: 3 });
    // 1 request over 0.020 s; (2 + 3) tokens over 0.020 s.
    expect([r.duration_ms, r.request_throughput_rps, r.output_throughput_tok_s]).toEqual([20, 50, 250]);
  });
});

describe("digest", () => {
  it("covers exactly the v1 keys: derived keys and run records never change it", () => {
    const c = new MetricsCollector(undefined, { percentiles: [95] });
    c.onArrival(0);
    c.onTerminal(done({}));
    const r = c.report();
    const keys = Object.keys(JSON.parse(canonicalReportJson(r)) as object);
    // Without an SLA: the 11 counts and rates, 16 latency keys, reuse, preemptions, handoffs = 30.
    expect(keys).toHaveLength(30);
    expect(keys.every((k) => (CANONICAL_KEYS as readonly string[]).includes(k))).toBe(true);
    for (const k of ["median_ttft_ms", "p95_ttft_ms", "saturation", "rejection_reasons", "duration", "mean_e2el_ms"]) expect(keys).not.toContain(k);
    expect(
      digestOf({ ...r, median_ttft_ms: 1, saturation: { saturated: true, offered_rps: 1, served_rps: 0, ttft_first_quarter_ms: 1, ttft_last_quarter_ms: 9 } }),
    ).toBe(r.digest);
    // The same report without the derived keys has the same digest.
    const bare = new MetricsCollector(undefined);
    bare.onArrival(0);
    bare.onTerminal(done({}));
    expect(bare.report().digest).toBe(r.digest);
  });

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
