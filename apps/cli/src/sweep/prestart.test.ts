import { describe, expect, it } from "vitest";
import { sweepThreadsToPrestart } from "./prestart.js";

describe("worker threads started before the CLI loads", () => {
  it("are started for a local grid sweep on several cores: --jobs minus one, or every core but one", () => {
    expect(sweepThreadsToPrestart(["sweep", "--grid", "g.yaml"], 4)).toBe(3);
    expect(sweepThreadsToPrestart(["sweep", "--spec", "s.yaml", "--grid=g.yaml", "--jobs", "2"], 8)).toBe(1);
    expect(sweepThreadsToPrestart(["sweep", "--grid", "g.yaml", "--jobs=6"], 2)).toBe(5);
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
    for (const argv of none) expect({ argv, threads: sweepThreadsToPrestart(argv, 4) }).toEqual({ argv, threads: 0 });
    // One core: no worker thread.
    expect(sweepThreadsToPrestart(["sweep", "--grid", "g.yaml"], 1)).toBe(0);
  });
});
