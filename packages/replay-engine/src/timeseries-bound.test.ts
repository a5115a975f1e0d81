import { describe, expect, it } from "vitest";
import { Sampler } from "./sampler.js";
import { MAX_SERIES_VALUES, TooManySamples } from "./timeseries.js";

/** Issue 38: `--sample-ms 0.001` over a long run asked for 2.27 GB of samples. */
describe("a fixed sample interval too short for the run", () => {
  const probe = {
    role: "aggregated" as const,
    id: 0,
    groups: ["kv"],
    load: () => ({ running: 0, waiting: 0 }),
    groupPages: () => ({ used: [0], cached: [0] }),
  };

  it("stops at the first buffer that would pass MAX_SERIES_VALUES, saying how far the samples got", () => {
    const sampler = new Sampler([probe], 1);
    // A row is 8 deployment columns + 5 worker columns + 2 for its one cache group = 15 values.
    // The buffer starts at 16 rows and doubles: 16 x 2^16 = 1,048,576 rows hold 15,728,640 values
    // (within 2^24 = 16,777,216); doubling again would hold 31,457,280, past the limit.
    let thrown: unknown;
    try {
      sampler.advance(1e9);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(TooManySamples);
    const e = thrown as TooManySamples;
    expect([e.samples, e.columns, e.reachedMs, e.sampleMs]).toEqual([1_048_576, 15, 1_048_575, 1]);
    expect(e.samples * e.columns).toBeLessThanOrEqual(MAX_SERIES_VALUES);
  });

  it("an adaptive sampler never meets the limit: it doubles its interval instead", () => {
    const sampler = new Sampler([probe], undefined);
    sampler.advance(1e9);
    sampler.finish(1e9);
    const ts = sampler.result();
    expect(ts.times_ms.length).toBeLessThanOrEqual(4097);
  });
});
