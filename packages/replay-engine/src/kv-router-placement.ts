import type { PromptTokens } from "@kvsim/kv-pool";
import type { Placed, Placement, PlacementTarget } from "./placement.js";
import { RouterRandom } from "./router-random.js";

/** Settings of Dynamo's KV router for one pool (names follow Dynamo's KvRouterConfig). */
export interface KvRouterSettings {
  /** Tokens per KV block: overlaps, prefill and active load are counted in blocks of it. */
  readonly blockSize: number;
  /** Dynamo's overlap_score_weight: weight of the prefill blocks against the active blocks; 0 skips the prefix probe. */
  readonly overlapScoreWeight: number;
  /** Dynamo's router_temperature: 0 takes the lowest cost; above 0, softmax sampling. */
  readonly temperature: number;
  /** Whether active (decode) blocks count; Dynamo's prefill router in P/D tracks none. */
  readonly trackActiveBlocks: boolean;
  readonly seed: number;
}

/** What the router booked on a worker for one request, taken back when its prefill ends and when it leaves. */
class KvRouterTicket implements Placed {
  prefillOpen = true;
  open = true;
  constructor(
    readonly index: number,
    readonly hitTokens: number,
    readonly prefillTokens: number,
    readonly blocks: number,
  ) {}
}

/**
 * Dynamo's KV router (its default worker selector, as documented for Dynamo v0.8.1; README "Routers"). For
 * each worker, with `overlap` the request's prefix blocks the worker caches:
 *
 *   prefill_blocks = (the worker's active prefill tokens + isl - overlap x block_size) / block_size
 *   decode_blocks  = the worker's active blocks + the request's full blocks - overlap
 *   cost           = overlap_score_weight x prefill_blocks + decode_blocks
 *
 * Temperature 0 takes the cheapest worker (ties at random); above 0 it samples worker i with
 * probability proportional to exp(-cost_i / ((max - min) x temperature)), uniform when all costs
 * are equal. Like Dynamo's router, the active prefill tokens and active blocks are the router's own
 * book of what it sent (not read from the engines), so requests placed in one instant see each
 * other. One difference, kept for speed: Dynamo dedups active blocks by their hashes among a
 * worker's active requests; here a request books the blocks it does not find in the worker's
 * prefix cache, which is the same whenever the shared blocks of active requests are cached.
 *
 * With overlap_score_weight 0 the prefix cache is not probed (Dynamo then runs no indexer), so
 * every full block of the request counts as new. Work per request: one prefix probe per worker
 * (none with weight 0) and O(workers) arithmetic.
 */
export class KvRouterPlacement implements Placement {
  private readonly activePrefillTokens: Float64Array;
  private readonly activeBlocks: Float64Array;
  private readonly costs: Float64Array;
  private readonly hits: Float64Array;
  private readonly random: RouterRandom;

  constructor(
    private readonly targets: readonly PlacementTarget[],
    private readonly settings: KvRouterSettings,
  ) {
    if (targets.length === 0) throw new Error("a pool needs at least one worker");
    if (!Number.isSafeInteger(settings.blockSize) || settings.blockSize < 1)
      throw new Error(`block size must be a positive integer, got ${settings.blockSize}`);
    const n = targets.length;
    this.activePrefillTokens = new Float64Array(n);
    this.activeBlocks = new Float64Array(n);
    this.costs = new Float64Array(n);
    this.hits = new Float64Array(n);
    this.random = new RouterRandom(settings.seed);
  }

  place(prompt: PromptTokens): Placed {
    const { blockSize, overlapScoreWeight, trackActiveBlocks } = this.settings;
    const isl = prompt.length;
    const fullBlocks = Math.floor(isl / blockSize);
    const n = this.targets.length;
    const costs = this.costs;
    for (let i = 0; i < n; i++) {
      const hit = overlapScoreWeight > 0 ? this.targets[i]!.prefixHitTokens(prompt) : 0;
      this.hits[i] = hit;
      const overlap = Math.floor(hit / blockSize);
      const prefillBlocks = (this.activePrefillTokens[i]! + Math.max(0, isl - overlap * blockSize)) / blockSize;
      const decodeBlocks = trackActiveBlocks ? this.activeBlocks[i]! + Math.max(0, fullBlocks - overlap) : 0;
      costs[i] = overlapScoreWeight * prefillBlocks + decodeBlocks;
    }
    const index = this.settings.temperature === 0 ? this.cheapest() : this.sample();
    const hitTokens = this.hits[index]!;
    const overlap = Math.floor(hitTokens / blockSize);
    const ticket = new KvRouterTicket(index, hitTokens, Math.max(0, isl - overlap * blockSize), trackActiveBlocks ? Math.max(0, fullBlocks - overlap) : 0);
    this.activePrefillTokens[index]! += ticket.prefillTokens;
    this.activeBlocks[index]! += ticket.blocks;
    return ticket;
  }

  prefillDone(placed: Placed): void {
    if (!(placed instanceof KvRouterTicket) || !placed.prefillOpen) return;
    placed.prefillOpen = false;
    this.activePrefillTokens[placed.index]! -= placed.prefillTokens;
  }

  finished(placed: Placed): void {
    if (!(placed instanceof KvRouterTicket)) return;
    this.prefillDone(placed);
    if (!placed.open) return;
    placed.open = false;
    this.activeBlocks[placed.index]! -= placed.blocks;
  }

  /** The lowest cost; a tie is broken at random, as Dynamo does. */
  private cheapest(): number {
    const costs = this.costs;
    let min = Infinity;
    let ties = 0;
    for (const c of costs) {
      if (c < min) {
        min = c;
        ties = 1;
      } else if (c === min) ties++;
    }
    let pick = ties === 1 ? 0 : this.random.below(ties);
    for (let i = 0; i < costs.length; i++) {
      if (costs[i] !== min) continue;
      if (pick === 0) return i;
      pick--;
    }
    throw new Error("unreachable: no worker has the lowest cost");
  }

  /** Softmax sampling over the negated costs, scaled by their spread and the temperature. */
  private sample(): number {
    const costs = this.costs;
    let min = Infinity;
    let max = -Infinity;
    for (const c of costs) {
      min = Math.min(min, c);
      max = Math.max(max, c);
    }
    const n = costs.length;
    if (min === max) return this.random.below(n);
    const scale = 1 / ((max - min) * this.settings.temperature);
    let sum = 0;
    for (const c of costs) sum += Math.exp(-(c - min) * scale);
    const u = this.random.next() * sum;
    let acc = 0;
    for (let i = 0; i < n; i++) {
      acc += Math.exp(-(costs[i]! - min) * scale);
      if (u < acc) return i;
    }
    return n - 1;
  }
}
