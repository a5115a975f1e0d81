import { describe, expect, it } from "vitest";
import { InputError } from "./errors.js";
import { parseProfile } from "./parse.js";
import { hasMambaTypeState, isGroupedProfile, isLinearProfile } from "./profile.js";

/** A small valid grouped profile as a JSON value; tests change one thing each. */
const grouped = () => ({
  schema_version: 1,
  model: "test/hybrid",
  vllm_version: "0.32.0",
  tensor_parallel_size: 1,
  page_size_bytes: 4096,
  kv_cache_groups: [
    { name: "fa", kind: "full_attention", num_layers: 2, block_size_tokens: 16, prefix_cacheable: true, transfer_bytes_per_block: 4096 },
    { name: "sw", kind: "sliding_window", num_layers: 2, block_size_tokens: 16, window_tokens: 32, prefix_cacheable: true, transfer_bytes_per_block: 4096 },
    {
      name: "mamba",
      kind: "state",
      num_layers: 1,
      block_size_tokens: 16,
      prefix_cacheable: true,
      transfer_bytes_per_block: 1024,
      prefill_checkpoint_blocks: 1,
    },
  ],
});

/** A copy of `o` without `keys`. */
function omit<T extends object, K extends keyof T>(o: T, ...keys: K[]): Omit<T, K> {
  const copy = { ...o };
  for (const k of keys) Reflect.deleteProperty(copy, k);
  return copy;
}

/** The issues of the InputError that parsing `value` as JSON throws, as `path: message` lines. */
function refusal(value: unknown): string[] {
  try {
    parseProfile(JSON.stringify(value, null, 2), "p.json");
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  throw new Error("expected an InputError");
}

describe("ProfileSchema", () => {
  it("accepts a grouped and a linear profile", () => {
    const p = parseProfile(JSON.stringify(grouped()), "p.json");
    expect(isGroupedProfile(p)).toBe(true);
    expect(hasMambaTypeState(p)).toBe(true);
    const l = parseProfile('{"schema_version": 1, "model": "m", "vllm_version": "0.31.0", "tensor_parallel_size": 2, "kv_bytes_per_token": 131072}', "l.json");
    expect(isLinearProfile(l)).toBe(true);
  });
  it("refuses an unknown key, at any depth", () => {
    expect(refusal({ ...grouped(), colour: "red" })).toStrictEqual(["colour: unknown key"]);
    const p = grouped();
    p.kv_cache_groups[1] = { ...p.kv_cache_groups[1]!, ...{ windw: 3 } };
    // "windw" is 2 edits from the group's "kind" (w->k, drop the last w) and keeps 3 of its 5 letters: suggested.
    expect(refusal(p)).toStrictEqual(["kv_cache_groups[1].windw: unknown key (did you mean kind?)"]);
  });
  it("refuses duplicate group names, naming the later one", () => {
    const p = grouped();
    p.kv_cache_groups[2]!.name = "fa";
    expect(refusal(p)).toStrictEqual(['kv_cache_groups[2].name: duplicate group name "fa" (also kv_cache_groups[0])']);
  });
  it("refuses window_tokens on a full-attention group and a sliding-window group without it", () => {
    const p = grouped();
    Object.assign(p.kv_cache_groups[0]!, { window_tokens: 64 });
    expect(refusal(p)).toStrictEqual([
      "kv_cache_groups[0].window_tokens: is only allowed on sliding_window and convolution groups, not on a full_attention group",
    ]);
    const q = grouped();
    delete q.kv_cache_groups[1]!.window_tokens;
    expect(refusal(q)).toStrictEqual(["kv_cache_groups[1].window_tokens: is required for a sliding_window group"]);
  });
  it("accepts transfer_bytes_per_block of 2^53 and refuses 2^53 + 1, which a double cannot hold", () => {
    const big = 2 ** 53; // 9,007,199,254,740,992
    const p = grouped();
    p.page_size_bytes = big;
    p.kv_cache_groups[0]!.transfer_bytes_per_block = big;
    expect(parseProfile(JSON.stringify(p), "p.json").kv_cache_groups?.[0]?.transfer_bytes_per_block).toBe(big);
    // JSON.parse would round 9007199254740993 to 2^53; the literal itself is checked. Pretty-printed,
    // the field is on line 14: "{", 5 profile fields (2-6), "kv_cache_groups": [ (7), "{" (8), then
    // name, kind, num_layers, block_size_tokens, prefix_cacheable (9-13), indented by 6 spaces.
    const text = JSON.stringify(p, null, 2).replace('"transfer_bytes_per_block": 9007199254740992', '"transfer_bytes_per_block": 9007199254740993');
    expect(() => parseProfile(text, "p.json")).toThrow(
      "p.json:14:7: kv_cache_groups[0].transfer_bytes_per_block: must be at most 2^53 = 9007199254740992 (got 9007199254740993, too large to hold exactly)",
    );
  });
  it("refuses a negative and a fractional block_size_tokens", () => {
    const p = grouped();
    p.kv_cache_groups[0]!.block_size_tokens = -16;
    expect(refusal(p)).toStrictEqual(["kv_cache_groups[0].block_size_tokens: must be at least 1 (got -16)"]);
    p.kv_cache_groups[0]!.block_size_tokens = 16.5;
    expect(refusal(p)).toStrictEqual(["kv_cache_groups[0].block_size_tokens: expected an integer (got 16.5)"]);
  });
  it("refuses both kv_bytes_per_token and kv_cache_groups, and neither", () => {
    expect(refusal({ ...grouped(), kv_bytes_per_token: 1024 })).toStrictEqual([
      "kv_bytes_per_token: a profile has either kv_bytes_per_token (linear) or kv_cache_groups (grouped), never both",
    ]);
    expect(refusal(omit(grouped(), "kv_cache_groups", "page_size_bytes"))).toStrictEqual([
      ": a profile needs kv_bytes_per_token (linear) or kv_cache_groups (grouped)",
    ]);
  });
  it("refuses a block payload larger than its page", () => {
    const p = grouped();
    p.kv_cache_groups[2]!.transfer_bytes_per_block = 4097;
    expect(refusal(p)).toStrictEqual(["kv_cache_groups[2].transfer_bytes_per_block: 4097 exceeds page_size_bytes 4096: a block's payload fits in its page"]);
  });
  it("names a missing field and a wrong type with its value", () => {
    expect(refusal(omit(grouped(), "model"))).toStrictEqual(["model: is required"]);
    expect(refusal({ ...grouped(), tensor_parallel_size: "4" })).toStrictEqual([
      'tensor_parallel_size: Invalid input: expected number, received string (got "4")',
    ]);
  });
  it("refuses malformed JSON with the line and column", () => {
    // Line 3 is `  "model": "m"` with no comma; the next key starts on line 4, column 3.
    const text = '{\n  "schema_version": 1,\n  "model": "m"\n  "vllm_version": "0.32.0"\n}';
    expect(() => parseProfile(text, "p.json")).toThrow("p.json:4:3: malformed JSON: expected ','");
  });
  it("refuses a duplicate JSON key, which JSON.parse would silently take the last of", () => {
    const text =
      '{\n  "schema_version": 1,\n  "schema_version": 1,\n  "model": "m", "vllm_version": "0.32.0", "tensor_parallel_size": 1, "kv_bytes_per_token": 8\n}';
    expect(() => parseProfile(text, "p.json")).toThrow("p.json:3:3: schema_version: duplicate key (also on line 2)");
  });
  it("reads YAML with located errors", () => {
    const yaml = ["schema_version: 1", "model: m", 'vllm_version: "0.32.0"', "tensor_parallel_size: 0", "kv_bytes_per_token: 9007199254740993", ""].join("\n");
    expect(() => parseProfile(yaml, "p.yaml")).toThrow(
      [
        "p.yaml:5:1: kv_bytes_per_token: must be at most 2^53 = 9007199254740992 (got 9007199254740993, too large to hold exactly)",
        "p.yaml:4:1: tensor_parallel_size: must be at least 1 (got 0)",
      ].join("\n"),
    );
  });
  it("accepts a $schema key for editors", () => {
    expect(parseProfile(JSON.stringify({ $schema: "./profile.schema.json", ...grouped() }), "p.json").$schema).toBe("./profile.schema.json");
  });
  it("refuses a forward_pass table that is not a complete grid", () => {
    const fp = {
      provenance: "illustrative",
      prefill: [
        { batch_size: 1, new_tokens: 16, cached_tokens: 0, latency_ms: 1 },
        { batch_size: 2, new_tokens: 16, cached_tokens: 0, latency_ms: 2 },
        { batch_size: 1, new_tokens: 32, cached_tokens: 0, latency_ms: 3 },
      ],
      decode: [],
    };
    // Axes 2 (batch) x 2 (new) x 1 (cached) need 4 points; 3 are given.
    expect(refusal({ ...grouped(), forward_pass: fp })).toStrictEqual([
      "forward_pass.prefill: must form a complete grid for interpolation: 2 x 2 x 1 axis values need 4 points, found 3",
    ]);
  });
});
