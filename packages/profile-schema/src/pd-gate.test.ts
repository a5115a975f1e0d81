import { describe, expect, it } from "vitest";
import { checkPdGate, checkPdTopology, fullAttentionBlockSize, handoffLayoutIssues } from "./pd-gate.js";
import type { CacheGroup, GroupedProfile, LinearProfile } from "./profile.js";
import { glmFlashProfile, linearTestProfile } from "./testing.js";

// GLM-5.3-Flash, TP 4, fp8: the oracle table of docs/rules/grouped-pd.md §2.
const kda = (i: number, layers: number, bytes: number, checkpoints?: number): CacheGroup => ({
  name: `kda_${i}`,
  kind: "state",
  num_layers: layers,
  block_size_tokens: 2176,
  prefix_cacheable: true,
  transfer_bytes_per_block: bytes,
  ...(checkpoints === undefined ? {} : { prefill_checkpoint_blocks: checkpoints }),
});
const glm = (version: "0.31.0" | "0.32.0"): GroupedProfile => {
  const cp = version === "0.32.0" ? 1 : undefined;
  return {
    schema_version: 1,
    model: "zai-org/GLM-5.3-Flash",
    vllm_version: version,
    tensor_parallel_size: 4,
    page_size_bytes: 13_045_120,
    kv_cache_groups: [
      { name: "full_attention", kind: "full_attention", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 13_045_120 },
      { name: "tail_ring", kind: "state", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: false, transfer_bytes_per_block: 22_528 },
      kda(0, 9, 9_768_960, cp),
      kda(1, 9, 9_768_960, cp),
      kda(2, 8, 8_683_520, cp),
      kda(3, 8, 8_683_520, cp),
    ],
  };
};
const linear: LinearProfile = { schema_version: 1, model: "m", vllm_version: "0.20.0", tensor_parallel_size: 1, kv_bytes_per_token: 131_072 };

/** A copy of `o` without `keys`. */
function omit<T extends object, K extends keyof T>(o: T, ...keys: K[]): Omit<T, K> {
  const copy = { ...o };
  for (const k of keys) Reflect.deleteProperty(copy, k);
  return copy;
}

/** A copy of `p` with group `i` changed. */
const withGroup = (p: GroupedProfile, i: number, change: (g: CacheGroup) => CacheGroup): GroupedProfile => ({
  ...p,
  kv_cache_groups: p.kv_cache_groups.map((g, j) => (j === i ? change(g) : g)),
});

describe("checkPdGate (docs/rules/grouped-pd.md §5)", () => {
  it("passes GLM-5.3-Flash on 0.31.0 and on 0.32.0 with its checkpoint blocks, in both roles", () => {
    for (const role of ["prefill", "decode"] as const) {
      expect(checkPdGate(glm("0.31.0"), role)).toStrictEqual([]);
      expect(checkPdGate(glm("0.32.0"), role)).toStrictEqual([]);
    }
  });
  it("passes a linear profile whatever its version", () => {
    expect(checkPdGate(linear, "prefill")).toStrictEqual([]);
  });
  it("refuses another vLLM version, naming the role and the field", () => {
    expect(checkPdGate({ ...glm("0.31.0"), vllm_version: "0.30.2" }, "decode")).toStrictEqual([
      { role: "decode", path: "vllm_version", message: "decode role: vllm_version must be 0.31.0 or 0.32.0 for a grouped P/D rank (got 0.30.2)" },
    ]);
  });
  it("refuses an old profile without markers, one problem per missing marker", () => {
    const bare = omit(glm("0.31.0").kv_cache_groups[1]!, "prefix_cacheable", "transfer_bytes_per_block");
    const old = withGroup(glm("0.31.0"), 1, () => bare);
    expect(checkPdGate(old, "prefill")).toStrictEqual([
      {
        role: "prefill",
        path: "kv_cache_groups[1].prefix_cacheable",
        message: 'prefill role: prefix_cacheable is required on every group for P/D (kv_cache_groups[1] "tail_ring" has none)',
      },
      {
        role: "prefill",
        path: "kv_cache_groups[1].transfer_bytes_per_block",
        message: 'prefill role: transfer_bytes_per_block is required on every group for P/D (kv_cache_groups[1] "tail_ring" has none)',
      },
    ]);
  });
  it("needs a full-attention group, and one block size across full-attention groups", () => {
    const noFull = withGroup(glm("0.31.0"), 0, (g) => ({ ...g, kind: "state" }));
    expect(checkPdGate(noFull, "prefill").map((p) => p.path)).toStrictEqual(["kv_cache_groups"]);
    const twoFull: GroupedProfile = {
      ...glm("0.31.0"),
      kv_cache_groups: [...glm("0.31.0").kv_cache_groups, { ...glm("0.31.0").kv_cache_groups[0]!, name: "fa2", block_size_tokens: 1088 }],
    };
    expect(checkPdGate(twoFull, "decode")).toStrictEqual([
      {
        role: "decode",
        path: "kv_cache_groups[6].block_size_tokens",
        message: "decode role: block_size_tokens must be the same on every full_attention group, the handoff unit (got 1088, kv_cache_groups[0] has 2176)",
      },
    ]);
  });
  it("allows prefill_checkpoint_blocks > 0 only on a prefix-cacheable state group of a 0.32.0 profile", () => {
    // On 0.31.0: the KDA groups' checkpoint blocks are refused, one problem per group (4).
    const on031 = { ...glm("0.32.0"), vllm_version: "0.31.0" };
    expect(checkPdGate(on031, "prefill").map((p) => p.path)).toStrictEqual([2, 3, 4, 5].map((i) => `kv_cache_groups[${i}].prefill_checkpoint_blocks`));
    expect(checkPdGate(on031, "prefill")[0]?.message).toBe(
      'prefill role: prefill_checkpoint_blocks must be 0 before vLLM 0.32.0 (got 1 on kv_cache_groups[2] "kda_0", vllm_version 0.31.0)',
    );
    // On the ring (a non-cacheable state) and on full attention: refused even on 0.32.0.
    const ring = withGroup(glm("0.32.0"), 1, (g) => ({ ...g, prefill_checkpoint_blocks: 2 }));
    expect(checkPdGate(ring, "decode")).toStrictEqual([
      {
        role: "decode",
        path: "kv_cache_groups[1].prefill_checkpoint_blocks",
        message:
          'decode role: prefill_checkpoint_blocks must be 0 except on a prefix-cacheable state group (got 2 on kv_cache_groups[1] "tail_ring", a non-cacheable state group)',
      },
    ]);
    const full = withGroup(glm("0.32.0"), 0, (g) => ({ ...g, prefill_checkpoint_blocks: 1 }));
    expect(checkPdGate(full, "prefill").map((p) => p.path)).toStrictEqual(["kv_cache_groups[0].prefill_checkpoint_blocks"]);
    // Zero is always allowed.
    expect(
      checkPdGate(
        withGroup(glm("0.31.0"), 0, (g) => ({ ...g, prefill_checkpoint_blocks: 0 })),
        "prefill",
      ),
    ).toStrictEqual([]);
  });
  it("returns every problem at once", () => {
    // Version (1) + ring without markers (2) + checkpoints on 4 KDA groups of a non-0.32.0 profile (4) = 7.
    const bare = omit(glm("0.32.0").kv_cache_groups[1]!, "prefix_cacheable", "transfer_bytes_per_block");
    const bad = withGroup({ ...glm("0.32.0"), vllm_version: "0.33.0" }, 1, () => bare);
    expect(checkPdGate(bad, "prefill")).toHaveLength(7);
  });
});

describe("checkPdTopology", () => {
  it("accepts equal layouts; checkpoint blocks are local and may differ (0.31.0 prefill, 0.32.0 decode)", () => {
    expect(checkPdTopology(glm("0.31.0"), glm("0.32.0"))).toStrictEqual([]);
    expect(checkPdTopology(linear, { ...linear })).toStrictEqual([]);
  });
  it("refuses one grouped and one linear profile", () => {
    expect(checkPdTopology(glm("0.32.0"), linear)).toStrictEqual([
      {
        role: "decode",
        path: "",
        message:
          "decode role: the prefill and decode profiles have different KV layouts: the prefill profile is grouped (kv_cache_groups), the decode profile linear (kv_bytes_per_token); a grouped rank counts in blocks, a linear rank in tokens, so no handoff can pass between them",
      },
    ]);
  });
  it("refuses different groups, field by field", () => {
    const d = withGroup(glm("0.32.0"), 2, (g) => ({ ...g, transfer_bytes_per_block: 9_768_961 }));
    expect(checkPdTopology(glm("0.32.0"), d)).toStrictEqual([
      {
        role: "decode",
        path: "kv_cache_groups[2].transfer_bytes_per_block",
        message:
          "decode role: kv_cache_groups must match the prefill role's: transfer_bytes_per_block of kv_cache_groups[2] differs (got 9768961, prefill has 9768960)",
      },
    ]);
    const fewer: GroupedProfile = { ...glm("0.32.0"), kv_cache_groups: glm("0.32.0").kv_cache_groups.slice(0, 5) };
    expect(checkPdTopology(glm("0.32.0"), fewer).map((p) => p.message)).toStrictEqual([
      "decode role: kv_cache_groups must match the prefill role's (got 5 groups, prefill has 6)",
    ]);
  });
  it("refuses linear profiles with different KV bytes per token", () => {
    expect(checkPdTopology(linear, { ...linear, kv_bytes_per_token: 65_536 }).map((p) => p.path)).toStrictEqual(["kv_bytes_per_token"]);
  });
});

describe("fullAttentionBlockSize", () => {
  it("is the full-attention block size, the unit of a grouped handoff", () => {
    expect(fullAttentionBlockSize(glm("0.32.0"))).toBe(2176);
  });
  it("throws for a profile the gate refuses", () => {
    expect(() => fullAttentionBlockSize(withGroup(glm("0.32.0"), 0, (g) => ({ ...g, kind: "state" })))).toThrow(RangeError);
  });
});

describe("handoffLayoutIssues (the version-independent part of the gate, used by transfer pricing)", () => {
  it("passes GLM on both versions and any linear profile, and refuses a layout without full attention", () => {
    expect(handoffLayoutIssues(glmFlashProfile("0.31.0"))).toEqual([]);
    expect(handoffLayoutIssues(linearTestProfile(1000))).toEqual([]);
    // A 0.30.0 profile fails the gate on its version only, not on its layout.
    expect(handoffLayoutIssues({ ...glmFlashProfile("0.31.0"), vllm_version: "0.30.0" })).toEqual([]);
    const noFull = glmFlashProfile("0.31.0");
    noFull.kv_cache_groups = noFull.kv_cache_groups!.filter((g) => g.kind !== "full_attention");
    expect(handoffLayoutIssues(noFull)).toEqual([
      { path: "kv_cache_groups", message: "kv_cache_groups needs at least one full_attention group: a grouped handoff counts in full-attention blocks" },
    ]);
  });
});
