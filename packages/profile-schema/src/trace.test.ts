import { describe, expect, it } from "vitest";
import { InputError } from "./errors.js";
import { parseTraceLine, readTrace, type TraceReadOptions, type TraceRecord } from "./trace.js";

async function collect(lines: Iterable<string> | AsyncIterable<string>, options: TraceReadOptions): Promise<TraceRecord[]> {
  const out: TraceRecord[] = [];
  for await (const r of readTrace(lines, options)) out.push(r);
  return out;
}

/** The message of the InputError a trace read throws (fails the test when none is thrown). */
async function failure(lines: readonly string[], options: TraceReadOptions): Promise<string> {
  try {
    await collect(lines, options);
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).message;
  }
  throw new Error("expected an InputError");
}

const mooncake: TraceReadOptions = { format: "mooncake", file: "trace.jsonl" };
const azure: TraceReadOptions = { format: "azure", file: "azure.csv" };
const kvsim: TraceReadOptions = { format: "kvsim", file: "kv.jsonl" };

describe("Mooncake JSONL", () => {
  it("reads records, skips blank lines and keeps the file's line numbers", async () => {
    const lines = [
      '{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}',
      "",
      '  {"timestamp": 27.5, "input_length": 512, "output_length": 1, "hash_ids": [1], "session_id": "s1"}\r',
    ];
    expect(await collect(lines, mooncake)).toStrictEqual([
      { line: 1, arrivalMs: 0, inputTokens: 1000, outputTokens: 5, hashIds: [1, 2] },
      { line: 3, arrivalMs: 27.5, inputTokens: 512, outputTokens: 1, hashIds: [1], sessionId: "s1" },
    ]);
  });
  it("reads from an async iterable too", async () => {
    async function* gen() {
      await Promise.resolve();
      yield '{"timestamp": 3, "input_length": 2, "output_length": 4, "hash_ids": [9]}';
    }
    expect((await collect(gen(), mooncake)).map((r) => r.inputTokens)).toStrictEqual([2]);
  });
  it("refuses broken JSON with the line and the column", async () => {
    // The comma is missing before "output_length": column 38 is the opening quote of that key
    // ('{"timestamp": 0, "input_length": 1000 ' is 38 characters, so the quote is the 39th).
    const text = '{"timestamp": 0, "input_length": 1000 "output_length": 5, "hash_ids": [1, 2]}';
    expect(await failure(["", text], mooncake)).toBe("trace.jsonl:2:39: malformed JSON: expected ','");
  });
  it("refuses a line that is JSON but not an object", async () => {
    expect(await failure(["[1, 2]"], mooncake)).toBe("trace.jsonl:1: expected a JSON object (got [1,2])");
  });
  it("names a missing field", async () => {
    expect(await failure(['{"timestamp": 0, "input_length": 10, "hash_ids": [1]}'], mooncake)).toBe("trace.jsonl:1: output_length: is required");
  });
  it("names a negative length with its value", async () => {
    const lines = Array.from({ length: 16 }, () => "").concat('{"timestamp": 0, "input_length": -3, "output_length": 5, "hash_ids": [1]}');
    expect(await failure(lines, mooncake)).toBe("trace.jsonl:17: input_length: must be at least 1 (got -3)");
  });
  it("refuses zero output, fractional counts and a negative hash id", async () => {
    expect(await failure(['{"timestamp": 0, "input_length": 10, "output_length": 0, "hash_ids": [1]}'], mooncake)).toBe(
      "trace.jsonl:1: output_length: must be at least 1 (got 0)",
    );
    expect(await failure(['{"timestamp": 0, "input_length": 10.5, "output_length": 1, "hash_ids": [1]}'], mooncake)).toBe(
      "trace.jsonl:1: input_length: expected an integer (got 10.5)",
    );
    expect(await failure(['{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [4, -1, -2]}'], mooncake)).toBe(
      "trace.jsonl:1: hash_ids[1]: must be a non-negative integer (got -1)",
    );
  });
  it("refuses an unknown key and names the allowed ones", async () => {
    expect(await failure(['{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "prompt": "hi"}'], mooncake)).toBe(
      "trace.jsonl:1: prompt: unknown key (allowed: timestamp, input_length, output_length, hash_ids, session_id)",
    );
  });
  it("checks that the hash ids can hold the prompt: len(hash_ids) x block >= input_length", async () => {
    // 2 ids x 512 = 1,024 tokens hold 1,024 but not 1,025.
    const ok = '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}';
    expect((await collect([ok], mooncake))[0]?.inputTokens).toBe(1024);
    const over = '{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}';
    expect(await failure([over], mooncake)).toBe("trace.jsonl:1: hash_ids: 2 ids x 512 tokens = 1024 tokens cannot cover input_length 1025");
    // With a 16-token trace block, 2 ids hold 32 tokens only.
    expect(await failure([ok], { ...mooncake, traceBlockSize: 16 })).toBe(
      "trace.jsonl:1: hash_ids: 2 ids x 16 tokens = 32 tokens cannot cover input_length 1024",
    );
  });
  it("refuses arrivals that go back in time, naming the earlier line", async () => {
    const lines = [
      '{"timestamp": 100, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
      '{"timestamp": 100, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
      '{"timestamp": 99.5, "input_length": 1, "output_length": 1, "hash_ids": [1]}',
    ];
    expect(await failure(lines, mooncake)).toBe("trace.jsonl:3: timestamp: arrival times must not decrease: got 99.5, earlier than 100 on line 2");
  });
  it("refuses an empty trace (blank lines only count as none)", async () => {
    expect(await failure([], mooncake)).toBe("trace.jsonl: the trace has no requests");
    expect(await failure(["", "  "], mooncake)).toBe("trace.jsonl: the trace has no requests");
  });
});

describe("Azure CSV", () => {
  it("reads the TIMESTAMP as UTC epoch ms and keeps the sub-ms digits", async () => {
    // 2023-11-16 is day 19,677 after 1970-01-01: 53 years x 365 + 13 leap days = 19,358 days to
    // 2023-01-01, plus 304 days of January-October and 15 days of November. 19,677 x 86,400,000 =
    // 1,700,092,800,000 ms; 18:15:46 adds 65,746,000 ms: 1,700,158,546,000. The fraction
    // .6805900 s is 680.59 ms.
    const lines = ["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46.6805900,374,44", "2023-11-16 18:15:47,2,1"];
    expect(await collect(lines, azure)).toStrictEqual([
      { line: 2, arrivalMs: 1_700_158_546_000 + 680.59, inputTokens: 374, outputTokens: 44 },
      { line: 3, arrivalMs: 1_700_158_547_000, inputTokens: 2, outputTokens: 1 },
    ]);
  });
  it("needs the exact header first", async () => {
    expect(await failure(["timestamp,context,generated", "2023-11-16 18:15:46.6805900,374,44"], azure)).toBe(
      'azure.csv:1: the first line must be the header TIMESTAMP,ContextTokens,GeneratedTokens (got "timestamp,context,generated")',
    );
  });
  it("names every bad field of a row", async () => {
    expect(await failure(["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46.1,abc,-3"], azure)).toBe(
      ['azure.csv:2: ContextTokens: expected a number (got "abc")', "azure.csv:2: GeneratedTokens: must be at least 1 (got -3)"].join("\n"),
    );
  });
  it("refuses an impossible date, a missing field and broken quoting", async () => {
    const header = "TIMESTAMP,ContextTokens,GeneratedTokens";
    expect(await failure([header, "2023-02-30 00:00:00.0000000,1,1"], azure)).toBe(
      'azure.csv:2: TIMESTAMP: expected a UTC time such as 2023-11-16 18:15:46.6805900 (got "2023-02-30 00:00:00.0000000")',
    );
    expect(await failure([header, "2023-11-16 18:15:46.6805900,374"], azure)).toBe(
      "azure.csv:2: expected 3 fields (TIMESTAMP,ContextTokens,GeneratedTokens), found 2",
    );
    expect(await failure([header, '2023-11-16 18:15:46.6805900,"374,44'], azure)).toMatch(/^azure\.csv:2: malformed CSV: /);
  });
  it("refuses decreasing times, quoting both timestamps", async () => {
    const lines = ["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46.6805900,1,1", "2023-11-16 18:15:46.6805899,1,1"];
    expect(await failure(lines, azure)).toBe(
      "azure.csv:3: TIMESTAMP: arrival times must not decrease: got 2023-11-16 18:15:46.6805899, earlier than 2023-11-16 18:15:46.6805900 on line 2",
    );
  });
  it("refuses a trace with a header and no rows, and an empty file", async () => {
    expect(await failure(["TIMESTAMP,ContextTokens,GeneratedTokens", ""], azure)).toBe("azure.csv: the trace has no requests");
    expect(await failure([], azure)).toBe(
      "azure.csv: the trace is empty (expected the header TIMESTAMP,ContextTokens,GeneratedTokens, then one row per request)",
    );
  });
});

describe("kvsim JSONL", () => {
  it("reads requests given by length or by token ids", async () => {
    const lines = [
      '{"request_id": "a", "arrival_ms": 0, "input_tokens": 7, "output_tokens": 2}',
      '{"request_id": "b", "arrival_ms": 1.25, "input_token_ids": [5, 4294967295, 0], "output_tokens": 1}',
      '{"request_id": "c", "arrival_ms": 2, "input_tokens": 2, "input_token_ids": [1, 2], "output_tokens": 3}',
    ];
    const records = await collect(lines, kvsim);
    expect(records.map((r) => [r.requestId, r.line, r.arrivalMs, r.inputTokens, r.outputTokens])).toStrictEqual([
      ["a", 1, 0, 7, 2],
      ["b", 2, 1.25, 3, 1],
      ["c", 3, 2, 2, 3],
    ]);
    expect(records[0]?.inputTokenIds).toBeUndefined();
    expect(Array.from(records[1]?.inputTokenIds ?? [])).toStrictEqual([5, 4294967295, 0]);
  });
  it("refuses token ids outside u32 and lengths that disagree", async () => {
    expect(await failure(['{"request_id": "a", "arrival_ms": 0, "input_token_ids": [1, 4294967296], "output_tokens": 1}'], kvsim)).toBe(
      "kv.jsonl:1: input_token_ids[1]: must be an integer in [0, 4294967295] (got 4294967296)",
    );
    expect(await failure(['{"request_id": "a", "arrival_ms": 0, "input_tokens": 3, "input_token_ids": [1, 2], "output_tokens": 1}'], kvsim)).toBe(
      "kv.jsonl:1: input_tokens: must equal the length of input_token_ids (got 3, input_token_ids has 2)",
    );
    expect(await failure(['{"request_id": "a", "arrival_ms": 0, "input_token_ids": [], "output_tokens": 1}'], kvsim)).toBe(
      "kv.jsonl:1: input_token_ids: must hold at least 1 token (got [])",
    );
  });
  it("needs the prompt by length or by ids, and a non-blank request id", async () => {
    expect(await failure(['{"request_id": "a", "arrival_ms": 0, "output_tokens": 1}'], kvsim)).toBe(
      "kv.jsonl:1: input_tokens: is required (or input_token_ids)",
    );
    expect(await failure(['{"request_id": " ", "arrival_ms": 0, "input_tokens": 1, "output_tokens": 1}'], kvsim)).toBe(
      'kv.jsonl:1: request_id: must not be blank (got " ")',
    );
  });
  it("refuses a duplicate request id, naming its first line", async () => {
    const lines = [
      '{"request_id": "a", "arrival_ms": 0, "input_tokens": 1, "output_tokens": 1}',
      '{"request_id": "b", "arrival_ms": 0, "input_tokens": 1, "output_tokens": 1}',
      '{"request_id": "a", "arrival_ms": 1, "input_tokens": 1, "output_tokens": 1}',
    ];
    expect(await failure(lines, kvsim)).toBe('kv.jsonl:3: request_id: must be unique in the file (got "a", also on line 1)');
  });
  it("refuses an unknown key, naming the allowed ones, and a negative arrival", async () => {
    expect(await failure(['{"request_id": "a", "arrival_ms": 0, "input_length": 1, "input_tokens": 1, "output_tokens": 1}'], kvsim)).toBe(
      "kv.jsonl:1: input_length: unknown key (allowed: request_id, arrival_ms, input_tokens, input_token_ids, output_tokens)",
    );
    expect(await failure(['{"request_id": "a", "arrival_ms": -1, "input_tokens": 1, "output_tokens": 1}'], kvsim)).toBe(
      "kv.jsonl:1: arrival_ms: must not be negative (got -1)",
    );
  });
});

describe("kvsim JSONL, bad lines like the other formats", () => {
  const line = (fields: string) => `{"request_id": "a", ${fields}}`;
  it("broken JSON, a missing field, a negative length", async () => {
    // '{"request_id": "a", "arrival_ms": 0 ' is 36 characters; the unexpected key starts at column 37.
    expect(await failure([line('"arrival_ms": 0 "input_tokens": 1, "output_tokens": 1')], kvsim)).toBe("kv.jsonl:1:37: malformed JSON: expected ','");
    expect(await failure([line('"arrival_ms": 0, "input_tokens": 1')], kvsim)).toBe("kv.jsonl:1: output_tokens: is required");
    expect(await failure([line('"arrival_ms": 0, "input_tokens": 1, "output_tokens": -2')], kvsim)).toBe(
      "kv.jsonl:1: output_tokens: must be at least 1 (got -2)",
    );
  });
  it("decreasing time and an empty trace", async () => {
    const lines = [
      '{"request_id": "a", "arrival_ms": 5, "input_tokens": 1, "output_tokens": 1}',
      "",
      '{"request_id": "b", "arrival_ms": 4, "input_tokens": 1, "output_tokens": 1}',
    ];
    expect(await failure(lines, kvsim)).toBe("kv.jsonl:3: arrival_ms: arrival times must not decrease: got 4, earlier than 5 on line 1");
    expect(await failure([""], kvsim)).toBe("kv.jsonl: the trace has no requests");
  });
});

describe("parseTraceLine", () => {
  it("parses one line on its own and returns undefined for a blank one", () => {
    expect(parseTraceLine("kvsim", '{"request_id": "x", "arrival_ms": 5, "input_tokens": 3, "output_tokens": 2}', 9, { file: "f" })).toStrictEqual({
      line: 9,
      requestId: "x",
      arrivalMs: 5,
      inputTokens: 3,
      outputTokens: 2,
    });
    expect(parseTraceLine("mooncake", "   ", 4, { file: "f" })).toBeUndefined();
  });
  it("refuses a trace block size that is not a positive integer", () => {
    expect(() => parseTraceLine("mooncake", "{}", 1, { file: "f", traceBlockSize: 0 })).toThrow(RangeError);
  });
});

describe("request size limit", () => {
  it("accepts 2^24 tokens and refuses one more, in every format, before a prompt is synthesised", async () => {
    // 2^24 = 16,777,216 tokens; at 512 tokens per hash id that needs 32,768 ids.
    const ids = JSON.stringify(Array.from({ length: 32_768 }, (_, i) => i));
    const ok = await collect([`{"timestamp": 0, "input_length": 16777216, "output_length": 1, "hash_ids": ${ids}}`], mooncake);
    expect(ok[0]!.inputTokens).toBe(16_777_216);
    expect(await failure(['{"timestamp": 0, "input_length": 1, "output_length": 16777217, "hash_ids": [1]}'], mooncake)).toBe(
      "trace.jsonl:1: output_length: must be at most 16777216 (2^24) tokens (got 16777217)",
    );
    expect(await failure(['{"request_id": "a", "arrival_ms": 0, "input_tokens": 1000000000, "output_tokens": 1}'], kvsim)).toBe(
      "kv.jsonl:1: input_tokens: must be at most 16777216 (2^24) tokens (got 1000000000)",
    );
    expect(await failure(["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:17:03.9799600,99999999,10"], azure)).toMatch(
      /^azure\.csv:2: ContextTokens: must be at most 16777216 \(2\^24\) tokens \(got 99999999\)$/,
    );
  });
});
