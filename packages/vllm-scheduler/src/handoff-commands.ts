/**
 * The P/D handoff commands of a rank (docs/rules/grouped-pd.md §3-§5): the source side on a prefill
 * rank, the destination side on a decode rank.
 */
import { promptPrefix } from "@kvsim/kv-pool";
import { tokens } from "@kvsim/profile-schema";
import { backoffTokens, transferredTokens } from "@kvsim/transfer-rules";
import type { CommandOutcome, RequestInput } from "./contract.js";
import { EffectsBuilder } from "./effects-builder.js";
import type { Handoff, Req, RankState } from "./rank-state.js";

export const fail = (reason: string): CommandOutcome => ({ ok: false, reason });

export function ok(state: RankState, result: "submitted" | "accepted" | "applied" | "noop", fx: EffectsBuilder): CommandOutcome {
  return { ok: true, result, effects: fx.build(state.takeEvents(), state.metrics()) };
}

export function invalidRequest(state: RankState, request: RequestInput): string | undefined {
  if (typeof request.id !== "string" || request.id === "") return "request id must be a non-empty string";
  if (state.requests.has(request.id)) return `request "${request.id}" is already on this rank`;
  if (request.prompt.length < 1) return `request "${request.id}": a prompt needs at least one token`;
  if (!Number.isSafeInteger(request.maxOutputTokens) || request.maxOutputTokens < 0) {
    return `request "${request.id}": maxOutputTokens must be an integer >= 0, got ${request.maxOutputTokens}`;
  }
  return undefined;
}

function invalidHandoffId(state: RankState, handoffId: string): string | undefined {
  if (typeof handoffId !== "string" || handoffId === "") return "handoff id must be a non-empty string";
  if (state.handoffs.has(handoffId) || state.retiredHandoffs.has(handoffId)) return `handoff "${handoffId}" was already used on this rank`;
  return undefined;
}

export function submitHandoffPrefill(state: RankState, handoffId: string, request: RequestInput): CommandOutcome {
  const invalid = invalidHandoffId(state, handoffId) ?? invalidRequest(state, request);
  if (invalid !== undefined) return fail(invalid);
  const fx = new EffectsBuilder();
  const n = request.prompt.length;
  // Grouped P/D: the prompt is truncated by the backoff before the request exists (docs/rules/grouped-pd.md §3).
  const t = n - backoffTokens(state.profile, tokens(n));
  // The prefill rank is asked for one token (vLLM's proxy sends max_tokens = 1); the decode rank checks the real output.
  const rejection = state.promptRejection(n, t, 1);
  if (rejection !== undefined) {
    fx.rejection(request.id, rejection);
    state.retiredHandoffs.set(handoffId, "source");
    return ok(state, "submitted", fx);
  }
  // The truncated prompt shares the whole prompt's block hashes (computed once for both sides).
  // Surviving mutants: VS-26 (MUTANTS.md).
  const prompt = t === n ? request.prompt : promptPrefix(request.prompt, t);
  // The prefill rank samples exactly one token (vLLM's proxy sends max_tokens = 1).
  const req = state.newRequest(request.id, prompt, 1, undefined);
  // Stryker disable next-line BooleanLiteral: VS-27
  const handoff: Handoff = { id: handoffId, side: "source", state: "pending", cancelled: false, req, promptTokens: n, transferredTokens: t, hitTokens: 0 };
  req.handoff = handoff;
  state.handoffs.set(handoffId, handoff);
  state.enqueueWaiting(req);
  return ok(state, "submitted", fx);
}

/** release_source (cancel = false) and cancel_source (cancel = true). */
export function releaseSource(state: RankState, handoffId: string, cancel: boolean): CommandOutcome {
  const h = state.handoffs.get(handoffId);
  const fx = new EffectsBuilder();
  if (h?.side !== "source") return state.retiredHandoffs.get(handoffId) === "source" ? ok(state, "noop", fx) : fail(`unknown source handoff "${handoffId}"`);
  // Surviving mutants: VS-28 (MUTANTS.md).
  switch (h.state) {
    case "retired":
      return ok(state, "noop", fx);
    case "held":
      state.dropRequest(h.req, cancel);
      break;
    case "pending":
      if (cancel) {
        // Stryker disable next-line BooleanLiteral: VS-29
        state.dropRequest(h.req, true);
      } else {
        // Released before it completed: the request runs on and frees its blocks at completion.
        h.req.handoff = undefined;
        // Stryker disable next-line BooleanLiteral: VS-30
        state.retireHandoff(h, false);
      }
      break;
    case "reserved":
    case "activated":
      throw new Error(`source handoff ${handoffId} in destination state ${h.state}`);
  }
  state.tryReserveDestinations(fx);
  return ok(state, "applied", fx);
}

export function reserveDestination(state: RankState, handoffId: string, request: RequestInput): CommandOutcome {
  const invalid = invalidHandoffId(state, handoffId) ?? invalidRequest(state, request);
  if (invalid !== undefined) return fail(invalid);
  const fx = new EffectsBuilder();
  const n = request.prompt.length;
  const t = transferredTokens(state.profile, tokens(n));
  const rejection = state.promptRejection(n, t, request.maxOutputTokens);
  if (rejection !== undefined) {
    fx.rejection(request.id, rejection);
    state.retiredHandoffs.set(handoffId, "destination_rejected");
    return ok(state, "accepted", fx);
  }
  const req = state.newRequest(request.id, request.prompt, request.maxOutputTokens, "pending_destination");
  // Stryker disable next-line BooleanLiteral: VS-31
  const handoff: Handoff = { id: handoffId, side: "destination", state: "pending", cancelled: false, req, promptTokens: n, transferredTokens: t, hitTokens: 0 };
  req.handoff = handoff;
  state.handoffs.set(handoffId, handoff);
  state.pendingDestinations.pushBack(handoff);
  state.pendingLive++;
  state.tryReserveDestinations(fx);
  return ok(state, "accepted", fx);
}

export function activateDestination(state: RankState, handoffId: string): CommandOutcome {
  const h = state.handoffs.get(handoffId);
  if (h?.side !== "destination") {
    switch (state.retiredHandoffs.get(handoffId)) {
      case "destination":
        return ok(state, "noop", new EffectsBuilder());
      case "destination_cancelled":
        return fail(`destination handoff "${handoffId}" was cancelled`);
      case "destination_rejected":
        return fail(`destination handoff "${handoffId}" was rejected`);
      case "source":
      case undefined:
        return fail(`unknown destination handoff "${handoffId}"`);
    }
  }
  const fx = new EffectsBuilder();
  // Surviving mutants: VS-32 (MUTANTS.md).
  switch (h.state) {
    case "pending":
      return fail(`destination handoff "${handoffId}" is not reserved yet: wait for destination_reserved`);
    case "activated":
      return ok(state, "noop", fx);
    case "retired":
      return h.cancelled ? fail(`destination handoff "${handoffId}" was cancelled`) : ok(state, "noop", fx);
    case "held":
      throw new Error(`destination handoff ${handoffId} in source state held`);
    case "reserved":
      break;
  }
  const req = h.req;
  h.state = "activated";
  state.reservedCount--;
  if (req.load !== undefined) {
    // Its prefix is still loading from an offload tier (or landed since the last step): the next
    // step activates it once the load is done.
    req.phase = "loading";
    state.loading.push(req);
    return ok(state, "applied", fx);
  }
  enterActivated(state, req, h.transferredTokens, destinationComputed(req, h));
  return ok(state, "applied", fx);
}

/**
 * The decode rank computes exactly one token before it samples: the last prompt token (a
 * Mamba-type model received N - 1) or the recomputed last token (attention-only received N).
 */
export function destinationComputed(req: Req, h: Handoff): number {
  return Math.min(h.transferredTokens, req.promptTokens - 1);
}

/**
 * The reserved blocks of `tokens` tokens become the request's, computed and cache-visible (a P/D
 * destination's handoff, or a load from the offload tiers), and it joins the activated queue with
 * `computed` tokens computed.
 */
export function enterActivated(state: RankState, req: Req, tokens: number, computed: number): void {
  state.pool.activateDestination(req.seq, tokens);
  req.computed = computed;
  req.phase = "activated";
  state.activated.pushBack(req);
  state.activatedLive++;
}

export function cancelDestination(state: RankState, handoffId: string): CommandOutcome {
  const h = state.handoffs.get(handoffId);
  const fx = new EffectsBuilder();
  if (h?.side !== "destination") {
    return state.retiredHandoffs.get(handoffId)?.startsWith("destination") === true
      ? ok(state, "noop", fx)
      : fail(`unknown destination handoff "${handoffId}"`);
  }
  // Surviving mutants: VS-33 (MUTANTS.md).
  if (h.state === "retired") return ok(state, "noop", fx);
  state.dropRequest(h.req, true);
  state.tryReserveDestinations(fx);
  return ok(state, "applied", fx);
}
