import { describe, expect, it } from "vitest";
import { parseDocumentText } from "./document.js";
import { documentKindIssue } from "./document-kind.js";
import { InputError } from "./errors.js";
import { deepNestingOffset, deepValuePath, duplicateKey, scanJsonText } from "./json-text.js";
import { MAX_NESTING_DEPTH } from "./limits.js";
import { parseProfile, parseSpec } from "./parse.js";
import { handoffLayoutIssues } from "./pd-gate.js";
import { SpecSchema } from "./spec.js";
import { readTrace, type TraceReadOptions } from "./trace.js";

/** `line:column path: message` of every issue, or a test failure when nothing is refused. */
function refusal(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof InputError) return e.issues.map((i) => `${i.line ?? "-"}:${i.column ?? "-"} ${i.path}: ${i.message}`);
    throw e;
  }
  throw new Error("expected an InputError");
}

async function traceRefusal(lines: readonly string[], options: TraceReadOptions): Promise<string> {
  try {
    const records = readTrace(lines, options);
    while ((await records.next()).done !== true) {
      // drain
    }
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).message;
  }
  throw new Error("expected an InputError");
}

const SPEC_TAIL = [
  "profile: ./p.json",
  "topology: { kind: aggregated, workers: 1 }",
  "timing: { type: polynomial }",
  "workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }",
];

describe("YAML aliases (issue 11 reproducers)", () => {
  it("refuses an alias bomb at its first alias instead of crashing", () => {
    // a: 10 x, b: 10 x *a, c: 10 x *b, d: 10 x *c: 10^4 expansions, beyond the 100 allowed.
    const ten = (x: string) => Array.from({ length: 10 }, () => x).join(",");
    const text = [`a: &a [${ten("x")}]`, `b: &b [${ten("*a")}]`, `c: &c [${ten("*b")}]`, `d: [${ten("*c")}]`, "version: 1", ...SPEC_TAIL].join("\n");
    // The first alias is the first *a, on line 2 after "b: &b [" (7 characters): column 8.
    expect(refusal(() => parseSpec(text, "s.yaml"))).toEqual([
      "2:8 : the YAML aliases expand to more than 100 copies (an alias bomb?); write the values out instead",
    ]);
  });
  it("refuses an alias to no anchor, naming it", () => {
    // "version: " is 9 characters: the alias starts at column 10.
    expect(refusal(() => parseSpec(["version: *nope", ...SPEC_TAIL].join("\n"), "s.yaml"))).toEqual([
      "1:10 : the alias *nope refers to no anchor (an anchor &nope must come before it)",
    ]);
  });
  it("still reads a document that reuses an anchor a few times", () => {
    const text = [
      "version: 1",
      "profile: &p ./p.json",
      "decode: { profile: *p }",
      ...SPEC_TAIL.slice(1, 3),
      "workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }",
    ].join("\n");
    // decode applies to a disaggregated topology only: the alias itself was read fine.
    expect(refusal(() => parseSpec(text, "/w/s.yaml"))).toEqual(["3:1 decode: applies to a disaggregated topology only"]);
  });
});

describe("deep nesting (issue 11 reproducers)", () => {
  it("refuses a profile of 5,000 nested [ at the first level past the limit, JSON and YAML", () => {
    const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
    // Level 65 opens at offset 64: column 65.
    expect(refusal(() => parseProfile(deep, "p.json"))).toEqual([
      `1:65 : nests arrays and objects more than ${MAX_NESTING_DEPTH} levels deep; no kvsim document needs more than a few`,
    ]);
    const [yaml] = refusal(() => parseProfile(deep, "p.yaml"));
    expect(yaml).toMatch(/^1:\d+ : nests arrays and objects more than 64 levels deep/);
  });
  it("accepts 64 levels and refuses 65", () => {
    expect(deepNestingOffset(`${"[".repeat(64)}${"]".repeat(64)}`, 64)).toBeUndefined();
    expect(deepNestingOffset(`${"[".repeat(65)}${"]".repeat(65)}`, 64)).toBe(64);
    // Brackets inside strings do not count; an escaped quote does not end the string.
    expect(deepNestingOffset(`["[[[\\"[[[", [1]]`, 1)).toBe(13);
    expect(deepValuePath([[[1]]], 2)).toEqual([0, 0]);
    expect(deepValuePath({ a: [{ b: 1 }] }, 3)).toBeUndefined();
  });
  it("refuses a trace line of 100,000 [ with its line, without a stack overflow", async () => {
    const msg = await traceRefusal(["[".repeat(100_000)], { format: "mooncake", file: "t.jsonl" });
    expect(msg).toBe("t.jsonl:1: nests arrays and objects more than 64 levels deep, at column 65; a trace line is one flat object");
    const closed = `{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
    // The object is level 1; `{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":` is 61 characters, so
    // level 2 opens at offset 61 and level 65 at offset 61 + 63 = 124: column 125.
    expect(await traceRefusal([closed], { format: "mooncake", file: "t.jsonl" })).toBe(
      "t.jsonl:1: nests arrays and objects more than 64 levels deep, at column 125; a trace line is one flat object",
    );
  });
});

describe("numbers and keys (issue 11 reproducers)", () => {
  it("refuses a 400-digit integer as too large instead of crashing, in JSON and YAML", () => {
    const digits = `1${"0".repeat(399)}`;
    const json = `{"schema_version": 1, "model": "m", "vllm_version": "0.32.0", "tensor_parallel_size": 1, "kv_bytes_per_token": ${digits}}`;
    // "{" (1) + '"schema_version": 1, ' (21) + '"model": "m", ' (14) + '"vllm_version": "0.32.0", ' (26)
    // + '"tensor_parallel_size": 1, ' (27) = 89 characters before "kv_bytes_per_token": column 90.
    expect(refusal(() => parseProfile(json, "p.json"))).toEqual([
      "1:90 kv_bytes_per_token: must be at most 2^53 = 9007199254740992 (got a 400-digit integer, too large to hold exactly)",
    ]);
    const yaml = `schema_version: 1\nmodel: m\nvllm_version: "0.32.0"\ntensor_parallel_size: 1\nkv_bytes_per_token: ${digits}\n`;
    expect(refusal(() => parseProfile(yaml, "p.yaml"))).toEqual([
      "5:1 kv_bytes_per_token: must be at most 2^53 = 9007199254740992 (got a 400-digit integer, too large to hold exactly)",
    ]);
  });
  it("keeps a __proto__ key a plain key, refused as unknown", () => {
    const json = '{"schema_version": 1, "model": "m", "vllm_version": "0.32.0", "tensor_parallel_size": 1, "kv_bytes_per_token": 1, "__proto__": {"x": 1}}';
    // 89 characters as above + '"kv_bytes_per_token": 1, ' (25) = 114 before "__proto__": column 115.
    expect(refusal(() => parseProfile(json, "p.json"))).toEqual(["1:115 __proto__: unknown key"]);
    const value = parseDocumentText('{"__proto__": {"polluted": 1}}', "x.json").value as object;
    expect(Object.keys(value)).toEqual(["__proto__"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
  it("finds a key given twice in JSON text, at any depth", () => {
    expect(duplicateKey('{"a":1,"b":{"c":1,"c":2}}')).toEqual({ key: "c", offset: 18, firstOffset: 12 });
    expect(duplicateKey('{"a":1," a":2,"a\\u0062":3,"ab":4}')).toEqual({ key: "ab", offset: 26, firstOffset: 14 });
    expect(duplicateKey('[{"a":1},{"a":1}]')).toBeUndefined();
    expect(scanJsonText('{"a":[[1]]}', 2)).toEqual({ kind: "deep", offset: 6 });
  });
  it("refuses a duplicate key in a trace line (JSON.parse would keep the last)", async () => {
    const line = '{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[1],"output_length":9}';
    // '{"timestamp":0,"input_length":1,' is 32 characters: the first "output_length" is at column 33;
    // then '"output_length":1,"hash_ids":[1],' (33 more): the second is at offset 65, column 66.
    expect(await traceRefusal([line], { format: "mooncake", file: "t.jsonl" })).toBe("t.jsonl:1:66: output_length: duplicate key (also at column 33)");
  });
});

describe("recognising the kind of document (issue 11 reproducers)", () => {
  it("says a profile is not a spec, and a spec not a profile", () => {
    const profile = '{"schema_version": 1, "model": "m", "vllm_version": "0.32.0", "tensor_parallel_size": 1, "kv_bytes_per_token": 1}';
    expect(refusal(() => parseSpec(profile, "p.json"))).toEqual([
      "1:1 : this is a profile (it has schema_version), not a spec; a spec has version: 1 and names its profile, e.g. profile: ./this-file.json",
    ]);
    expect(refusal(() => parseProfile(["version: 1", ...SPEC_TAIL].join("\n"), "s.yaml"))).toEqual([
      "1:1 : this is a spec (it has version), not a profile; a profile has schema_version: 1 (the spec names its profile under profile:)",
    ]);
  });
  it("says a JSON Lines file or an Azure CSV is a trace, not malformed YAML", () => {
    const jsonl =
      '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n';
    const expected = (what: string) => [
      `1:- : expected one JSON or YAML document (a profile or a spec), but this is ${what}; a trace is checked through the spec that names it (workload.trace)`,
    ];
    expect(refusal(() => parseDocumentText(jsonl, "t.jsonl"))).toEqual(
      expected("a JSON Lines file (one JSON object per line, like a Mooncake or kvsim trace)"),
    );
    expect(refusal(() => parseDocumentText("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n", "a.csv"))).toEqual(
      expected("an Azure CSV trace (its header is TIMESTAMP,...)"),
    );
    // One line of a trace parses as a document, and is named for what it is.
    expect(documentKindIssue({ timestamp: 0, input_length: 1, output_length: 1, hash_ids: [1] }, "either")?.message).toBe(
      "expected a profile (an object with schema_version: 1) or a spec (an object with version: 1), but this is one line of a Mooncake trace; a trace is checked through the spec that names it (workload.trace)",
    );
    expect(documentKindIssue([1], "spec")?.message).toBe("expected a spec (an object with version: 1), got an array");
  });
});

describe("physically meaningful ranges (issue 11 reproducers)", () => {
  const spec = {
    version: 1,
    profile: "./p.json",
    topology: { kind: "aggregated", workers: 1 },
    timing: { type: "fixed", prefill_ms: 1, decode_ms: 1 },
    workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1, rate_per_s: 1 } },
  };
  const issues = (patch: (s: Record<string, unknown> & typeof spec) => void): string[] => {
    const s = structuredClone(spec) as Record<string, unknown> & typeof spec;
    patch(s);
    const r = SpecSchema.safeParse(s);
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  };
  it("refuses the denormal and huge values validate used to accept and replay crashed on", () => {
    expect(issues((s) => (s.kv_transfer = { bandwidth_gbps: 5e-324 }))).toEqual([
      "kv_transfer.bandwidth_gbps: must be from 0.001 to 100000 GB/s, 1 MB/s to 100 TB/s",
    ]);
    expect(issues((s) => (s.workload.synthetic.rate_per_s = 5e-324))).toEqual([
      "workload.synthetic.rate_per_s: must be from 0.01 to 1000000 requests per second",
    ]);
    expect(issues((s) => (s.timing = { type: "fixed", prefill_ms: 1e308, decode_ms: 1 }))).toEqual([
      "timing.prefill_ms: must be from 0 to 1000000 ms, about 17 minutes",
    ]);
    expect(issues((s) => (s.kv_transfer = { fallback_latency_ms: 1e308 }))).toEqual([
      "kv_transfer.fallback_latency_ms: must be from 0 to 1000000 ms, about 17 minutes",
    ]);
    expect(issues((s) => (s.workload = { trace: "t.jsonl", format: "kvsim", speedup: 5e-324 } as never))).toEqual([
      "workload.speedup: must be from 0.000001 to 1000000",
    ]);
    expect(issues((s) => (s.max_virtual_time_ms = 1e308))).toEqual(["max_virtual_time_ms: must be from 0 to 10^13 ms, about 317 years"]);
    expect(issues((s) => (s.sla = { ttft_ms: 1e308 }))).toEqual(["sla.ttft_ms: must be greater than 0 and at most 10^13 ms, about 317 years"]);
    // 2^53 - 1 synthetic requests would grow without bound: the cap is stated.
    expect(issues((s) => (s.workload.synthetic.requests = 9_007_199_254_740_991))).toEqual([
      "workload.synthetic.requests: must be at most 1000000 (each request keeps a record in memory until the report is written)",
    ]);
  });
  it("accepts the ends of every range", () => {
    expect(issues((s) => (s.kv_transfer = { bandwidth_gbps: 0.001, fallback_latency_ms: 1e6 }))).toEqual([]);
    expect(issues((s) => (s.kv_transfer = { bandwidth_gbps: 1e5 }))).toEqual([]);
    expect(issues((s) => (s.workload.synthetic = { requests: 1_000_000, input_tokens: 1, output_tokens: 1, rate_per_s: 0.01 }))).toEqual([]);
    expect(issues((s) => (s.timing = { type: "fixed", prefill_ms: 0, decode_ms: 1e6 }))).toEqual([]);
  });
  it("refuses forward-pass latencies beyond 10^6 ms", () => {
    const p =
      '{"schema_version": 1, "model": "m", "vllm_version": "0.32.0", "tensor_parallel_size": 1, "kv_bytes_per_token": 1, "forward_pass": {"provenance": "x", "prefill": [], "decode": [{"batch_size": 1, "kv_tokens": 1, "latency_ms": 1e308}]}}';
    // The 89 characters before "kv_bytes_per_token", then '"kv_bytes_per_token": 1, "forward_pass": {"provenance": "x", '
    // '"prefill": [], "decode": [{"batch_size": 1, "kv_tokens": 1, ' (121 more): "latency_ms" at offset 210, column 211.
    expect(refusal(() => parseProfile(p, "p.json"))).toEqual([
      "1:211 forward_pass.decode[0].latency_ms: must be from 0 to 1000000 ms, about 17 minutes (got 1e+308)",
    ]);
  });
  it("refuses a trace whose arrivals span more than 10^13 ms of virtual time, after the speedup", async () => {
    const line = (t: number, id: string) => `{"request_id":"${id}","arrival_ms":${t},"input_tokens":1,"output_tokens":1}`;
    expect(await traceRefusal([line(0, "a"), line(1e300, "b")], { format: "kvsim", file: "t.jsonl" })).toBe(
      "t.jsonl:2: arrival_ms: arrives more than 10^13 ms (about 317 years) after the first request on line 1: got 1e+300, the first was 0",
    );
    // 10^10 ms is fine at speedup 1 and too far at speedup 10^-6 (10^16 ms).
    expect(await traceRefusal([line(0, "a"), line(1e10, "b")], { format: "kvsim", file: "t.jsonl", speedup: 1e-6 })).toBe(
      "t.jsonl:2: arrival_ms: arrives more than 10^13 ms (about 317 years) after the first request on line 1 (after dividing by speedup 0.000001): got 10000000000, the first was 0",
    );
  });
});

describe("payloads beyond 2^53 bytes are refused by the handoff check, not priced", () => {
  it("linear: kv_bytes_per_token above 2^29 cannot price the longest prompt", () => {
    const profile = { schema_version: 1 as const, model: "m", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 2 ** 53 };
    // 2^53 / 2^24 = 2^29 = 536,870,912 bytes per token at most.
    expect(handoffLayoutIssues(profile)).toEqual([
      {
        path: "kv_bytes_per_token",
        message:
          "kv_bytes_per_token must be at most 536870912 (2^29) to price a handoff: the longest prompt (2^24 tokens) would move 9007199254740992 x 2^24 bytes, beyond 2^53 (got 9007199254740992)",
      },
    ]);
    expect(handoffLayoutIssues({ ...profile, kv_bytes_per_token: 2 ** 29 })).toEqual([]);
  });
  it("grouped: the group that moves the most is named", () => {
    const g = (name: string, kind: "full_attention" | "state", bytes: number) => ({
      name,
      kind,
      num_layers: 1,
      block_size_tokens: 16,
      prefix_cacheable: true,
      transfer_bytes_per_block: bytes,
    });
    const profile = {
      schema_version: 1 as const,
      model: "m",
      vllm_version: "0.32.0",
      tensor_parallel_size: 1,
      page_size_bytes: 2 ** 53,
      kv_cache_groups: [g("s", "state", 2 ** 40), g("fa", "full_attention", 2 ** 40)],
    };
    // Full attention: 2^24 / 16 = 2^20 blocks x 2^40 = 2^60 bytes; the state group 2^40. Total about 1.15e18.
    expect(handoffLayoutIssues(profile)).toEqual([
      {
        path: "kv_cache_groups[1].transfer_bytes_per_block",
        message:
          'transfer_bytes_per_block is too large to price a handoff: the longest prompt (2^24 tokens) would move about 1.15e+18 bytes, beyond 2^53 (kv_cache_groups[1] "fa": 1.15e+18)',
      },
    ]);
  });
});
