import { describe, expect, it } from "vitest";
import { makeRank, rangePrompt, request } from "./test-helpers.js";

// Commands carrying an empty or non-string id (a JavaScript caller, or a JSON engine line) are
// refused before anything changes (issue 17: Stryker found these checks run by no test).

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
