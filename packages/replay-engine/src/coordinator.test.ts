import { bytes, tokens } from "@kvsim/profile-schema";
import type { TransferTerms } from "@kvsim/transfer-rules";
import { describe, expect, it } from "vitest";
import { HandoffCoordinator, type HandoffAction, type PricedTransfer, type TransferPricer } from "./coordinator.js";

// Linear terms for a 4-token prompt at 1,000,000 B/token, full_prompt, 1 GB/s.
const terms: TransferTerms = {
  unit: "token",
  mode: "full_prompt",
  bandwidthGbps: 1,
  backoffTokens: tokens(0),
  transferredTokens: tokens(4),
  promptUnits: tokens(4),
  bytesPerUnit: bytes(1_000_000),
  fixedBytes: bytes(0),
};
// A stand-in pricer: 4 x 10^6 B at 10^9 B/s = 4 ms; records the hit it was asked about.
const hits: number[] = [];
const pricer: TransferPricer = (t, hit) => {
  hits.push(hit);
  return {
    terms: { ...t, missing: { units: tokens(4), fixedBytes: bytes(0) } } as TransferTerms,
    payloadBytes: 4_000_000,
    delayMs: t.bandwidthGbps === undefined ? undefined : 4,
  };
};
const ok = (action: "submit_prefill" | "reserve_destination" | "activate_destination" | "release_source", atMs: number) => ({
  type: "outcome" as const,
  action,
  atMs,
  ok: true as const,
});

describe("HandoffCoordinator: source first", () => {
  it("walks submit -> held -> reserve -> reserved -> transfer -> activate -> release -> complete, keeping every time", () => {
    const h = new HandoffCoordinator("r1", pricer, 7);
    const seen: HandoffAction[] = [];
    seen.push(...h.on({ type: "start", atMs: 0 }));
    seen.push(...h.on(ok("submit_prefill", 0)));
    seen.push(...h.on({ type: "source_held", atMs: 10, terms }));
    seen.push(...h.on(ok("reserve_destination", 10)));
    seen.push(...h.on({ type: "destination_reserved", atMs: 10, hitTokens: 0 }));
    seen.push(...h.on({ type: "transfer_completed", atMs: 14 }));
    seen.push(...h.on(ok("activate_destination", 14)));
    seen.push(...h.on(ok("release_source", 14)));
    expect(seen).toEqual([
      { type: "submit_prefill" },
      { type: "reserve_destination" },
      { type: "start_transfer", delayMs: 4 },
      { type: "activate_destination" },
      { type: "release_source" },
      { type: "complete", ok: true },
    ]);
    expect(h.phase).toBe("complete");
    expect(h.times).toEqual({ sourceHeldMs: 10, destinationReservedMs: 10, transferDoneMs: 14, destinationActivatedMs: 14, sourceReleasedMs: 14 });
    expect(h.delayMs).toBe(4);
    expect(h.priced?.payloadBytes).toBe(4_000_000);
    expect(hits.at(-1)).toBe(0);
  });

  it("uses the fallback latency when the terms have no bandwidth", () => {
    const h = new HandoffCoordinator("r2", pricer, 7.5);
    h.on({ type: "start", atMs: 0 });
    h.on(ok("submit_prefill", 0));
    h.on({ type: "source_held", atMs: 3, terms: { ...terms, bandwidthGbps: undefined } });
    h.on(ok("reserve_destination", 3));
    expect(h.on({ type: "destination_reserved", atMs: 3, hitTokens: 16 })).toEqual([{ type: "start_transfer", delayMs: 7.5 }]);
    expect(hits.at(-1)).toBe(16);
  });
});

describe("HandoffCoordinator: cleanup on failure", () => {
  const upToHeld = (h: HandoffCoordinator) => {
    h.on({ type: "start", atMs: 0 });
    h.on(ok("submit_prefill", 0));
    h.on({ type: "source_held", atMs: 10, terms });
  };
  it("a refused submission fails with nothing to cancel", () => {
    const h = new HandoffCoordinator("a", pricer, 0);
    h.on({ type: "start", atMs: 0 });
    expect(h.on({ type: "outcome", action: "submit_prefill", atMs: 0, ok: false, reason: "no" })).toEqual([
      { type: "complete", ok: false, reason: "prefill submission refused: no" },
    ]);
    expect(h.phase).toBe("failed");
  });
  it("a prefill rank failure cancels the source only", () => {
    const h = new HandoffCoordinator("b", pricer, 0);
    h.on({ type: "start", atMs: 0 });
    h.on(ok("submit_prefill", 0));
    expect(h.on({ type: "failed", atMs: 5, reason: "rejected" })).toEqual([{ type: "cancel_source" }, { type: "complete", ok: false, reason: "rejected" }]);
  });
  it("a refused reservation cancels the source and keeps the reason", () => {
    const h = new HandoffCoordinator("c", pricer, 0);
    upToHeld(h);
    expect(h.on({ type: "outcome", action: "reserve_destination", atMs: 10, ok: false, reason: "prompt exceeds the pool" })).toEqual([
      { type: "cancel_source" },
      { type: "complete", ok: false, reason: "destination refused the reservation: prompt exceeds the pool" },
    ]);
    expect(h.failureReason).toBe("destination refused the reservation: prompt exceeds the pool");
  });
  it("a failure during the transfer cancels source and destination; later outcomes are ignored", () => {
    const h = new HandoffCoordinator("d", pricer, 0);
    upToHeld(h);
    h.on(ok("reserve_destination", 10));
    h.on({ type: "destination_reserved", atMs: 10, hitTokens: 0 });
    expect(h.on({ type: "failed", atMs: 12, reason: "lost" })).toEqual([
      { type: "cancel_source" },
      { type: "cancel_destination" },
      { type: "complete", ok: false, reason: "lost" },
    ]);
    expect(h.on(ok("activate_destination", 13))).toEqual([]);
  });
  it("a failure after completion cancels only the destination (the decode rank owns the request)", () => {
    const h = new HandoffCoordinator("e", pricer, 0);
    upToHeld(h);
    h.on(ok("reserve_destination", 10));
    h.on({ type: "destination_reserved", atMs: 10, hitTokens: 0 });
    h.on({ type: "transfer_completed", atMs: 14 });
    h.on(ok("activate_destination", 14));
    h.on(ok("release_source", 14));
    expect(h.on({ type: "failed", atMs: 20, reason: "decode rejected" })).toEqual([
      { type: "cancel_destination" },
      { type: "complete", ok: false, reason: "decode rejected" },
    ]);
  });
});

describe("HandoffCoordinator: broken invariants throw", () => {
  it("source held before the prefill was acknowledged", () => {
    const h = new HandoffCoordinator("x", pricer, 0);
    h.on({ type: "start", atMs: 0 });
    expect(() => h.on({ type: "source_held", atMs: 1, terms })).toThrow(/source_held is not expected in phase submitting/);
  });
  it("a transfer completion before the transfer started", () => {
    const h = new HandoffCoordinator("y", pricer, 0);
    h.on({ type: "start", atMs: 0 });
    h.on(ok("submit_prefill", 0));
    expect(() => h.on({ type: "transfer_completed", atMs: 1 })).toThrow(/not expected in phase prefilling/);
  });
  it("a negative delay from the pricer", () => {
    const bad: TransferPricer = (t): PricedTransfer => ({ terms: t, payloadBytes: 0, delayMs: -1 });
    const h = new HandoffCoordinator("z", bad, 0);
    h.on({ type: "start", atMs: 0 });
    h.on(ok("submit_prefill", 0));
    h.on({ type: "source_held", atMs: 1, terms });
    h.on(ok("reserve_destination", 1));
    expect(() => h.on({ type: "destination_reserved", atMs: 1, hitTokens: 0 })).toThrow(/finite and >= 0/);
  });
});
