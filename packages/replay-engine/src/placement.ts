import type { PromptTokens } from "@kvsim/kv-pool";
import type { Router } from "@kvsim/profile-schema";
import { KvRouterPlacement } from "./kv-router-placement.js";
import { LeastLoadedPlacement, PowerOfTwoPlacement } from "./load-placement.js";
import { WeightedScorerPlacement } from "./weighted-placement.js";

/** What placement needs to know about one worker of a pool. Each query is O(1) or one prefix walk. */
export interface PlacementTarget {
  /** Tokens of `prompt` the worker already holds as a prefix-cache hit. Changes nothing. */
  prefixHitTokens(prompt: PromptTokens): number;
  /** Requests on the worker (running, waiting and reserved); lower is less loaded. */
  load(): number;
  /** Share of the worker's KV pages in use, 0 to 1. */
  kvUsage(): number;
}

/** One placement: the chosen target and the hit it reported (0 when the policy did not look). */
export interface Placed {
  readonly index: number;
  readonly hitTokens: number;
}

/**
 * A router over one pool. `place` chooses a worker; policies that keep their own view of the
 * work they sent (Dynamo's KV router) also have `prefillDone` and `finished`, told when that
 * work's prefill ended and when the request left the worker (each idempotent).
 */
export interface Placement {
  place(prompt: PromptTokens): Placed;
  prefillDone?(placed: Placed): void;
  finished?(placed: Placed): void;
}

/** Role of a pool in the deployment: what Dynamo's router tracks differs by role. */
export type PoolRole = "aggregated" | "prefill" | "decode";

/** Round robin over a fixed pool: 0, 1, ..., n - 1, 0, ... Ignores cache contents. */
export class RoundRobinPlacement implements Placement {
  private next = 0;
  constructor(private readonly size: number) {
    if (!Number.isSafeInteger(size) || size < 1) throw new Error(`a pool needs at least one worker, got ${size}`);
  }
  place(): Placed {
    const index = this.next;
    this.next = (index + 1) % this.size;
    return { index, hitTokens: 0 };
  }
}

/**
 * Prefix only (kvsim's former `kv_aware`): the target with the longest prefix hit; ties go to the
 * least loaded, then to the lowest index. Sends every request that shares a prefix to one worker.
 */
export class PrefixOnlyPlacement implements Placement {
  constructor(private readonly targets: readonly PlacementTarget[]) {
    if (targets.length === 0) throw new Error("a pool needs at least one worker");
  }
  place(prompt: PromptTokens): Placed {
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

/**
 * The router of one pool. `blockSize` is the pool's KV block size in tokens (Dynamo's router
 * counts blocks of it); `role` selects what Dynamo's disaggregated router does per pool: the
 * prefill router tracks no active blocks, the decode router gives prefix overlap no weight.
 */
export function createPlacement(router: Router, targets: readonly PlacementTarget[], blockSize: number, role: PoolRole): Placement {
  switch (router.policy) {
    case "round_robin":
      return new RoundRobinPlacement(targets.length);
    case "prefix_only":
      return new PrefixOnlyPlacement(targets);
    case "kv_aware":
      return new KvRouterPlacement(targets, {
        blockSize,
        overlapScoreWeight: role === "decode" ? 0 : router.overlap_score_weight,
        temperature: router.router_temperature,
        trackActiveBlocks: role !== "prefill",
        seed: router.seed,
      });
    case "least_loaded":
      return new LeastLoadedPlacement(targets);
    case "power_of_two":
      return new PowerOfTwoPlacement(targets, router.seed);
    case "weighted":
      return new WeightedScorerPlacement(targets, {
        blockSize,
        prefixWeight: router.prefix_weight,
        queueWeight: router.queue_weight,
        kvUtilizationWeight: router.kv_utilization_weight,
        seed: router.seed,
      });
  }
}
