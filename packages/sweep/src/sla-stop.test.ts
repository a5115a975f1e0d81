import { describe, expect, it } from "vitest";
import { latencyStat, parseSla, slaStop } from "./sla.js";

describe("slaStop", () => {
  it("watches the upper bounds on latency means and percentiles, and every request completing", () => {
    const terms = parseSla("p90_ttft_ms<=2000,mean_tpot_ms<=40,median_e2el_ms<=9000,p99.9_e2e_ms<=20000,p99_itl_ms<=50,goodput_rps>=2,p90_ttft_ms>=1");
    expect(slaStop(terms, 120)).toEqual({
      total: 120,
      allComplete: true,
      terms: [
        { metric: "ttft", stat: 90, limit: 2000 },
        { metric: "tpot", stat: "mean", limit: 40 },
        { metric: "e2e", stat: 50, limit: 9000 },
        { metric: "e2e", stat: 99.9, limit: 20000 },
      ],
    });
  });
});

describe("latencyStat", () => {
  it("reads the latency and statistic a metric names", () => {
    expect(latencyStat("p90_ttft_ms")).toEqual({ latency: "ttft", stat: 90 });
    expect(latencyStat("p99.9_e2el_ms")).toEqual({ latency: "e2e", stat: 99.9 });
    expect(latencyStat("median_tpot_ms")).toEqual({ latency: "tpot", stat: 50 });
    expect(latencyStat("std_itl_ms")).toEqual({ latency: "itl", stat: "std" });
    expect(latencyStat("goodput_rps")).toBeUndefined();
  });
});
