import { InputError } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { detectMeasuredFormat, fromEnginePickup, parseMeasured } from "./index.js";

const vllmLine = (id: string, o: Partial<Record<string, number>> = {}) =>
  JSON.stringify({
    request_id: id,
    input_toks: 100,
    output_toks: 11,
    arrival_time: 1e9,
    queued_ts: 10,
    scheduled_ts: 10.01,
    first_token_ts: 10.2,
    last_token_ts: 10.7,
    ...o,
  });

function issue(fn: () => unknown): { file: string; line: number | undefined; path: string; message: string } {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    const i = e.issues[0]!;
    return { file: e.file, line: i.line, path: i.path, message: i.message };
  }
  throw new Error("expected an InputError");
}

describe("vLLM per-request stats (requests.jsonl)", () => {
  it("reads TTFT from queued_ts, E2E to the last token and TPOT over the later tokens, sorted by arrival", () => {
    const text = [vllmLine("b", { queued_ts: 11, scheduled_ts: 11, first_token_ts: 11.5, last_token_ts: 12.5 }), "", vllmLine("a")].join("\n");
    const run = parseMeasured(text, "r.jsonl");
    expect(run.format).toBe("vllm-requests");
    // a arrives at 10 s (the first), b at 11 s: 1,000 ms later.
    expect(run.requests.map((r) => [r.requestId, r.arrivalMs, r.line])).toEqual([
      ["a", 0, 3],
      ["b", 1000, 1],
    ]);
    const a = run.requests[0]!;
    // TTFT 10.2 - 10 = 200 ms; E2E 10.7 - 10 = 700 ms; TPOT (700 - 200) / (11 - 1) = 50 ms.
    expect(a.ttftMs).toBeCloseTo(200, 9);
    expect(a.e2eMs).toBeCloseTo(700, 9);
    expect(a.tpotMs).toBeCloseTo(50, 9);
    expect(a.itlsMs).toBeUndefined();
  });

  it("names the file, line and field of a missing field", () => {
    const bad = JSON.stringify({ request_id: "x", input_toks: 5, output_toks: 2, queued_ts: 1, scheduled_ts: 1, last_token_ts: 2 });
    expect(issue(() => parseMeasured(`${vllmLine("a")}\n${bad}\n`, "r.jsonl"))).toEqual({
      file: "r.jsonl",
      line: 2,
      path: "first_token_ts",
      message: "is required",
    });
  });

  it("refuses a request that finished before its first token, or a token before it was scheduled", () => {
    expect(issue(() => parseMeasured(vllmLine("a", { last_token_ts: 10.1 }), "r.jsonl"))).toMatchObject({
      line: 1,
      path: "last_token_ts",
      message: expect.stringContaining("finished before its first token"),
    });
    expect(issue(() => parseMeasured(vllmLine("a", { first_token_ts: 9 }), "r.jsonl"))).toMatchObject({ line: 1, path: "first_token_ts" });
  });

  it("refuses repeated ids, bad JSON and bad counts", () => {
    expect(issue(() => parseMeasured(`${vllmLine("a")}\n${vllmLine("a")}`, "r.jsonl"))).toMatchObject({
      line: 2,
      path: "request_id",
      message: "repeats a (first on line 1)",
    });
    expect(issue(() => parseMeasured(`${vllmLine("a")}\n{"request_id": `, "r.jsonl"))).toMatchObject({ line: 2, path: "" });
    expect(issue(() => parseMeasured(vllmLine("a", { output_toks: 0 }), "r.jsonl"))).toMatchObject({
      line: 1,
      path: "output_toks",
      message: "must be an integer of at least 1 (got 0)",
    });
  });
});

describe("kvsim replay --requests records", () => {
  const rec = (id: string, o: Record<string, unknown> = {}) =>
    JSON.stringify({ request_id: id, status: "completed", arrival_ms: 5, ttft_ms: 30, e2e_ms: 130, input_tokens: 10, output_tokens: 3, ...o });
  it("reads completed records and skips the others", () => {
    const run = parseMeasured([rec("a"), rec("b", { status: "rejected", ttft_ms: null, e2e_ms: null })].join("\n"), "sim.jsonl");
    expect(run.format).toBe("kvsim-requests");
    expect(run.skipped).toBe(1);
    // TPOT (130 - 30) / (3 - 1) = 50 ms.
    expect(run.requests).toEqual([{ line: 1, requestId: "a", arrivalMs: 0, inputTokens: 10, outputTokens: 3, ttftMs: 30, e2eMs: 130, tpotMs: 50 }]);
  });
  it("locates a missing field and an end before the first token", () => {
    expect(issue(() => parseMeasured(rec("a", { e2e_ms: undefined }), "sim.jsonl"))).toEqual({
      file: "sim.jsonl",
      line: 1,
      path: "e2e_ms",
      message: "is required",
    });
    expect(issue(() => parseMeasured(rec("a", { e2e_ms: 10 }), "sim.jsonl"))).toMatchObject({
      path: "e2e_ms",
      message: expect.stringContaining("finished before its first token"),
    });
  });
  it("refuses a file with no completed request", () => {
    expect(issue(() => parseMeasured(rec("a", { status: "failed" }), "sim.jsonl"))).toMatchObject({ path: "", message: "holds no completed request" });
  });
  it("places each request's engine pickup from the records' admissions and step ends, for fromEnginePickup", () => {
    // a arrives at an idle rank at 0 (admitted at once), its first step ends at 50; b arrives at
    // 20 and is admitted at that boundary (wait 30); c arrives at 30 and is admitted at 150, after
    // the first step end at or after its arrival (50): it waited for a slot, its wait counts 0.
    const times = (id: string, arrival: number, admitted: number, first: number, last: number) =>
      rec(id, { arrival_ms: arrival, admitted_ms: admitted, first_token_ms: first, last_token_ms: last, ttft_ms: first - arrival, e2e_ms: last - arrival });
    const run = parseMeasured([times("a", 0, 0, 50, 150), times("b", 20, 50, 140, 200), times("c", 30, 150, 260, 300)].join("\n"), "sim.jsonl");
    expect(run.requests.map((r) => [r.requestId, r.pickupWaitMs])).toEqual([
      ["a", 0],
      ["b", 30],
      ["c", 0],
    ]);
    // From the pickup: b's TTFT 120 - 30 = 90 and E2E 180 - 30 = 150; TPOT (150 - 90) / 2 = 30 as before.
    expect(fromEnginePickup(run).requests.map((r) => [r.requestId, r.ttftMs, r.e2eMs, r.tpotMs])).toEqual([
      ["a", 50, 150, 50],
      ["b", 90, 150, 30],
      ["c", 230, 270, 20],
    ]);
  });
});

describe("vllm bench serve --save-detailed JSON", () => {
  const bench = (o: Record<string, unknown> = {}) =>
    JSON.stringify(
      {
        duration: 3,
        input_lens: [7, 8, 9],
        output_lens: [3, 0, 1],
        ttfts: [0.1, 0, 0.2],
        itls: [[0.02, 0.04], [], []],
        errors: ["", "boom", ""],
        start_times: [100.5, 100.6, 100],
        ...o,
      },
      null,
      2,
    );
  it("reads per-request TTFT and ITLs, skips failed entries, names entry N bench-N", () => {
    const run = parseMeasured(bench(), "bench.json");
    expect(run.format).toBe("vllm-bench");
    expect(run.skipped).toBe(1);
    // bench-2 starts at 100 s (first), bench-0 at 100.5 s: 500 ms later.
    expect(run.requests.map((r) => r.requestId)).toEqual(["bench-2", "bench-0"]);
    const b0 = run.requests[1]!;
    expect(b0.arrivalMs).toBeCloseTo(500, 9);
    // TTFT 100 ms; E2E 100 + 20 + 40 = 160 ms; TPOT (160 - 100) / 2 = 30 ms.
    expect(b0.ttftMs).toBeCloseTo(100, 9);
    expect(b0.e2eMs).toBeCloseTo(160, 9);
    expect(b0.tpotMs).toBeCloseTo(30, 9);
    expect(b0.itlsMs!.map((x) => Math.round(x * 1e6) / 1e6)).toEqual([20, 40]);
    // A one-token output has no TPOT.
    expect(run.requests[0]!.tpotMs).toBeNull();
  });
  it("without start_times, arrivals are unknown and the lack is said", () => {
    const run = parseMeasured(bench({ start_times: undefined }), "bench.json");
    expect(run.requests.every((r) => r.arrivalMs === null)).toBe(true);
    expect(run.lacks.some((l) => l.startsWith("arrival"))).toBe(true);
  });
  it("locates a missing list, a length mismatch and a bad entry", () => {
    expect(issue(() => parseMeasured(bench({ itls: undefined }), "bench.json"))).toMatchObject({
      path: "itls",
      message: expect.stringContaining("--save-detailed"),
    });
    expect(issue(() => parseMeasured(bench({ ttfts: [0.1] }), "bench.json"))).toMatchObject({ path: "ttfts", message: "has 1 entries, input_lens has 3" });
    expect(issue(() => parseMeasured(bench({ itls: [[0.02, -1], [], []] }), "bench.json"))).toMatchObject({ path: "itls[0][1]" });
  });
});

describe("format detection", () => {
  it("tells the three formats apart and refuses anything else", () => {
    expect(detectMeasuredFormat(vllmLine("a"))).toBe("vllm-requests");
    expect(detectMeasuredFormat('{"request_id":"a","status":"completed"}')).toBe("kvsim-requests");
    expect(detectMeasuredFormat('{\n  "ttfts": []\n}')).toBe("vllm-bench");
    expect(issue(() => parseMeasured('{"x": 1}', "w.jsonl"))).toMatchObject({ line: 1, message: expect.stringContaining("is not a measured run") });
  });
});
