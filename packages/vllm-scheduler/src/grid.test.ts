import { describe, expect, it } from "vitest";
import { InterpolationGrid, TimingRefusedError } from "./grid.js";

// The interpolation grid on its own (its binary search, its axis sort and its
// refusals). Expected values are worked out by hand beside each check.

const point = (at: number[], value: number) => ({ at, value });

describe("InterpolationGrid", () => {
  // One axis of 4 values given out of order: sorted 0, 10, 30, 70 with values 0, 50, 300, 700.
  const line = new InterpolationGrid("g", ["x"], [point([30], 300), point([0], 0), point([70], 700), point([10], 50)]);

  it("sorts each axis and finds the cell by binary search", () => {
    // x 50: the search over lower indices 0..2 tries mid 1 (10 <= 50), then mid 2 (30 <= 50): cell
    // [30, 70], weight (50 - 30) / (70 - 30) = 0.5: 0.5 x 300 + 0.5 x 700 = 500.
    expect(line.lookup([50], "refuse")).toEqual({ value: 500, clamped: false });
    // x 20: mid 1 (10 <= 20), then mid 2 (30 > 20): cell [10, 30], weight 10 / 20 = 0.5: 0.5 x 50 + 0.5 x 300 = 175.
    expect(line.lookup([20], "refuse")).toEqual({ value: 175, clamped: false });
    // x 5: mid 1 (10 > 5): cell [0, 10], weight 0.5: 0.5 x 0 + 0.5 x 50 = 25.
    expect(line.lookup([5], "refuse")).toEqual({ value: 25, clamped: false });
    // On measured points: exact.
    expect([0, 10, 30, 70].map((x) => line.lookup([x], "refuse").value)).toEqual([0, 50, 300, 700]);
  });

  it("clamps to the nearer end, or refuses with a TimingRefusedError naming the query and the range", () => {
    expect(line.lookup([-5], "clamp")).toEqual({ value: 0, clamped: true });
    expect(line.lookup([80], "clamp")).toEqual({ value: 700, clamped: true });
    let error: unknown;
    try {
      line.lookup([80], "refuse");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TimingRefusedError);
    expect((error as Error).name).toBe("TimingRefusedError");
    expect((error as Error).message).toBe(
      'g: the query (x 80) is outside the measured grid (x 0..70); add measurements that cover it or set timing.outside_grid to "clamp"',
    );
  });

  it("a grid of no axes holds one value", () => {
    // 0 axes: one point, 2^0 = 1 corner of weight 1.
    expect(new InterpolationGrid("g", [], [point([], 7)]).lookup([], "refuse")).toEqual({ value: 7, clamped: false });
  });

  it("refuses points that do not form a complete grid, naming the grid", () => {
    const build = (axes: string[], points: { at: number[]; value: number }[]) => () => new InterpolationGrid("forward_pass.decode", axes, points);
    expect(build(["x"], [])).toThrow(new RangeError("forward_pass.decode has no points"));
    expect(build(["x"], [point([1, 2], 1)])).toThrow(new RangeError("forward_pass.decode: a point has 2 coordinates, expected 1"));
    // Axes x {0, 1} and y {0, 1}: 2 x 2 = 4 points needed, 3 given.
    expect(build(["x", "y"], [point([0, 0], 1), point([0, 1], 2), point([1, 1], 3)])).toThrow(
      new RangeError("forward_pass.decode is not a complete grid: 2 x 2 axis values need 4 points, found 3"),
    );
    // 4 points for 4 places, but (0, 0) twice and (1, 0) missing.
    expect(build(["x", "y"], [point([0, 0], 1), point([0, 1], 2), point([1, 1], 3), point([0, 0], 4)])).toThrow(
      new RangeError("forward_pass.decode has two points at (0, 0)"),
    );
  });
});
