import type { CacheGroup, Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { mambaBlockSize, RankConfigError, rankConfigProblems } from "./rank-config.js";
import { linearProfile, rankConfig } from "./test-helpers.js";

// The configuration checks on their own (the Mamba-type block's lcm, the
// forward_pass checks by role and the message text).

const group = (g: Partial<CacheGroup> & Pick<CacheGroup, "name" | "kind" | "block_size_tokens">): CacheGroup => ({ num_layers: 1, ...g });
const mamba = (name: string, block: number) => group({ name, kind: "state", block_size_tokens: block, prefix_cacheable: true });

describe("mambaBlockSize", () => {
  it("is the lcm of the Mamba-type groups' block sizes, other groups ignored", () => {
    // lcm(4, 6): gcd(4, 6) = gcd(6, 4) = gcd(4, 2) = gcd(2, 0) = 2, so 4 / 2 x 6 = 12.
    expect(mambaBlockSize([mamba("m1", 4), mamba("m2", 6)])).toBe(12);
    // A full-attention group of 5 and a ring of 3 do not count: 6 alone.
    expect(
      mambaBlockSize([
        group({ name: "fa", kind: "full_attention", block_size_tokens: 5 }),
        group({ name: "ring", kind: "state", block_size_tokens: 3, prefix_cacheable: false }),
        mamba("m", 6),
      ]),
    ).toBe(6);
    expect(mambaBlockSize([group({ name: "fa", kind: "full_attention", block_size_tokens: 5 })])).toBeUndefined();
  });
});

describe("rankConfigProblems", () => {
  it("with Mamba-type alignment: a budget of exactly one block is enough, a threshold below it is not", () => {
    const config = rankConfig({ engine: { max_num_batched_tokens: 12, long_prefill_token_threshold: 8 } });
    expect(rankConfigProblems(config, 12)).toEqual([
      {
        role: "aggregated",
        path: "engine.long_prefill_token_threshold",
        message: "8 is below the Mamba-type block of 12 tokens: with prefix caching, prefill chunks end on block boundaries",
      },
    ]);
    // A threshold of 0 is no threshold.
    expect(rankConfigProblems(rankConfig({ engine: { max_num_batched_tokens: 12, long_prefill_token_threshold: 0 } }), 12)).toEqual([]);
  });

  it("profile timing needs the forward_pass table of each kind of work the role prices", () => {
    const forwardPass = (prefill: number, decode: number): Profile =>
      linearProfile({
        forward_pass: {
          provenance: "test",
          prefill: Array.from({ length: prefill }, () => ({ batch_size: 1, new_tokens: 100, cached_tokens: 0, latency_ms: 10 })),
          decode: Array.from({ length: decode }, () => ({ batch_size: 1, kv_tokens: 100, latency_ms: 2 })),
        },
      });
    const paths = (profile: Profile, role: "aggregated" | "prefill" | "decode") =>
      rankConfigProblems(rankConfig({ role, profile, timing: { type: "profile", outside_grid: "refuse" } }), undefined)
        .filter((p) => p.path.startsWith("profile."))
        .map((p) => [p.path, p.message]);
    expect(paths(forwardPass(0, 1), "aggregated")).toEqual([
      ["profile.forward_pass.prefill", "must list measured points: a aggregated rank prices prefill work from it"],
    ]);
    expect(paths(forwardPass(1, 0), "aggregated")).toEqual([
      ["profile.forward_pass.decode", "must list measured points: a aggregated rank prices decode work from it"],
    ]);
    // A decode rank prices no prefill, a prefill rank no decode.
    expect(paths(forwardPass(0, 1), "decode")).toEqual([]);
    expect(paths(forwardPass(1, 0), "prefill")).toEqual([]);
    expect(paths(forwardPass(1, 1), "aggregated")).toEqual([]);
    expect(paths(linearProfile(), "decode")).toEqual([
      [
        "profile.forward_pass",
        '"profile" timing needs the profile\'s forward_pass tables, and profile test/linear has none: measure its passes, or use timing type roofline (from the model_shape kvsim profile from-hf writes), linear (fitted by kvsim calibrate) or fixed',
      ],
    ]);
  });
});

describe("RankConfigError", () => {
  it("lists every problem under one line naming the role and the count", () => {
    const one = new RankConfigError([{ role: "decode", path: "engine.x", message: "is wrong" }]);
    expect([one.name, one.message]).toEqual(["RankConfigError", "the decode rank configuration is refused (1 problem):\n  - engine.x: is wrong"]);
    // A problem without a path has no "path: " prefix; two problems are "problems".
    const two = new RankConfigError([
      { role: "prefill", path: "", message: "first" },
      { role: "prefill", path: "a.b", message: "second" },
    ]);
    expect(two.message).toBe("the prefill rank configuration is refused (2 problems):\n  - first\n  - a.b: second");
  });
});
