import { describe, expect, it } from "vitest";
import { parseLine } from "./protocol.js";

describe("parseLine", () => {
  it("reads each op with its fields", () => {
    expect(parseLine('{"id":1,"op":"submit","request":{"request_id":"r","tokens":[1,2,4294967295],"max_output_tokens":2}}')).toEqual({
      ok: true,
      id: 1,
      command: { op: "submit", request: { request_id: "r", tokens: [1, 2, 4294967295], max_output_tokens: 2 } },
    });
    expect(parseLine('{"id":"a","op":"step","now_ms":12.5}')).toEqual({ ok: true, id: "a", command: { op: "step", now_ms: 12.5 } });
    expect(parseLine('{"id":2,"op":"activate_destination","handoff_id":"h"}')).toEqual({
      ok: true,
      id: 2,
      command: { op: "activate_destination", handoff_id: "h" },
    });
    expect(parseLine('{"id":3,"op":"cancel_request","request_id":"r"}')).toEqual({ ok: true, id: 3, command: { op: "cancel_request", request_id: "r" } });
    expect(parseLine('{"id":4,"op":"metrics"}')).toEqual({ ok: true, id: 4, command: { op: "metrics" } });
  });

  it.each([
    ["not JSON", "{oops", null, "parse_error", "not JSON: expected a double-quoted property name at character 2"],
    ["an empty line", "", null, "parse_error", "not JSON: unexpected end of input at character 1"],
    ["not an object", "[1]", null, "invalid_request", "a request must be a JSON object, got [1]"],
    ["no id", '{"op":"metrics"}', null, "invalid_request", "id must be a string or an integer, got nothing"],
    ["a fractional id", '{"id":1.5,"op":"metrics"}', null, "invalid_request", "id must be a string or an integer, got 1.5"],
    ["no op", '{"id":7}', 7, "invalid_request", "op must be a string, got nothing"],
    [
      "an unknown op",
      '{"id":7,"op":"explode"}',
      7,
      "invalid_request",
      'unknown op "explode"; ops: submit, submit_handoff_prefill, reserve_destination, activate_destination, cancel_destination, release_source, cancel_source, cancel_request, step, metrics, info, handoff_delay',
    ],
    ["a missing field", '{"id":7,"op":"release_source"}', 7, "invalid_request", "handoff_id must be a non-empty string, got nothing"],
    ["an unknown key", '{"id":7,"op":"metrics","verbose":true}', 7, "invalid_request", "verbose: unknown key for op metrics"],
    ["a wrong type", '{"id":7,"op":"step","now_ms":"soon"}', 7, "invalid_request", 'now_ms must be a number from 0 to 10^13 ms (about 317 years), got "soon"'],
    ["a negative time", '{"id":7,"op":"step","now_ms":-1}', 7, "invalid_request", "now_ms must be a number from 0 to 10^13 ms (about 317 years), got -1"],
    [
      "a token beyond u32",
      '{"id":7,"op":"submit","request":{"request_id":"r","tokens":[4294967296],"max_output_tokens":1}}',
      7,
      "invalid_request",
      "request.tokens[0] must be a u32 token id, got 4294967296",
    ],
    [
      "no tokens",
      '{"id":7,"op":"submit","request":{"request_id":"r","tokens":[],"max_output_tokens":1}}',
      7,
      "invalid_request",
      "request.tokens must hold at least one token",
    ],
    [
      "output token ids",
      '{"id":7,"op":"submit","request":{"request_id":"r","tokens":[1],"max_output_tokens":1,"output_token_ids":[5]}}',
      7,
      "invalid_request",
      "request.output_token_ids is not supported: kvsim samples its own deterministic output token ids",
    ],
    [
      "a huge integer",
      '{"id":7,"op":"submit","request":{"request_id":"r","tokens":[1],"max_output_tokens":18446744073709551615}}',
      7,
      "invalid_request",
      "request.max_output_tokens must be an integer from 0 to 16777216 (2^24), got 18446744073709551615",
    ],
  ])("refuses %s", (_what, line, id, code, message) => {
    expect(parseLine(line)).toEqual({ ok: false, id, code, message });
  });
});
