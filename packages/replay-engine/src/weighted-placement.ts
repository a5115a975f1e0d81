import type { PromptTokens } from "@kvsim/kv-pool";
import type { Placed, Placement, PlacementTarget } from "./placement.js";
import { RouterRandom } from "./router-random.js";

export interface WeightedScorerSettings {
  readonly blockSize: number;
  readonly prefixWeight: number;
  readonly queueWeight: number;
  readonly kvUtilizationWeight: number;
  readonly seed: number;
}

/**
 * A weighted sum of scorers in the style of llm-d's inference scheduler, each score in [0, 1]
 * and higher better: prefix (the share of the prompt's full blocks the worker caches), queue
 * (requests on the worker, min-max normalised over the pool: the least loaded scores 1, the most 0,
 * all 1 when equal) and KV utilisation (1 - the share of its KV pages in use). The highest total
 * wins; ties at random (seeded). One prefix probe per worker (none with prefix weight 0).
 */
export class WeightedScorerPlacement implements Placement {
  private readonly loads: Float64Array;
  private readonly totals: Float64Array;
  private readonly random: RouterRandom;

  constructor(
    private readonly targets: readonly PlacementTarget[],
    private readonly settings: WeightedScorerSettings,
  ) {
    if (targets.length === 0) throw new Error("a pool needs at least one worker");
    this.loads = new Float64Array(targets.length);
    this.totals = new Float64Array(targets.length);
    this.random = new RouterRandom(settings.seed);
  }

  place(prompt: PromptTokens): Placed {
    const { blockSize, prefixWeight, queueWeight, kvUtilizationWeight } = this.settings;
    const n = this.targets.length;
    const fullBlocks = Math.floor(prompt.length / blockSize);
    let minLoad = Infinity;
    let maxLoad = -Infinity;
    for (let i = 0; i < n; i++) {
      const l = this.targets[i]!.load();
      this.loads[i] = l;
      minLoad = Math.min(minLoad, l);
      maxLoad = Math.max(maxLoad, l);
    }
    let best = -Infinity;
    let ties = 0;
    for (let i = 0; i < n; i++) {
      const t = this.targets[i]!;
      const prefix = prefixWeight > 0 && fullBlocks > 0 ? Math.min(1, Math.floor(t.prefixHitTokens(prompt) / blockSize) / fullBlocks) : 0;
      const queue = maxLoad === minLoad ? 1 : (maxLoad - this.loads[i]!) / (maxLoad - minLoad);
      const kv = 1 - t.kvUsage();
      const total = prefixWeight * prefix + queueWeight * queue + kvUtilizationWeight * kv;
      this.totals[i] = total;
      if (total > best) {
        best = total;
        ties = 1;
      } else if (total === best) ties++;
    }
    let pick = ties === 1 ? 0 : this.random.below(ties);
    for (let i = 0; i < n; i++) {
      if (this.totals[i] !== best) continue;
      if (pick === 0) return { index: i, hitTokens: prefixWeight > 0 ? this.targets[i]!.prefixHitTokens(prompt) : 0 };
      pick--;
    }
    throw new Error("unreachable: no worker has the best score");
  }
}
