/**
 * Nelder-Mead minimisation of an async objective (each evaluation is a replay). The npm
 * implementations take synchronous functions only. Standard coefficients: reflection 1, expansion
 * 2, contraction 0.5, shrink 0.5. Deterministic.
 */
export interface NelderMeadOptions {
  /** Initial simplex: the start plus `step` along each axis. */
  readonly step: number;
  readonly maxEvaluations: number;
  /** Stops when the simplex's objective values differ by less than this. */
  readonly tolerance: number;
}

export interface NelderMeadResult {
  readonly x: readonly number[];
  readonly f: number;
  readonly evaluations: number;
}

export async function nelderMead(f: (x: readonly number[]) => Promise<number>, start: readonly number[], opts: NelderMeadOptions): Promise<NelderMeadResult> {
  const n = start.length;
  let evaluations = 0;
  const evalAt = async (x: number[]) => {
    evaluations++;
    return { x, f: await f(x) };
  };
  let simplex: { x: number[]; f: number }[] = [await evalAt([...start])];
  for (let i = 0; i < n; i++) {
    const x = [...start];
    x[i]! += opts.step;
    simplex.push(await evalAt(x));
  }
  const combine = (a: readonly number[], b: readonly number[], t: number) => a.map((v, i) => v + t * (b[i]! - v));
  while (evaluations < opts.maxEvaluations) {
    simplex.sort((p, q) => p.f - q.f);
    const bestP = simplex[0]!;
    const worst = simplex[n]!;
    if (Math.abs(worst.f - bestP.f) <= opts.tolerance) break;
    const centroid = new Array<number>(n).fill(0);
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) centroid[j]! += simplex[i]!.x[j]! / n;
    const reflected = await evalAt(combine(centroid, worst.x, -1));
    if (reflected.f < bestP.f) {
      const expanded = evaluations < opts.maxEvaluations ? await evalAt(combine(centroid, worst.x, -2)) : reflected;
      simplex[n] = expanded.f < reflected.f ? expanded : reflected;
    } else if (reflected.f < simplex[n - 1]!.f) {
      simplex[n] = reflected;
    } else {
      const outside = reflected.f < worst.f;
      if (evaluations >= opts.maxEvaluations) break;
      const contracted = await evalAt(combine(centroid, worst.x, outside ? -0.5 : 0.5));
      if (contracted.f < (outside ? reflected.f : worst.f)) {
        simplex[n] = contracted;
      } else {
        const shrunk = [bestP];
        for (let i = 1; i <= n; i++) {
          if (evaluations >= opts.maxEvaluations) {
            shrunk.push(simplex[i]!);
            continue;
          }
          shrunk.push(await evalAt(combine(bestP.x, simplex[i]!.x, 0.5)));
        }
        simplex = shrunk;
      }
    }
  }
  simplex.sort((p, q) => p.f - q.f);
  return { x: simplex[0]!.x, f: simplex[0]!.f, evaluations };
}
