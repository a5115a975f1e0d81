import { describe, expect, it } from "vitest";
import { addressSpaceLimit, localJobs, threadsThatFit } from "./jobs.js";

/** Issue 38: `--jobs 64` on a 4-point grid started 63 threads (1.47 GB); under a 4 GiB cap `--jobs 8` aborted. */
describe("how many points a local sweep runs at once", () => {
  const unlimited = Number.POSITIVE_INFINITY;

  it("no more than the grid's points, the cores, or what the address-space limit holds", () => {
    expect(localJobs(64, 4, 16, unlimited)).toEqual({ jobs: 4, why: "the grid's 4 points" });
    expect(localJobs(64, 100, 2, unlimited)).toEqual({ jobs: 2, why: "2 cores" });
    expect(localJobs(2, 100, 16, unlimited)).toEqual({ jobs: 2 });
    // 4 GiB: (4,096 - 1,536) MiB / 512 MiB = 5 worker threads beside the main thread: 6 jobs.
    expect(localJobs(8, 24, 16, 4 * 2 ** 30)).toEqual({ jobs: 6, why: "the address-space limit (ulimit -v), room for 5 worker threads" });
    // kvsim worker runs every job in a thread: 5.
    expect(localJobs(8, undefined, 16, 4 * 2 ** 30, true).jobs).toBe(5);
    // Too small a limit for any thread: one job, in the main thread.
    expect(localJobs(8, 24, 16, 2 ** 30).jobs).toBe(1);
  });

  it("reads the limit from /proc/self/limits (bytes), Infinity when unlimited or unknown", () => {
    const limits = (v: string) =>
      `Limit                     Soft Limit           Hard Limit           Units\nMax address space         ${v}           ${v}           bytes\n`;
    expect(addressSpaceLimit(limits("4294967296"))).toBe(4 * 2 ** 30);
    expect(addressSpaceLimit(limits("unlimited"))).toBe(unlimited);
    expect(addressSpaceLimit("")).toBe(unlimited);
    expect(threadsThatFit(unlimited)).toBe(unlimited);
  });
});
