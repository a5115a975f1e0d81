import type { TransferTerms } from "@kvsim/transfer-rules";

/** A handoff priced once its destination is known. */
export interface PricedTransfer {
  /** The source's terms with the destination's missing units filled in. */
  readonly terms: TransferTerms;
  /** Bytes moved (by the terms' mode). */
  readonly payloadBytes: number;
  /** Undefined when the terms carry no bandwidth: no modelled delay. */
  readonly delayMs: number | undefined;
}

/** Prices source terms against the destination's own prefix hit (in tokens). */
export type TransferPricer = (terms: TransferTerms, destinationHitTokens: number) => PricedTransfer;

/** What the coordinator asks its driver to do, in order. */
export type HandoffAction =
  | { readonly type: "submit_prefill" }
  | { readonly type: "reserve_destination" }
  | { readonly type: "start_transfer"; readonly delayMs: number }
  | { readonly type: "activate_destination" }
  | { readonly type: "release_source" }
  | { readonly type: "cancel_source" }
  | { readonly type: "cancel_destination" }
  | { readonly type: "complete"; readonly ok: true }
  | { readonly type: "complete"; readonly ok: false; readonly reason: string };

/** Actions whose command outcome the driver reports back. */
export type CommandAction = "submit_prefill" | "reserve_destination" | "activate_destination" | "release_source";

/** What the driver tells the coordinator: command outcomes and rank facts, each with its time. */
export type HandoffInput =
  | { readonly type: "start"; readonly atMs: number }
  | { readonly type: "outcome"; readonly action: CommandAction; readonly atMs: number; readonly ok: true }
  | { readonly type: "outcome"; readonly action: CommandAction; readonly atMs: number; readonly ok: false; readonly reason: string }
  | { readonly type: "source_held"; readonly atMs: number; readonly terms: TransferTerms }
  | { readonly type: "destination_reserved"; readonly atMs: number; readonly hitTokens: number }
  | { readonly type: "transfer_completed"; readonly atMs: number }
  | { readonly type: "failed"; readonly atMs: number; readonly reason: string };

export type HandoffPhase =
  "new" | "submitting" | "prefilling" | "reserving" | "awaiting_reservation" | "transferring" | "activating" | "releasing" | "complete" | "failed";

/** Timestamps of one handoff (virtual ms); absent until reached. */
export interface HandoffTimes {
  sourceHeldMs?: number;
  destinationReservedMs?: number;
  transferDoneMs?: number;
  destinationActivatedMs?: number;
  sourceReleasedMs?: number;
}

/**
 * The handoff coordinator of one P/D request (docs/rules/replay.md §7; source first, as vLLM): submit the
 * prefill; on source held reserve the destination; on destination reserved price the transfer
 * against the destination's hit and start it (no bandwidth: the fallback latency; plus the setup
 * latency); on transfer
 * done activate the destination, then release the source, then complete. Any failure cancels what
 * was set up (the source if a prefill was submitted and not released, the destination if a
 * reservation was accepted) and completes with the reason.
 *
 * Pure: it only records and answers; the driver runs the actions and reports outcomes and facts.
 * An input that cannot happen in the current phase is a broken invariant and throws.
 */
export class HandoffCoordinator {
  private phaseNow: HandoffPhase = "new";
  private sourceLive = false;
  private destinationLive = false;
  private failure: string | undefined;
  private pricedTransfer: PricedTransfer | undefined;
  private delay: number | undefined;
  private terms: TransferTerms | undefined;
  readonly times: HandoffTimes = {};

  /**
   * `setupLatencyMs` is added to every delay (the spec's per-transfer setup latency on the private
   * pipe; 0 when a shared network times the transfer instead).
   */
  constructor(
    readonly handoffId: string,
    private readonly price: TransferPricer,
    private readonly fallbackLatencyMs: number,
    private readonly setupLatencyMs = 0,
  ) {}

  get phase(): HandoffPhase {
    return this.phaseNow;
  }
  /** The priced transfer, once the destination is reserved. */
  get priced(): PricedTransfer | undefined {
    return this.pricedTransfer;
  }
  /** The transfer delay used (the fallback latency when the terms had no bandwidth). */
  get delayMs(): number | undefined {
    return this.delay;
  }
  get failureReason(): string | undefined {
    return this.failure;
  }

  on(input: HandoffInput): HandoffAction[] {
    if (this.phaseNow === "failed") return input.type === "failed" || input.type === "outcome" ? [] : this.unexpected(input);
    if (input.type === "failed") return this.fail(input.reason);
    switch (this.phaseNow) {
      case "new":
        if (input.type !== "start") return this.unexpected(input);
        this.phaseNow = "submitting";
        return [{ type: "submit_prefill" }];
      case "submitting":
        if (input.type !== "outcome" || input.action !== "submit_prefill") return this.unexpected(input);
        if (!input.ok) return this.fail(`prefill submission refused: ${input.reason}`);
        this.sourceLive = true;
        this.phaseNow = "prefilling";
        return [];
      case "prefilling":
        if (input.type !== "source_held") return this.unexpected(input);
        this.times.sourceHeldMs = input.atMs;
        this.terms = input.terms;
        this.phaseNow = "reserving";
        return [{ type: "reserve_destination" }];
      case "reserving":
        if (input.type !== "outcome" || input.action !== "reserve_destination") return this.unexpected(input);
        if (!input.ok) return this.fail(`destination refused the reservation: ${input.reason}`);
        this.destinationLive = true;
        this.phaseNow = "awaiting_reservation";
        return [];
      case "awaiting_reservation": {
        if (input.type !== "destination_reserved") return this.unexpected(input);
        this.times.destinationReservedMs = input.atMs;
        const priced = this.price(this.terms!, input.hitTokens);
        const wire = priced.delayMs ?? this.fallbackLatencyMs;
        const delay = this.setupLatencyMs === 0 ? wire : this.setupLatencyMs + wire;
        if (!Number.isFinite(delay) || delay < 0) throw new Error(`handoff ${this.handoffId}: transfer delay must be finite and >= 0, got ${delay}`);
        this.pricedTransfer = priced;
        this.delay = delay;
        this.phaseNow = "transferring";
        return [{ type: "start_transfer", delayMs: delay }];
      }
      case "transferring":
        if (input.type !== "transfer_completed") return this.unexpected(input);
        this.times.transferDoneMs = input.atMs;
        this.phaseNow = "activating";
        return [{ type: "activate_destination" }];
      case "activating":
        if (input.type !== "outcome" || input.action !== "activate_destination") return this.unexpected(input);
        if (!input.ok) return this.fail(`destination activation refused: ${input.reason}`);
        this.times.destinationActivatedMs = input.atMs;
        this.phaseNow = "releasing";
        return [{ type: "release_source" }];
      case "releasing":
        if (input.type !== "outcome" || input.action !== "release_source") return this.unexpected(input);
        if (!input.ok) throw new Error(`handoff ${this.handoffId}: releasing the source failed after activation: ${input.reason}`);
        this.sourceLive = false;
        this.times.sourceReleasedMs = input.atMs;
        this.phaseNow = "complete";
        return [{ type: "complete", ok: true }];
      case "complete":
        return this.unexpected(input);
    }
  }

  private fail(reason: string): HandoffAction[] {
    if (this.phaseNow === "complete") {
      // The decode rank owns the request now; only the destination is left to cancel.
      this.phaseNow = "failed";
      this.failure = reason;
      return [{ type: "cancel_destination" }, { type: "complete", ok: false, reason }];
    }
    const actions: HandoffAction[] = [];
    if (this.sourceLive) actions.push({ type: "cancel_source" });
    if (this.destinationLive) actions.push({ type: "cancel_destination" });
    this.sourceLive = false;
    this.destinationLive = false;
    this.phaseNow = "failed";
    this.failure = reason;
    actions.push({ type: "complete", ok: false, reason });
    return actions;
  }

  private unexpected(input: HandoffInput): never {
    const what = input.type === "outcome" ? `outcome of ${input.action}` : input.type;
    throw new Error(`handoff ${this.handoffId}: ${what} is not expected in phase ${this.phaseNow}`);
  }
}
