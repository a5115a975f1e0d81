import { describe, expect, it } from "vitest";
import { JsonSyntaxError, parseJsonExact, stringifyJsonExact } from "./json-u64.js";

describe("exact u64 JSON", () => {
  it("writes bigints as raw integers, digit for digit", () => {
    // 17,335,092,954,915,961,572 > 2^53 = 9,007,199,254,740,992: a double would round it.
    expect(stringifyJsonExact({ h: 17335092954915961572n, n: 3, s: "x", a: [null, true] })).toBe('{"h":17335092954915961572,"n":3,"s":"x","a":[null,true]}');
  });
  it("reads integers beyond 2^53 - 1 back as exact bigints and keeps the rest as numbers", () => {
    const v = parseJsonExact('{"h":17335092954915961572,"small":9007199254740991,"f":1.5,"e":1e3}');
    expect(v).toEqual({ h: 17335092954915961572n, small: 9007199254740991, f: 1.5, e: 1000 });
  });
  it("2^53 itself comes back as a bigint (it is not a safe integer)", () => {
    expect(parseJsonExact("9007199254740992")).toBe(9007199254740992n);
  });
  it("round-trips the largest u64", () => {
    const max = 2n ** 64n - 1n; // 18,446,744,073,709,551,615
    expect(stringifyJsonExact([max])).toBe("[18446744073709551615]");
    expect(parseJsonExact(stringifyJsonExact([max]))).toEqual([max]);
  });
  it("leaves out undefined object values and writes strings with escapes", () => {
    expect(stringifyJsonExact({ a: undefined, b: 'q"\n' })).toBe('{"b":"q\\"\\n"}');
    expect(parseJsonExact('"a\\u0041\\n"')).toBe("aA\n");
  });
  it("keeps a __proto__ key as an ordinary own property", () => {
    const v = parseJsonExact('{"__proto__":{"x":1}}') as Record<string, unknown>;
    expect(Object.keys(v)).toEqual(["__proto__"]);
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
  });
  it.each([
    ["", "unexpected end of input at character 1"],
    ["{", "expected a double-quoted property name at character 2"],
    ["[1,]", 'unexpected character "]" at character 4'],
    ['{"a" 1}', "expected ':' at character 6"],
    ["nul", "unexpected token at character 1"],
    ["1 2", "unexpected content after the JSON value at character 3"],
    ['"abc', "unterminated string at character 5"],
    ["-", "invalid number at character 1"],
  ])("refuses %j with the position", (text, message) => {
    expect(() => parseJsonExact(text)).toThrow(JsonSyntaxError);
    expect(() => parseJsonExact(text)).toThrow(message);
  });
  it("refuses nesting deeper than 256 instead of overflowing the stack", () => {
    expect(() => parseJsonExact("[".repeat(100_000))).toThrow("nesting deeper than 256");
  });
  it("refuses to write a non-finite number", () => {
    expect(() => stringifyJsonExact({ x: Number.NaN })).toThrow("non-finite");
  });
});
