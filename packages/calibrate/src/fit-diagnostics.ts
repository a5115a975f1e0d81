/**
 * A fit that fails says so: whether the fit part's own TPOT and TTFT means are reproduced, and
 * whether the data determine each fitted term, from the Jacobian of the fit part's relative errors
 * with respect to the log of each parameter (finite differences, one replay per parameter).
 */

/** Something a calibration's user must know about its fit. */
export interface FitWarning {
  /**
   * missed_target: the fit part's TPOT or TTFT mean is off by more than {@link MISS_TOLERANCE};
   * indistinguishable: a combination of terms barely moves the errors (the data cannot tell them
   * apart); undetermined: one term barely moves them; unused: no run exercises the term;
   * no_floor: the linear fit has no physical floor for its per-token terms; excluded: a stage was
   * left out of the fit; at_bound: an efficiency reached its cap of 1.
   */
  readonly kind: "missed_target" | "indistinguishable" | "undetermined" | "unused" | "no_floor" | "excluded" | "at_bound";
  readonly message: string;
  /** What data would settle it. */
  readonly settle?: string;
  /** The terms concerned. */
  readonly terms?: readonly string[];
}

/** The fit part's own TPOT or TTFT mean missed by more than this (relative) is a failed fit. */
export const MISS_TOLERANCE = 0.1;

/**
 * A direction in log-parameter space along which a move by a factor e changes the fit part's
 * errors (the Euclidean norm of every relative error) by less than this is not determined.
 */
export const FLAT_TOLERANCE = 0.03;

/** The fit part's own means of one run (or stage), as signed relative errors (null: not measured). */
export interface OwnTargets {
  readonly label: string;
  readonly tpotMeanError: number | null;
  readonly ttftMeanError: number | null;
}

const pct = (e: number): string => `${e >= 0 ? "+" : ""}${(e * 100).toFixed(1)}%`;

/** Warnings for fit parts whose own TPOT or TTFT mean the fitted timing misses by more than 10%. */
export function missedTargetWarnings(rows: readonly OwnTargets[]): FitWarning[] {
  const out: FitWarning[] = [];
  for (const r of rows) {
    if (r.tpotMeanError !== null && Math.abs(r.tpotMeanError) > MISS_TOLERANCE) {
      out.push({
        kind: "missed_target",
        message: `${r.label}: the fitted timing misses the fit part's own TPOT mean by ${pct(r.tpotMeanError)} (more than ${MISS_TOLERANCE * 100}%): the fit failed on the data it was given`,
        settle:
          "runs at a lower and a higher load (the decode step's cost per running request and per KV token then separate), or a timing model with the missing term",
      });
    }
    if (r.ttftMeanError !== null && Math.abs(r.ttftMeanError) > MISS_TOLERANCE) {
      out.push({
        kind: "missed_target",
        message: `${r.label}: the fitted timing misses the fit part's own TTFT mean by ${pct(r.ttftMeanError)} (more than ${MISS_TOLERANCE * 100}%): the fit failed on the data it was given`,
        settle:
          "a run at low load with short prompts and one with long prompts (the prefill cost per token, the per-step cost and the front end then separate)",
      });
    }
  }
  return out;
}

/** Eigenvalues and unit eigenvectors (columns of `vectors`) of a symmetric matrix, by cyclic Jacobi rotations. */
export function symmetricEigen(matrix: readonly (readonly number[])[]): { values: number[]; vectors: number[][] } {
  const n = matrix.length;
  const a = matrix.map((r) => [...r]);
  const v: number[][] = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? 1 : 0)));
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    for (let p = 0; p < n; p++) for (let q = p + 1; q < n; q++) off += a[p]![q]! ** 2;
    if (off < 1e-30) break;
    for (let p = 0; p < n; p++) {
      for (let q = p + 1; q < n; q++) {
        const apq = a[p]![q]!;
        if (Math.abs(apq) < 1e-300) continue;
        // The rotation angle that zeroes a[p][q]: tan 2phi = 2 apq / (aqq - app).
        const theta = (a[q]![q]! - a[p]![p]!) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < n; k++) {
          const akp = a[k]![p]!;
          const akq = a[k]![q]!;
          a[k]![p] = c * akp - s * akq;
          a[k]![q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = a[p]![k]!;
          const aqk = a[q]![k]!;
          a[p]![k] = c * apk - s * aqk;
          a[q]![k] = s * apk + c * aqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = v[k]![p]!;
          const vkq = v[k]![q]!;
          v[k]![p] = c * vkp - s * vkq;
          v[k]![q] = s * vkp + c * vkq;
        }
      }
    }
  }
  return { values: a.map((r, i) => r[i]!), vectors: v };
}

/**
 * Which fitted terms the data do not determine. `jacobian[k][j]` is the change of relative error k
 * per unit change of log parameter j. A term whose own column moves the errors by less than
 * {@link FLAT_TOLERANCE} per factor e is undetermined; among the rest, each direction of JᵀJ with
 * sqrt(eigenvalue) below it names the terms that trade off along it (components of at least 0.3).
 * `advice` says, per term, what data would pin it down.
 */
export function identifiabilityWarnings(
  jacobian: readonly (readonly number[])[],
  names: readonly string[],
  advice: Readonly<Record<string, string>>,
  scope: string,
): FitWarning[] {
  const out: FitWarning[] = [];
  const n = names.length;
  const colNorm = (j: number) => Math.sqrt(jacobian.reduce((s, row) => s + row[j]! ** 2, 0));
  const live: number[] = [];
  for (let j = 0; j < n; j++) {
    const norm = colNorm(j);
    if (norm < FLAT_TOLERANCE) {
      out.push({
        kind: "undetermined",
        message: `${scope}: ${names[j]} is not determined by these runs (a factor e on it moves the fit part's errors by ${(norm * 100).toFixed(1)}%): it stays near its start`,
        settle: advice[names[j]!] ?? "a run that exercises it",
        terms: [names[j]!],
      });
    } else {
      live.push(j);
    }
  }
  if (live.length < 2) return out;
  const jtj = live.map((a) => live.map((b) => jacobian.reduce((s, row) => s + row[a]! * row[b]!, 0)));
  const { values, vectors } = symmetricEigen(jtj);
  // Several flat directions over the same terms (both their sum and their difference) say one thing.
  const said = new Set<string>();
  values.forEach((lambda, e) => {
    const size = Math.sqrt(Math.max(0, lambda));
    if (size >= FLAT_TOLERANCE) return;
    const comps = live
      .map((j, i) => ({ name: names[j]!, w: vectors[i]![e]! }))
      .filter((c) => Math.abs(c.w) >= 0.3)
      .sort((x, y) => Math.abs(y.w) - Math.abs(x.w));
    if (comps.length < 2) return;
    const up = comps.filter((c) => c.w > 0).map((c) => c.name);
    const down = comps.filter((c) => c.w < 0).map((c) => c.name);
    const move =
      up.length > 0 && down.length > 0
        ? `raising ${up.join(" and ")} while lowering ${down.join(" and ")}`
        : `moving ${comps.map((c) => c.name).join(" and ")} together`;
    const terms = comps.map((c) => c.name);
    const key = [...terms].sort().join("\n");
    if (said.has(key)) return;
    said.add(key);
    out.push({
      kind: "indistinguishable",
      message: `${scope}: ${terms.join(" and ")} cannot be told apart: ${move} by a factor e changes the fit part's errors by ${(size * 100).toFixed(1)}% (the fit part may see only one batch regime, e.g. saturated steps)`,
      settle: [...new Set(terms.map((t) => advice[t] ?? "a run that exercises it"))].join("; or "),
      terms,
    });
  });
  return out;
}
