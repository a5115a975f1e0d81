import type { PromptTokens } from "@kvsim/kv-pool";
import type { Router } from "@kvsim/profile-schema";

/** What placement needs to know about one rank of a pool. */
export interface PlacementTarget {
  /** Tokens of `prompt` the rank already holds as a prefix-cache hit. Changes nothing. */
  prefixHitTokens(prompt: PromptTokens): number;
  /** Requests on the rank (running, waiting and reserved); lower is less loaded. */
  load(): number;
}

export interface Placement {
  /** The index of the chosen target, and the hit it reported (0 for round robin). */
  place(prompt: PromptTokens): { readonly index: number; readonly hitTokens: number };
}

/** Round robin over a fixed pool: 0, 1, ..., n - 1, 0, ... Ignores cache contents. */
export class RoundRobinPlacement implements Placement {
  private next = 0;
  constructor(private readonly size: number) {
    if (!Number.isSafeInteger(size) || size < 1) throw new Error(`a pool needs at least one worker, got ${size}`);
  }
  place(): { index: number; hitTokens: number } {
    const index = this.next;
    this.next = (index + 1) % this.size;
    return { index, hitTokens: 0 };
  }
}

/**
 * KV-aware: the target with the longest prefix hit for the prompt; ties go to the least loaded,
 * then to the lowest index. Work is one hit probe per target (a walk of the prompt's block
 * hashes), independent of pool and queue sizes.
 */
export class KvAwarePlacement implements Placement {
  constructor(private readonly targets: readonly PlacementTarget[]) {
    if (targets.length === 0) throw new Error("a pool needs at least one worker");
  }
  place(prompt: PromptTokens): { index: number; hitTokens: number } {
    let best = 0;
    let bestHit = -1;
    let bestLoad = Infinity;
    this.targets.forEach((t, i) => {
      const hit = t.prefixHitTokens(prompt);
      if (hit < bestHit) return;
      const load = t.load();
      if (hit > bestHit || load < bestLoad) {
        best = i;
        bestHit = hit;
        bestLoad = load;
      }
    });
    return { index: best, hitTokens: bestHit };
  }
}

export function createPlacement(router: Router, targets: readonly PlacementTarget[]): Placement {
  switch (router) {
    case "round_robin":
      return new RoundRobinPlacement(targets.length);
    case "kv_aware":
      return new KvAwarePlacement(targets);
  }
}
