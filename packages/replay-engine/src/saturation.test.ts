import { describe, expect, it } from "vitest";
import { SaturationMonitor } from "./saturation.js";

/**
 * Feeds a monitor in virtual-time order: at one instant completions come before arrivals (as the
 * replay orders passes before arrivals). Each request: arrival, first token, completion.
 */
function run(requests: readonly { arrival: number; first: number; done: number }[]) {
  const m = new SaturationMonitor();
  const events = [...requests.map((r) => ({ t: r.done, order: 0, r })), ...requests.map((r) => ({ t: r.arrival, order: 1, r }))].sort(
    (a, b) => a.t - b.t || a.order - b.order,
  );
  for (const e of events) {
    if (e.order === 1) m.onArrival(e.r.arrival);
    else m.onCompleted(e.r.arrival, e.r.first, e.r.done);
  }
  return m.check();
}

const arrivals = (n: number, gapMs: number) => Array.from({ length: n }, (_, i) => i * gapMs);

describe("SaturationMonitor", () => {
  it("a stable run (40 arrivals 100 ms apart, TTFT 50, E2E 60) is not saturated", () => {
    const c = run(arrivals(40, 100).map((a) => ({ arrival: a, first: a + 50, done: a + 60 })));
    // Offered: 39 gaps over 3,900 ms = 10 req/s.
    expect(c.offered_rps).toBeCloseTo(10, 12);
    // By the last arrival (3,900) requests 0..38 are done (38 x 100 + 60 = 3,860 <= 3,900); the
    // first completion is at 60: 38 intervals over 3,840 ms = 9.896 req/s, above 0.9 x 10.
    expect(c.served_rps).toBeCloseTo((38 / 3840) * 1000, 12);
    expect([c.ttft_first_quarter_ms, c.ttft_last_quarter_ms]).toEqual([50, 50]);
    expect(c.saturated).toBe(false);
  });

  it("a server at 5 req/s under 10 req/s of arrivals is saturated: served 4.86 req/s, TTFT 650 -> 3,650 ms", () => {
    // One request every 200 ms, first come first served and always backlogged: request i finishes
    // (its one token) at 200 (i + 1); TTFT_i = 200 (i + 1) - 100 i = 100 i + 200.
    const c = run(arrivals(40, 100).map((a, i) => ({ arrival: a, first: 200 * (i + 1), done: 200 * (i + 1) })));
    expect(c.offered_rps).toBeCloseTo(10, 12);
    // Done by 3,900: 200 (i + 1) <= 3,900 -> i = 0..18, 19 requests; first completion at 200:
    // 18 intervals over 3,700 ms.
    expect(c.served_rps).toBeCloseTo((18 / 3700) * 1000, 12);
    // First quarter of the window [0, 975]: requests 0..9, mean TTFT 100 x 4.5 + 200 = 650.
    // Last quarter [2,925, 3,900]: requests 30..39, mean 100 x 34.5 + 200 = 3,650.
    expect(c.ttft_first_quarter_ms).toBeCloseTo(650, 9);
    expect(c.ttft_last_quarter_ms).toBeCloseTo(3650, 9);
    expect(c.saturated).toBe(true);
  });

  it("a heavy overload where nothing completes before the last arrival is saturated, served 0 req/s", () => {
    // One request every 5,000 ms under arrivals every 100 ms: request i finishes at 5,000 (i + 1),
    // so none is done by the last arrival (3,900 < 5,000); TTFT_i = 5,000 (i + 1) - 100 i = 4,900 i + 5,000.
    const c = run(arrivals(40, 100).map((a, i) => ({ arrival: a, first: 5000 * (i + 1), done: 5000 * (i + 1) })));
    expect(c.offered_rps).toBeCloseTo(10, 12);
    // 0 completions over the 3,900 ms arrival window.
    expect(c.served_rps).toBe(0);
    // First quarter: requests 0..9, mean 4,900 x 4.5 + 5,000 = 27,050; last: 30..39, 4,900 x 34.5 + 5,000 = 174,050.
    expect(c.ttft_first_quarter_ms).toBeCloseTo(27050, 9);
    expect(c.ttft_last_quarter_ms).toBeCloseTo(174050, 9);
    expect(c.saturated).toBe(true);
  });

  it("one completion before the last arrival counts over the arrival window", () => {
    // One request every 3,000 ms: request 0 done at 3,000 <= 3,900, request 1 at 6,000 is not.
    // Served: 1 completion over 3,900 ms = 0.2564 req/s.
    const c = run(arrivals(40, 100).map((a, i) => ({ arrival: a, first: 3000 * (i + 1), done: 3000 * (i + 1) })));
    expect(c.served_rps).toBeCloseTo((1 / 3900) * 1000, 12);
    expect(c.saturated).toBe(true);
  });

  it("gives no verdict on fewer than 20 arrivals or when all arrive at once", () => {
    const few = run(arrivals(19, 100).map((a, i) => ({ arrival: a, first: 200 * (i + 1), done: 200 * (i + 1) })));
    expect(few.saturated).toBe(false);
    const burst = run(Array.from({ length: 40 }, (_, i) => ({ arrival: 0, first: 10 * (i + 1), done: 10 * (i + 1) })));
    expect([burst.saturated, burst.offered_rps, burst.ttft_first_quarter_ms]).toEqual([false, null, null]);
  });
});
