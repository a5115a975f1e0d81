import type { Placed, Placement, PlacementTarget } from "./placement.js";
import { RouterRandom } from "./router-random.js";

/** The index of the less loaded of two targets: fewer requests, then less KV in use, then the first. */
function lessLoaded(targets: readonly PlacementTarget[], a: number, b: number): number {
  const la = targets[a]!.load();
  const lb = targets[b]!.load();
  if (la !== lb) return la < lb ? a : b;
  return targets[b]!.kvUsage() < targets[a]!.kvUsage() ? b : a;
}

/** Least loaded: the worker with the fewest requests (running and waiting), then the least KV in use, then the lowest index. O(workers). */
export class LeastLoadedPlacement implements Placement {
  constructor(private readonly targets: readonly PlacementTarget[]) {
    if (targets.length === 0) throw new Error("a pool needs at least one worker");
  }
  place(): Placed {
    let best = 0;
    for (let i = 1; i < this.targets.length; i++) best = lessLoaded(this.targets, best, i);
    return { index: best, hitTokens: 0 };
  }
}

/**
 * Power of two choices: two distinct workers drawn at random (seeded), the less loaded of them
 * taken (as least_loaded compares; a full tie goes to the first drawn). O(1) per request.
 */
export class PowerOfTwoPlacement implements Placement {
  private readonly random: RouterRandom;
  constructor(
    private readonly targets: readonly PlacementTarget[],
    seed: number,
  ) {
    if (targets.length === 0) throw new Error("a pool needs at least one worker");
    this.random = new RouterRandom(seed);
  }
  place(): Placed {
    const n = this.targets.length;
    if (n === 1) return { index: 0, hitTokens: 0 };
    const a = this.random.below(n);
    // The second draw skips the first: uniform over the other n - 1 workers.
    const r = this.random.below(n - 1);
    const b = r >= a ? r + 1 : r;
    return { index: lessLoaded(this.targets, a, b), hitTokens: 0 };
  }
}
