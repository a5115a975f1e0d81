import { describe, expect, it } from "vitest";
import { identifiabilityWarnings, missedTargetWarnings, symmetricEigen } from "./fit-diagnostics.js";

describe("symmetricEigen", () => {
  it("finds the eigenvalues and vectors of a 2 x 2 matrix derived by hand", () => {
    // [[2, 1], [1, 2]]: eigenvalues 1 (vector (1, -1)/sqrt 2) and 3 (vector (1, 1)/sqrt 2).
    const { values, vectors } = symmetricEigen([
      [2, 1],
      [1, 2],
    ]);
    const order = values.map((v, i) => ({ v, i })).sort((a, b) => a.v - b.v);
    expect(order[0]!.v).toBeCloseTo(1, 12);
    expect(order[1]!.v).toBeCloseTo(3, 12);
    const small = [vectors[0]![order[0]!.i]!, vectors[1]![order[0]!.i]!];
    expect(Math.abs(small[0]!)).toBeCloseTo(Math.SQRT1_2, 12);
    expect(small[0]! * small[1]!).toBeCloseTo(-0.5, 12);
  });
});

describe("identifiabilityWarnings", () => {
  const advice = { a: "a run at lower load", b: "a run with short prompts", c: "a run at TP 2" };

  it("names two terms whose columns move the errors identically: only their sum is determined", () => {
    // Errors (TPOT, TTFT) move by 0.5 per log-unit of a and of b alike; c moves TTFT alone.
    const jacobian = [
      [0.5, 0.5, 0],
      [0.5, 0.5, 0.4],
    ];
    const w = identifiabilityWarnings(jacobian, ["a", "b", "c"], advice, "fit");
    expect(w).toHaveLength(1);
    expect(w[0]!.kind).toBe("indistinguishable");
    expect(new Set(w[0]!.terms)).toEqual(new Set(["a", "b"]));
    expect(w[0]!.message).toContain("cannot be told apart");
    expect(w[0]!.settle).toContain("a run at lower load");
    expect(w[0]!.settle).toContain("a run with short prompts");
  });

  it("two terms that move the errors little each are undetermined; two that move them alike are indistinguishable", () => {
    // a and b move the errors by 1% along every direction of their plane (c is well determined).
    const jacobian = [
      [0.01, 0.01, 0],
      [0.01, -0.01, 0],
      [0, 0, 1],
    ];
    // Each column alone moves them by sqrt(2) x 1% = 1.4%: both are undetermined on their own.
    expect(identifiabilityWarnings(jacobian, ["a", "b", "c"], advice, "fit").map((w) => w.kind)).toEqual(["undetermined", "undetermined"]);
    // Columns of 5.7% each (each alone determined) whose difference moves the errors by 0.1%: one warning naming both.
    const near = [
      [0.04, 0.04, 0],
      [0.04, 0.04, 0],
      [0, 0, 1],
      [0.001, -0.001, 0],
    ];
    const w = identifiabilityWarnings(near, ["a", "b", "c"], advice, "fit");
    expect(w.map((x) => [x.kind, [...(x.terms ?? [])].sort()])).toEqual([["indistinguishable", ["a", "b"]]]);
  });

  it("names a term whose column barely moves the errors as undetermined", () => {
    // c moves the errors by sqrt(0.01^2 + 0.02^2) = 2.2% per factor e: below 3%.
    const jacobian = [
      [1, 0, 0.01],
      [0, 1, 0.02],
    ];
    const w = identifiabilityWarnings(jacobian, ["a", "b", "c"], advice, "fit");
    expect(w.map((x) => [x.kind, x.terms])).toEqual([["undetermined", ["c"]]]);
    expect(w[0]!.message).toBe("fit: c is not determined by these runs (a factor e on it moves the fit part's errors by 2.2%): it stays near its start");
    expect(w[0]!.settle).toBe("a run at TP 2");
  });

  it("says nothing when every direction moves the errors", () => {
    expect(
      identifiabilityWarnings(
        [
          [1, 0],
          [0.5, 1],
        ],
        ["a", "b"],
        advice,
        "fit",
      ),
    ).toEqual([]);
  });
});

describe("missedTargetWarnings", () => {
  it("warns beyond 10% either way, on TPOT and TTFT separately", () => {
    const w = missedTargetWarnings([
      { label: "r1", tpotMeanError: 0.1, ttftMeanError: -0.96 },
      { label: "r2", tpotMeanError: 0.25, ttftMeanError: null },
    ]);
    expect(w.map((x) => x.message)).toEqual([
      "r1: the fitted timing misses the fit part's own TTFT mean by -96.0% (more than 10%): the fit failed on the data it was given",
      "r2: the fitted timing misses the fit part's own TPOT mean by +25.0% (more than 10%): the fit failed on the data it was given",
    ]);
    expect(w.every((x) => x.kind === "missed_target" && x.settle !== undefined)).toBe(true);
  });
});
