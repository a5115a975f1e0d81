/**
 * Multilinear interpolation over a complete grid of measured points (the profile's forward_pass
 * tables). Exact on grid points; inside a cell, the usual tensor-product blend of its 2^d corners.
 */

export interface GridLookup {
  readonly value: number;
  /** True when at least one coordinate lay outside its axis and was clamped. */
  readonly clamped: boolean;
}

export type OutsideGridPolicy = "refuse" | "clamp";

/**
 * A pass the timing model refused to price (`outside_grid: refuse` and a query outside the
 * measured grid). The rank stops in the middle of that step: a replay ends as a failed run, an
 * engine session refuses every later command.
 */
export class TimingRefusedError extends RangeError {
  override readonly name = "TimingRefusedError";
}

export class InterpolationGrid {
  private readonly axes: readonly Float64Array[];
  /** Row-major values: the last axis varies fastest. */
  private readonly values: Float64Array;
  private readonly strides: readonly number[];

  /**
   * @param name what the grid is, for error messages (e.g. "forward_pass.prefill")
   * @param axisNames one name per coordinate
   * @param points coordinates and latency of every measured point; they must form a complete grid
   */
  constructor(
    private readonly name: string,
    private readonly axisNames: readonly string[],
    points: readonly { readonly at: readonly number[]; readonly value: number }[],
  ) {
    const dims = axisNames.length;
    if (points.length === 0) throw new RangeError(`${name} has no points`);
    const axisSets = axisNames.map(() => new Set<number>());
    for (const p of points) {
      if (p.at.length !== dims) throw new RangeError(`${name}: a point has ${p.at.length} coordinates, expected ${dims}`);
      p.at.forEach((v, d) => axisSets[d]!.add(v));
    }
    this.axes = axisSets.map((s) => Float64Array.from([...s].sort((a, b) => a - b)));
    const strides = new Array<number>(dims).fill(1);
    for (let d = dims - 2; d >= 0; d--) strides[d] = strides[d + 1]! * this.axes[d + 1]!.length;
    this.strides = strides;
    const size = dims === 0 ? 1 : strides[0]! * this.axes[0]!.length;
    if (size !== points.length) {
      throw new RangeError(
        `${name} is not a complete grid: ${this.axes.map((a) => a.length).join(" x ")} axis values need ${size} points, found ${points.length}`,
      );
    }
    this.values = new Float64Array(size).fill(Number.NaN);
    for (const p of points) {
      let offset = 0;
      p.at.forEach((v, d) => (offset += this.axes[d]!.indexOf(v) * strides[d]!));
      if (!Number.isNaN(this.values[offset]!)) throw new RangeError(`${name} has two points at (${p.at.join(", ")})`);
      this.values[offset] = p.value;
    }
  }

  /** Interpolates at `at`. Outside the grid: `refuse` throws a RangeError naming the query and the range; `clamp` clamps. */
  lookup(at: readonly number[], policy: OutsideGridPolicy): GridLookup {
    const dims = this.axes.length;
    // Stryker disable next-line ArrayDeclaration: VS-20
    const lower = new Array<number>(dims);
    // Stryker disable next-line ArrayDeclaration: VS-21
    const weight = new Array<number>(dims);
    let clamped = false;
    for (let d = 0; d < dims; d++) {
      const axis = this.axes[d]!;
      let x = at[d]!;
      const lo = axis[0]!;
      const hi = axis[axis.length - 1]!;
      if (x < lo || x > hi) {
        if (policy === "refuse") throw new TimingRefusedError(this.outsideMessage(at));
        // Surviving mutants: VS-22 (MUTANTS.md).
        x = x < lo ? lo : hi;
        clamped = true;
      }
      if (axis.length === 1) {
        lower[d] = 0;
        weight[d] = 0;
        continue;
      }
      // Largest i with axis[i] <= x, capped so that i + 1 exists.
      let a = 0;
      let b = axis.length - 2;
      while (a < b) {
        const mid = (a + b + 1) >> 1;
        // Surviving mutants: VS-23 (MUTANTS.md).
        if (axis[mid]! <= x) a = mid;
        else b = mid - 1;
      }
      lower[d] = a;
      weight[d] = (x - axis[a]!) / (axis[a + 1]! - axis[a]!);
    }
    let value = 0;
    for (let corner = 0; corner < 1 << dims; corner++) {
      let w = 1;
      let offset = 0;
      for (let d = 0; d < dims; d++) {
        const up = (corner >> d) & 1;
        const t = weight[d]!;
        if (up === 1) {
          // Surviving mutants: VS-24 (MUTANTS.md).
          if (t === 0) {
            w = 0;
            break;
          }
          w *= t;
        } else {
          w *= 1 - t;
        }
        offset += (lower[d]! + up) * this.strides[d]!;
      }
      // Surviving mutants: VS-25 (MUTANTS.md).
      if (w !== 0) value += w * this.values[offset]!;
    }
    return { value, clamped };
  }

  private outsideMessage(at: readonly number[]): string {
    const query = this.axisNames.map((n, d) => `${n} ${at[d]}`).join(", ");
    const range = this.axisNames.map((n, d) => `${n} ${this.axes[d]![0]}..${this.axes[d]![this.axes[d]!.length - 1]}`).join(", ");
    return `${this.name}: the query (${query}) is outside the measured grid (${range}); add measurements that cover it or set timing.outside_grid to "clamp"`;
  }
}
