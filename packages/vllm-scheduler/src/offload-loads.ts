/**
 * Loads from the offload tiers (kv-offload): a waiting request whose prefix continues past its GPU
 * hit into the tiers reserves the blocks the hit fills (the per-group rules of a P/D destination,
 * docs/rules/grouped-pd.md §4), starts the load and leaves the waiting queue without a running slot
 * or token budget, as vLLM's WAITING_FOR_REMOTE_KVS; once the load is done it is served from the
 * activated queue like a P/D destination, its prefill going on from the loaded tokens.
 */
import type { OffloadHit } from "@kvsim/kv-offload";
import type { EffectsBuilder } from "./effects-builder.js";
import { destinationComputed, enterActivated } from "./handoff-commands.js";
import type { Handoff, Req, RankState } from "./rank-state.js";

/**
 * Starts loading `hit` for the waiting head `req` at `nowMs`. False, changing nothing, when the pool
 * cannot hold the hit's blocks now.
 */
export function startLoad(state: RankState, req: Req, hit: OffloadHit, fx: EffectsBuilder, nowMs: number): boolean {
  const res = state.pool.reserveDestination(req.seq, hit.tokens);
  if (res === undefined) return false;
  if (res.hitTokens !== hit.gpuHitTokens) throw new Error(`request ${req.id}: GPU hit ${res.hitTokens} at reservation, ${hit.gpuHitTokens} at lookup`);
  state.waiting.popFront();
  state.waitingLive--;
  req.phase = "loading";
  state.loading.push(req);
  beginLoad(state, req, hit, fx, nowMs);
  return true;
}

/** The tier hit past a pending destination's own GPU hit, within its transferred tokens (undefined without tiers or a hit). */
export function destinationTierHit(state: RankState, h: Handoff): OffloadHit | undefined {
  const offload = state.offload;
  if (offload === undefined || state.loading.length >= state.engine.max_num_seqs) return undefined;
  const seq = h.req.seq;
  const gpu = state.pool.findPrefixHit(seq).tokens;
  return offload.lookup(h.req.prompt, Math.min(gpu, h.transferredTokens), Math.min(seq.numTokens - 1, h.transferredTokens), offload.clockMs);
}

/**
 * Starts the tiers' part of a request's blocks loading at `nowMs` (pinned until it lands) and
 * reports it. A P/D destination's load (from its reservation, at the tiers' clock) goes into the
 * blocks the reservation holds while the handoff moves the rest; its activation waits for it.
 */
export function beginLoad(state: RankState, req: Req, hit: OffloadHit, fx: EffectsBuilder, nowMs: number): void {
  const load = state.offload!.load(hit, nowMs);
  req.load = load;
  fx.offloadLoad({
    requestId: req.id,
    gpuHitTokens: hit.gpuHitTokens,
    tokens: hit.tokens,
    tokensPerTier: hit.tokensPerTier,
    bytesPerTier: hit.bytesPerTier,
    startMs: nowMs,
    doneMs: load.doneMs,
  });
}

/**
 * Loads done by `nowMs` (in the order they started): their blocks become the request's, computed and
 * cache-visible, and the request joins the activated queue. Sets the tiers' clock to `nowMs`.
 */
export function settleLoads(state: RankState, nowMs: number): void {
  if (state.offload === undefined) return;
  // What the pool does from here (evictions while the step allocates, blocks a command makes
  // cache-visible) happens now.
  state.offload.clockMs = nowMs;
  const loading = state.loading;
  if (loading.length === 0) return;
  let w = 0;
  for (const req of loading) {
    const load = req.load!;
    if (load.doneMs > nowMs) {
      loading[w++] = req;
      continue;
    }
    state.endLoad(req);
    const h = req.handoff;
    if (h?.side === "destination") {
      // An activated destination whose tier load landed: the handoff's tokens become its own.
      enterActivated(state, req, h.transferredTokens, destinationComputed(req, h));
      continue;
    }
    // The loaded blocks become cache-visible; the tiers they came from do not store them again.
    const tokens = load.hit.tokens;
    state.offload.muted = true;
    enterActivated(state, req, tokens, tokens);
    state.offload.muted = false;
    req.loadedTokens = tokens;
  }
  loading.length = w;
}

/** When the earliest load in flight is done (Infinity when none is). */
export function nextLoadDoneMs(state: RankState): number {
  let t = Infinity;
  for (const req of state.loading) t = Math.min(t, req.load!.doneMs);
  return t;
}
