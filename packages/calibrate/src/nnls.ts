/**
 * Non-negative least squares for a handful of unknowns: minimise |A x - y|² with x >= 0, by
 * solving the unconstrained problem on every subset of free unknowns (the others held at 0) and
 * keeping the best feasible one. Exact and deterministic; 2^k small solves (k <= 8 here).
 */

/** Solves the normal equations on the given columns; undefined when they are singular. */
function solveSubset(a: readonly (readonly number[])[], y: readonly number[], cols: readonly number[]): number[] | undefined {
  const k = cols.length;
  const m: number[][] = Array.from({ length: k }, () => new Array<number>(k + 1).fill(0));
  for (let r = 0; r < a.length; r++) {
    const row = a[r]!;
    for (let i = 0; i < k; i++) {
      const ai = row[cols[i]!]!;
      for (let j = 0; j < k; j++) m[i]![j]! += ai * row[cols[j]!]!;
      m[i]![k]! += ai * y[r]!;
    }
  }
  // Gaussian elimination with partial pivoting.
  for (let c = 0; c < k; c++) {
    let p = c;
    for (let r = c + 1; r < k; r++) if (Math.abs(m[r]![c]!) > Math.abs(m[p]![c]!)) p = r;
    const scale = Math.max(...m.map((row) => Math.abs(row[c]!)));
    if (Math.abs(m[p]![c]!) <= 1e-12 * Math.max(1, scale)) return undefined;
    [m[c], m[p]] = [m[p]!, m[c]!];
    for (let r = 0; r < k; r++) {
      if (r === c) continue;
      const f = m[r]![c]! / m[c]![c]!;
      for (let j = c; j <= k; j++) m[r]![j]! -= f * m[c]![j]!;
    }
  }
  return m.map((row, i) => row[k]! / row[i]!);
}

/** x >= 0 minimising |A x - y|²; undefined when no subset of columns is solvable. */
export function nonNegativeLeastSquares(a: readonly (readonly number[])[], y: readonly number[]): number[] | undefined {
  const n = a[0]?.length ?? 0;
  let best: { x: number[]; r: number } | undefined;
  for (let mask = 1; mask < 1 << n; mask++) {
    const cols: number[] = [];
    for (let i = 0; i < n; i++) if (mask & (1 << i)) cols.push(i);
    const sol = solveSubset(a, y, cols);
    if (sol === undefined || sol.some((v) => !(v >= 0))) continue;
    const x = new Array<number>(n).fill(0);
    cols.forEach((c, i) => (x[c] = sol[i]!));
    let r = 0;
    for (let i = 0; i < a.length; i++) {
      let p = 0;
      for (let j = 0; j < n; j++) p += a[i]![j]! * x[j]!;
      r += (p - y[i]!) ** 2;
    }
    // Ties go to the earlier (smaller) subset: deterministic.
    if (best === undefined || r < best.r - 1e-15 * Math.max(1, best.r)) best = { x, r };
  }
  return best?.x;
}
