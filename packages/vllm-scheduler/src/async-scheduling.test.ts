import { describe, expect, it } from "vitest";
import { checkRankConfig } from "./rank.js";
import { expectOk, makeRank, rangePrompt, rankConfig, request } from "./test-helpers.js";

// Async scheduling's pending work and the Rank queries around it (hasWork's async
// term and the async decodeRun refusal).

const asyncRank = () => makeRank({ engine: { block_size: 4, num_gpu_blocks: 8, async_scheduling: true } });

describe("async scheduling: work left after the queues empty", () => {
  it("a request whose last token is in flight keeps the rank busy until the next boundary frees it", () => {
    const rank = asyncRank();
    // r: 4 tokens, 1 output. Boundary 0: the step prefilling r is planned; r's only token is in it,
    // so nothing else is schedulable and no second step is planned.
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 4), 1) }));
    const s1 = rank.step(0)!;
    expect(s1.effects.finished).toEqual([{ requestId: "r" }]);
    // No queue holds schedulable work, but r still holds its page until the boundary at s1's end.
    expect([rank.hasWork(), rank.isDrained(), rank.metrics().pagesUsed]).toEqual([true, false, 1]);
    // That boundary frees r; nothing ran, nothing changed that a step reports.
    expect(rank.step(s1.endMs)).toBeUndefined();
    expect([rank.hasWork(), rank.isDrained(), rank.metrics().pagesUsed]).toEqual([false, true, 0]);
  });

  it("a step planned ahead keeps the rank busy though its last request is in it", () => {
    const rank = asyncRank();
    // r: 4 tokens, 2 outputs. Boundary 0 plans two steps (the batch queue fills from idle): the
    // prefill (output 0) and, seeing its token as placeholder, the decode row (output 1, the last).
    // After the first runs, r is finishing in the planned one: no schedulable work, no finished
    // request in flight yet, only the planned step.
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 4), 2) }));
    const s1 = rank.step(0)!;
    expect(s1.effects.finished).toEqual([]);
    expect(rank.hasWork()).toBe(true);
    const s2 = rank.step(s1.endMs)!;
    expect(s2.effects.finished).toEqual([{ requestId: "r" }]);
    expect(rank.hasWork()).toBe(true);
    expect(rank.step(s2.endMs)).toBeUndefined();
    expect([rank.hasWork(), rank.isDrained()]).toEqual([false, true]);
  });

  it("a request cancelled after its next step was planned gets no token from that step", () => {
    const rank = asyncRank();
    // r: 4 tokens, 3 outputs. Boundary 0 plans the prefill (output 0) and the decode row after it
    // (output 1). The prefill runs and reports output 0; then r is cancelled.
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 4), 3) }));
    const s1 = rank.step(0)!;
    expect(s1.effects.tokens.map((t) => [t.requestId, t.index])).toEqual([["r", 0]]);
    expect(expectOk(rank.submit({ type: "cancel_request", requestId: "r" })).result).toBe("applied");
    // The planned step still runs, but r's output 1 is dropped (vLLM drops a cancelled request's outputs).
    const s2 = rank.step(s1.endMs)!;
    expect([s2.effects.tokens, s2.effects.finished]).toEqual([[], []]);
  });

  it("has no decode fast path", () => {
    const rank = asyncRank();
    expectOk(rank.submit({ type: "submit", request: request("r", rangePrompt(0, 4), 5) }));
    rank.step(0);
    expect(rank.decodeRun(100, { startBeforeMs: Infinity, endByMs: Infinity })).toBeUndefined();
  });
});

describe("checkRankConfig", () => {
  it("lists the problems new Rank would throw, and none for a usable configuration", () => {
    // Async scheduling is modelled on aggregated ranks only.
    expect(checkRankConfig(rankConfig({ role: "decode", engine: { async_scheduling: true } }))).toEqual([
      { role: "decode", path: "engine.async_scheduling", message: "is modelled on aggregated ranks only; this is a decode rank" },
    ]);
    expect(checkRankConfig(rankConfig())).toEqual([]);
  });
});

describe("cancel_request on a destination", () => {
  it("retires the handoff as cancelled: activating it later is refused as such", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 8 } });
    expectOk(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("r", rangePrompt(0, 8), 1) }));
    expect(expectOk(rank.submit({ type: "cancel_request", requestId: "r" })).result).toBe("applied");
    expect(rank.submit({ type: "activate_destination", handoffId: "h" })).toEqual({ ok: false, reason: 'destination handoff "h" was cancelled' });
  });
});
