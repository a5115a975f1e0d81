import { InputError } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { compareRuns, measuredToTrace, parseMeasured, parsePromptTokens, regressionStart, type MeasuredRequest, type MeasuredRun } from "./index.js";
import { MAX_REGRESSION_CELLS, MAX_REGRESSION_VISITS, regressionGridMs } from "./fit-regression.js";

/** Issue 38: measured files a fuzzer made, each refused naming file, line and field, or run in bounded time and memory. */
function issue(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    const i = e.issues[0]!;
    return `${e.file}:${i.line ?? "-"}:${i.column ?? "-"} ${i.path}: ${i.message}`;
  }
  throw new Error("expected an InputError");
}

const vllm = (id: string, o: Record<string, unknown> = {}) =>
  JSON.stringify({ request_id: id, input_toks: 100, output_toks: 11, queued_ts: 10, scheduled_ts: 10.01, first_token_ts: 10.2, last_token_ts: 10.7, ...o });

describe("measured files", () => {
  it("refuse a key given twice, as traces and specs do (JSON.parse would keep the last)", () => {
    // {"request_id":"a", (18 characters) "input_toks":100, (17) "output_toks":11, (17): the first
    // queued_ts starts at offset 52 (column 53); "queued_ts":10, (15) puts the second at 67 (column 68).
    const line = vllm("a").replace('"queued_ts":10,', '"queued_ts":10,"queued_ts":5,');
    expect(issue(() => parseMeasured(`${vllm("b")}\n${line}\n`, "r.jsonl"))).toBe("r.jsonl:2:68 queued_ts: duplicate key (also at column 53)");
    const bench = '{"input_lens": [4],\n "output_lens": [2], "ttfts": [0.1], "itls": [[0.01]], "ttfts": [0.2]}';
    expect(issue(() => parseMeasured(bench, "b.json"))).toMatch(/^b\.json:2:\d+ ttfts: duplicate key/);
  });

  it("say where a multi-line JSON file is malformed, in one line (JSON.parse's message quotes the text, newlines and all)", () => {
    const text = issue(() => parseMeasured('{"ttfts": [0.1],\n "input_lens":, [1]}', "b.json"));
    // Line 2 is ` "input_lens":, [1]}`: the stray comma is at column 15.
    expect(text).toBe("b.json:2:15 : malformed JSON: expected a value");
  });

  it("refuse timestamps below 0 or beyond 10^10 s (kvsim's latest time), naming the field", () => {
    expect(issue(() => parseMeasured(vllm("a", { queued_ts: -1 }), "r.jsonl"))).toBe(
      "r.jsonl:1:- queued_ts: must be from 0 to 10^10 seconds (about 317 years) (got -1)",
    );
    expect(issue(() => parseMeasured(vllm("a", { last_token_ts: 2 ** 53 }), "r.jsonl"))).toBe(
      "r.jsonl:1:- last_token_ts: must be from 0 to 10^10 seconds (about 317 years) (got 9007199254740992)",
    );
    // 10^10 s itself is accepted.
    expect(parseMeasured(vllm("a", { last_token_ts: 1e10 }), "r.jsonl").requests[0]!.e2eMs).toBe((1e10 - 10) * 1000);
  });

  it("refuse more tokens than kvsim's largest request (2^24), so a trace written from them replays", () => {
    expect(issue(() => parseMeasured(vllm("a", { input_toks: 2 ** 24 + 1 }), "r.jsonl"))).toBe(
      "r.jsonl:1:- input_toks: must be at most 2^24 = 16777216 tokens, kvsim's largest request (got 16777217)",
    );
    expect(parseMeasured(vllm("a", { input_toks: 2 ** 24 }), "r.jsonl").requests[0]!.inputTokens).toBe(2 ** 24);
  });
});

describe("trace from-measured --prompts", () => {
  const run = parseMeasured(`${vllm("a")}\n${vllm("b", { queued_ts: 11, scheduled_ts: 11, first_token_ts: 11.2, last_token_ts: 11.7 })}\n`, "r.jsonl");
  const ids = JSON.stringify(Array.from({ length: 100 }, (_, i) => i));
  it("refuses a prompt for a request the run does not have, naming its line", () => {
    const prompts = parsePromptTokens(`{"request_id":"a","input_tok_ids":${ids}}\n{"request_id":"zz","input_tok_ids":${ids}}\n`, "p.jsonl");
    expect(issue(() => measuredToTrace(run, prompts, "p.jsonl"))).toBe(
      "p.jsonl:2:- request_id: zz is not a request of the measured run r.jsonl (line N is request bench-N unless it has a request_id)",
    );
  });

  it("refuses a request's prompt given twice", () => {
    expect(issue(() => parsePromptTokens(`{"request_id":"a","input_tok_ids":[1]}\n\n{"request_id":"a","input_tok_ids":[2]}\n`, "p.jsonl"))).toBe(
      "p.jsonl:3:- request_id: repeats request a (first on line 1)",
    );
  });

  it("takes a prompt for a failed bench request (it is in the file, not in the compared requests)", () => {
    const bench = JSON.stringify({
      input_lens: [3, 3],
      output_lens: [2, 2],
      ttfts: [0.1, 0.1],
      itls: [[0.01], [0.01]],
      errors: ["", "timeout"],
      start_times: [0, 1],
    });
    const b = parseMeasured(bench, "b.json");
    expect(b.skippedIds).toEqual(["bench-1"]);
    const prompts = parsePromptTokens('{"input_tok_ids":[1,2,3]}\n{"input_tok_ids":[4,5,6]}\n', "p.jsonl");
    expect(measuredToTrace(b, prompts, "p.jsonl")).toBe('{"request_id":"bench-0","arrival_ms":0,"input_token_ids":[1,2,3],"output_tokens":2}\n');
  });
});

describe("compare with a request of 130,000 inter-token gaps", () => {
  it("takes every gap (no spread of the gaps into a call, which overflowed the stack)", () => {
    // 130,000 gaps of 1 ms: every ITL percentile is 1 ms.
    const itlsMs = new Array<number>(130_000).fill(1);
    const r: MeasuredRequest = {
      line: 1,
      requestId: "bench-0",
      arrivalMs: 0,
      inputTokens: 4,
      outputTokens: 130_001,
      ttftMs: 100,
      e2eMs: 130_100,
      tpotMs: 1,
      itlsMs,
    };
    const m: MeasuredRun = { format: "vllm-bench", file: "b.json", requests: [r], skipped: 0, lacks: [] };
    const c = compareRuns(m, m);
    expect(c.latency.find((l) => l.metric === "itl" && l.stat === "p99")!.measured).toBe(1);
  });
});

describe("the regression's load grid", () => {
  it("has 5 ms cells up to MAX_REGRESSION_CELLS of them, and wider ones beyond", () => {
    // 5 ms x (2^21 - 2) cells = 10,485,750 ms (2.9 hours) still fits 5 ms cells.
    expect(regressionGridMs(5 * (MAX_REGRESSION_CELLS - 2), 0)).toBe(5);
    // Twice as long: cells of 10 ms.
    expect(regressionGridMs(10 * (MAX_REGRESSION_CELLS - 2), 0)).toBe(10);
    // Requests that together last 5 x 2^26 ms: still 5 ms; twice that: 10 ms.
    expect(regressionGridMs(1000, 5 * MAX_REGRESSION_VISITS)).toBe(5);
    expect(regressionGridMs(1000, 10 * MAX_REGRESSION_VISITS)).toBe(10);
  });

  it("a request lasting 10^13 ms (the largest a measured file may state) costs no more than MAX_REGRESSION_CELLS cells", () => {
    const reqs: MeasuredRequest[] = Array.from({ length: 20 }, (_, i) => ({
      line: i + 1,
      requestId: `q${i}`,
      arrivalMs: i * 100,
      inputTokens: 100,
      outputTokens: 11,
      ttftMs: 50,
      e2eMs: i === 3 ? 1e13 : 550,
      tpotMs: i === 3 ? (1e13 - 50) / 10 : 50,
      queueMs: 0,
    }));
    const run: MeasuredRun = { format: "vllm-requests", file: "r.jsonl", requests: reqs, skipped: 0, lacks: [] };
    const started = performance.now();
    const c = regressionStart(run, 8192);
    expect(Number.isFinite(c.step_ms)).toBe(true);
    // Four arrays of 2^21 doubles and one of bytes: well under a second.
    expect(performance.now() - started).toBeLessThan(5000);
  });
});
