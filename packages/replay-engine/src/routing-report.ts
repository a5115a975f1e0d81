import type { RouterPolicy } from "@kvsim/profile-schema";

/** One worker of a pool: what the router sent it. */
export interface RoutingWorker {
  /** Requests placed on the worker. */
  readonly requests: number;
  /** Prompt tokens the worker computed at admission (prompt minus its prefix-cache hit), for requests that got that far. */
  readonly prefill_tokens: number;
}

/** How one pool's requests spread over its workers. */
export interface RoutingPool {
  readonly workers: readonly RoutingWorker[];
  /** The busiest worker's share of the pool's requests, and the fair share (1 / workers). */
  readonly max_request_share: number;
  readonly fair_share: number;
  /** Present when one worker took far above its fair share while another idled. */
  readonly imbalance?: string;
}

/** The report's `routing` section (outside the digest): the policy and each pool's spread. */
export interface RoutingReport {
  readonly policy: RouterPolicy;
  readonly aggregated?: RoutingPool;
  readonly prefill?: RoutingPool;
  readonly decode?: RoutingPool;
}

/** The busiest worker at or above this multiple of the fair share, with another idle, is an imbalance. */
export const IMBALANCE_SHARE_FACTOR = 1.5;
/** A worker with at most this fraction of the fair share counts as idle. */
export const IDLE_SHARE_FACTOR = 0.1;
/** Fewer requests than this many per worker give no verdict. */
export const IMBALANCE_MIN_REQUESTS_PER_WORKER = 2;

/** Counts, per worker of one pool, the requests placed and the prompt tokens computed. O(1) per event. */
export class RoutingTally {
  private readonly requests: Float64Array;
  private readonly prefillTokens: Float64Array;

  constructor(readonly size: number) {
    this.requests = new Float64Array(size);
    this.prefillTokens = new Float64Array(size);
  }

  placed(index: number): void {
    this.requests[index]!++;
  }

  computed(index: number, tokens: number): void {
    this.prefillTokens[index]! += tokens;
  }

  /** The pool's spread; `label` names its workers in the imbalance warning ("worker", "prefill worker"). */
  report(label: string): RoutingPool {
    const n = this.size;
    const workers = Array.from({ length: n }, (_, i) => ({ requests: this.requests[i]!, prefill_tokens: this.prefillTokens[i]! }));
    let total = 0;
    let busiest = 0;
    let idlest = 0;
    for (let i = 0; i < n; i++) {
      total += this.requests[i]!;
      if (this.requests[i]! > this.requests[busiest]!) busiest = i;
      if (this.requests[i]! < this.requests[idlest]!) idlest = i;
    }
    const fair = 1 / n;
    const maxShare = total === 0 ? 0 : this.requests[busiest]! / total;
    const minShare = total === 0 ? 0 : this.requests[idlest]! / total;
    const pool: RoutingPool = { workers, max_request_share: maxShare, fair_share: fair };
    if (n < 2 || total < IMBALANCE_MIN_REQUESTS_PER_WORKER * n) return pool;
    if (maxShare < IMBALANCE_SHARE_FACTOR * fair || minShare > IDLE_SHARE_FACTOR * fair) return pool;
    const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
    return {
      ...pool,
      imbalance: `${label} ${busiest} took ${pct(maxShare)} of the requests (fair share ${pct(fair)}) while ${label} ${idlest} took ${pct(minShare)}: the router concentrates the load`,
    };
  }
}
