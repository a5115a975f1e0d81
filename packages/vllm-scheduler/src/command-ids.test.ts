import { describe, expect, it } from "vitest";
import { expectOk, makeRank, rangePrompt, request } from "./test-helpers.js";

// Commands carrying an empty or non-string id (a JavaScript caller, or a JSON engine line) are
// refused before anything changes.

describe("command ids", () => {
  it("refuses an empty or non-string handoff id, then an empty or non-string request id", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 8 } });
    const reserve = (handoffId: unknown, requestId: unknown) =>
      rank.submit({ type: "reserve_destination", handoffId: handoffId as string, request: request(requestId as string, rangePrompt(0, 4), 1) });
    expect(reserve("", "r")).toEqual({ ok: false, reason: "handoff id must be a non-empty string" });
    expect(reserve(7, "r")).toEqual({ ok: false, reason: "handoff id must be a non-empty string" });
    expect(reserve("h", "")).toEqual({ ok: false, reason: "request id must be a non-empty string" });
    expect(reserve("h", 7)).toEqual({ ok: false, reason: "request id must be a non-empty string" });
    // Nothing was kept: the same ids are still free.
    expect(reserve("h", "r").ok).toBe(true);
  });
});

describe("handoff commands on unknown or reserved handoffs", () => {
  it("release_source and cancel_destination refuse a handoff id the rank never saw", () => {
    const prefill = makeRank({ role: "prefill", engine: { block_size: 4, num_gpu_blocks: 8 } });
    expect(prefill.submit({ type: "release_source", handoffId: "nope" })).toEqual({ ok: false, reason: 'unknown source handoff "nope"' });
    const decode = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 8 } });
    expect(decode.submit({ type: "cancel_destination", handoffId: "nope" })).toEqual({ ok: false, reason: 'unknown destination handoff "nope"' });
  });

  it("cancelling a reserved destination takes it off the waiting count and frees its pages", () => {
    // Linear, B 4, 7 usable pages: r (8 tokens) reserves cdiv(8, 4) = 2 pages and waits as reserved.
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 8 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("r", rangePrompt(0, 8), 1) }));
    expect([rank.load(), rank.metrics().pagesUsed]).toEqual([{ running: 0, waiting: 1 }, 2]);
    expect(expectOk(rank.submit({ type: "cancel_destination", handoffId: "h" })).result).toBe("applied");
    expect([rank.load(), rank.metrics().pagesUsed, rank.isDrained()]).toEqual([{ running: 0, waiting: 0 }, 0, true]);
  });
});
