import { describe, expect, it } from "vitest";
import { sweepThreadsToPrestart } from "./prestart.js";

describe("worker threads started before the CLI loads", () => {
  it("are started for a local grid sweep on several cores: --jobs minus one, or every core but one", () => {
    const unlimited = Number.POSITIVE_INFINITY;
    expect(sweepThreadsToPrestart(["sweep", "--grid", "g.yaml"], 4, unlimited)).toBe(3);
    expect(sweepThreadsToPrestart(["sweep", "--spec", "s.yaml", "--grid=g.yaml", "--jobs", "2"], 8, unlimited)).toBe(1);
    expect(sweepThreadsToPrestart(["sweep", "--grid", "g.yaml", "--jobs=6"], 8, unlimited)).toBe(5);
  });

  it("are never more than the cores, nor than the address-space limit leaves room for", () => {
    // --jobs 9999 on 2 cores: 2 jobs, one worker thread (it once started 9,998).
    expect(sweepThreadsToPrestart(["sweep", "--grid", "g.yaml", "--jobs", "9999"], 2, Number.POSITIVE_INFINITY)).toBe(1);
    // Under ulimit -v 4 GiB on 64 cores: (4 GiB - 1.5 GiB) / 512 MiB = 2560 / 512 = 5 threads.
    expect(sweepThreadsToPrestart(["sweep", "--grid", "g.yaml", "--jobs", "64"], 64, 4 * 2 ** 30)).toBe(5);
  });

  it("are not started for anything else, nor for a --jobs the CLI refuses", () => {
    const none = [
      ["replay", "--grid", "g.yaml"],
      ["sweep", "--spec", "s.yaml"], // no grid: a search
      ["sweep", "--grid", "g.yaml", "--find", "max-rate"],
      ["sweep", "--grid", "g.yaml", "--queue", "redis://127.0.0.1:6379/0"],
      ["sweep", "--grid", "g.yaml", "--help"],
      ["sweep", "--grid", "g.yaml", "--jobs", "1"],
      ["sweep", "--grid", "g.yaml", "--jobs", "0"],
      ["sweep", "--grid", "g.yaml", "--jobs", "two"],
      ["sweep", "--grid", "g.yaml", "--jobs"],
    ];
    for (const argv of none) expect({ argv, threads: sweepThreadsToPrestart(argv, 4, Number.POSITIVE_INFINITY) }).toEqual({ argv, threads: 0 });
    // One core: no worker thread.
    expect(sweepThreadsToPrestart(["sweep", "--grid", "g.yaml"], 1, Number.POSITIVE_INFINITY)).toBe(0);
  });
});
