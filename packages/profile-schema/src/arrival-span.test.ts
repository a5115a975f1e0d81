import { describe, expect, it } from "vitest";
import { ArrivalSpan, arrivalSpanWarning } from "./arrival-span.js";

describe("arrivalSpanWarning", () => {
  it("warns on 20 Mooncake requests within 1.9 ms (times in seconds read as ms)", () => {
    // 19 gaps over 1.9 ms: a mean gap of 0.1 ms, 19 / 1.9 ms = 10,000 req/s.
    const w = arrivalSpanWarning("mooncake", 20, 1.9);
    expect(w).toBe(
      "the trace's 20 requests arrive within 1.9 ms (10,000 req/s); Mooncake's timestamp is in milliseconds: if its times are seconds, multiply them by 1,000 (or set workload.speedup to 0.001)",
    );
  });

  it("is quiet on a plausible span, a burst, a few requests and Azure dates", () => {
    // 20 requests over 19 ms: a mean gap of exactly 1 ms, at the bound, not under it.
    expect(arrivalSpanWarning("kvsim", 20, 19)).toBeUndefined();
    // Every request at once is a deliberate burst.
    expect(arrivalSpanWarning("mooncake", 1000, 0)).toBeUndefined();
    // 9 requests: below the 10 the check needs.
    expect(arrivalSpanWarning("mooncake", 9, 0.5)).toBeUndefined();
    expect(arrivalSpanWarning("azure", 100, 0.5)).toBeUndefined();
    // Just under the bound warns: 20 requests over 18.9 ms, a mean gap of 0.995 ms.
    expect(arrivalSpanWarning("kvsim", 20, 18.9)).toContain("kvsim's arrival_ms is in milliseconds");
  });

  it("ArrivalSpan counts records and their span as they stream past", async () => {
    const span = new ArrivalSpan();
    const records = (async function* () {
      for (const t of [5, 7, 12]) yield await Promise.resolve({ line: 1, arrivalMs: t, inputTokens: 1, outputTokens: 1 });
    })();
    const seen: number[] = [];
    for await (const r of span.watch(records)) seen.push(r.arrivalMs);
    // 3 records, 12 - 5 = 7 ms.
    expect([seen, span.count, span.spanMs]).toEqual([[5, 7, 12], 3, 7]);
  });
});
