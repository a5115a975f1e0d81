import { describe, expect, it } from "vitest";
import { clock, progressLine, traceFraction } from "./progress.js";

describe("the replay progress line", () => {
  it("shows the total, the elapsed time and the ETA, and fits 120 columns with a 40-cell bar", () => {
    // 250 of 1,000 requests after 30 s: a quarter done, so 3 quarters remain: 30 s x 3 = 1:30.
    const line = progressLine({ fraction: 0.25, terminal: 250, totalRequests: 1000, virtualMs: 12_345, elapsedMs: 30_000 }, 120);
    expect(line).toBe(`replay [${"#".repeat(10)}${"-".repeat(30)}] 250/1,000 requests | 12.3 s virtual | elapsed 0:30 | ETA 1:30`);
    expect(line.length).toBeLessThan(120);
  });
  it("shows the share of a trace read when the total is unknown", () => {
    // Half the trace after 10 s: 10 s remain.
    expect(progressLine({ fraction: 0.5, terminal: 3993, totalRequests: undefined, virtualMs: 0, elapsedMs: 10_000 }, 200)).toMatch(
      /\] 50% of trace, 3,993 requests \| 0\.0 s virtual \| elapsed 0:10 \| ETA 0:10$/,
    );
  });
  it("says the trace is being read before any request is, then counts requests read and done", () => {
    expect(progressLine({ fraction: 0, terminal: 0, totalRequests: undefined, read: 0, virtualMs: 0, elapsedMs: 3000 }, 120)).toMatch(
      /\] starting: reading the trace \| 0\.0 s virtual \| elapsed 0:03 \| ETA --$/,
    );
    // 5 of 20 read requests done, the file read whole: 25%; after 4 s, 3 quarters remain: 12 s.
    expect(progressLine({ fraction: 0.25, terminal: 5, totalRequests: undefined, read: 20, virtualMs: 1500, elapsedMs: 4000 }, 120)).toMatch(
      /\] 25%, 20 requests read, 5 done \| 1\.5 s virtual \| elapsed 0:04 \| ETA 0:12$/,
    );
  });
  it("a small trace read at once shows finished over read requests, not 100% of its bytes", () => {
    // The whole file (700 of 700 bytes) read, 5 of its 20 requests done: 1 x 5 / 20 = 0.25.
    expect(traceFraction(700, 700, 20, 5)).toBe(0.25);
    // A large trace a tenth read, all read requests done: 0.1 x 1 = 0.1.
    expect(traceFraction(100, 1000, 50, 50)).toBe(0.1);
    // Nothing read yet, or an empty file: 0.
    expect([traceFraction(0, 1000, 0, 0), traceFraction(0, 0, 0, 0)]).toEqual([0, 0]);
  });
  it("is never cut: it drops the virtual time, then the elapsed time, on narrow terminals", () => {
    const s = { fraction: 0.1, terminal: 100_000, totalRequests: 1_000_000, virtualMs: 9_999_000, elapsedMs: 3_600_000 };
    for (const columns of [60, 70, 80, 100]) {
      const line = progressLine(s, columns);
      expect(line.length).toBeLessThan(columns);
      expect(line).toContain("100,000/1,000,000 requests");
      expect(line).toContain("ETA 9:00:00"); // 1 h for a tenth: 9 h remain
    }
    expect(progressLine(s, 60)).not.toContain("elapsed");
    expect(progressLine(s, 80)).not.toContain("virtual");
  });
  it("has no ETA before any progress, and 0:00 when done", () => {
    expect(progressLine({ fraction: 0, terminal: 0, totalRequests: 5, virtualMs: 0, elapsedMs: 1 }, 120)).toContain("ETA --");
    expect(progressLine({ fraction: 1, terminal: 5, totalRequests: 5, virtualMs: 0, elapsedMs: 1 }, 120)).toContain("ETA 0:00");
  });
  it("formats durations as m:ss and h:mm:ss", () => {
    expect([clock(0), clock(75_000), clock(3_725_000)]).toEqual(["0:00", "1:15", "1:02:05"]);
  });
});
