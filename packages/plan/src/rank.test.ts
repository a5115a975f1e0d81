import { describe, expect, it } from "vitest";
import { goodputSla } from "./rank.js";

describe("goodputSla", () => {
  it("takes each latency's tightest bound as the per-request SLA, ignoring spreads and throughputs", () => {
    const sla = goodputSla([
      { metric: "p90_ttft_ms", op: "<=", value: 2000 },
      { metric: "mean_ttft_ms", op: "<=", value: 900 },
      { metric: "p99_tpot_ms", op: "<=", value: 60 },
      { metric: "p90_itl_ms", op: "<=", value: 50 },
      { metric: "std_e2e_ms", op: "<=", value: 10 },
      { metric: "goodput_rps", op: ">=", value: 3 },
    ]);
    expect(sla).toEqual({ ttft_ms: 900, itl_ms: 50 });
  });
});
