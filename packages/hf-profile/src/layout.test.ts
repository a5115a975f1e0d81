import { describe, expect, it } from "vitest";
import { layoutCache, type LayerCache } from "./layout.js";

const full = (bytesPerToken = 1024): LayerCache => ({ kind: "attention", bytesPerToken });
const sw = (window = 32, bytesPerToken = 1024): LayerCache => ({ kind: "attention", bytesPerToken, window });
const grouped = (layers: LayerCache[], blockSize?: number) => {
  const l = layoutCache(layers, { mla: false, blockSize, vllmVersion: "0.32.0" });
  if (l.kind !== "grouped") throw new Error("expected groups");
  return l;
};
const shape = (layers: LayerCache[]) => grouped(layers).groups.map((g) => `${g.kind}:${g.num_layers}`);

describe("layoutCache: vLLM's grouping examples (kv_cache_utils tests)", () => {
  it("1 full + 1 sliding: two groups of one layer", () => {
    expect(shape([full(), sw()])).toEqual(["full_attention:1", "sliding_window:1"]);
  });

  it("2 full + 4 sliding: group size 2, the sliding layers split in two", () => {
    expect(shape([full(), full(), sw(), sw(), sw(), sw()])).toEqual(["full_attention:2", "sliding_window:2", "sliding_window:2"]);
  });

  it("3 full + 7 sliding: group size 3; the 7 split 3, 2, 2 (layers[i::3])", () => {
    expect(shape([...Array.from({ length: 3 }, () => full()), ...Array.from({ length: 7 }, () => sw())])).toEqual([
      "full_attention:3",
      "sliding_window:3",
      "sliding_window:2",
      "sliding_window:2",
    ]);
  });

  it("6 full + 5 sliding: 6 < 1.5 x 5, so the larger count is the group size", () => {
    const l = grouped([...Array.from({ length: 6 }, () => full()), ...Array.from({ length: 5 }, () => sw())]);
    expect(l.groups.map((g) => `${g.kind}:${g.num_layers}`)).toEqual(["full_attention:6", "sliding_window:5"]);
    // The page is sized for 6 layers; the sliding group's block moves only its 5 layers: 5 x 16 x 1024.
    expect(l.pageSizeBytes).toBe(6 * 16 * 1024);
    expect(l.groups[1]!.transfer_bytes_per_block).toBe(5 * 16 * 1024);
  });

  it("unifies a smaller page by multiplying its block size (head 64 full + head 32 sliding: the sliding block is 32)", () => {
    const l = grouped([full(2 * 64 * 2), sw(32, 2 * 32 * 2)]);
    expect(l.groups.map((g) => [g.kind, g.block_size_tokens, g.transfer_bytes_per_block])).toEqual([
      ["full_attention", 16, 16 * 256],
      ["sliding_window", 32, 32 * 128],
    ]);
  });

  it("the code comment's example: a 788 KiB state over 2 KiB per token needs 16 x cdiv(788, 32) = 400 tokens", () => {
    const l = grouped([full(2048), { kind: "state", stateBytes: 788 * 1024, mixer: "mamba2" }]);
    expect(l.groups.map((g) => g.block_size_tokens)).toEqual([400, 400]);
    expect(l.pageSizeBytes).toBe(400 * 2048);
  });

  it("names two windows apart", () => {
    expect(grouped([full(), sw(32), sw(64)]).groups.map((g) => g.name)).toEqual(["full_attention", "sliding_window_32", "sliding_window_64"]);
  });

  it("keeps a full-attention-only model linear, except MLA which needs its 64-token block", () => {
    expect(layoutCache([full(), full()], { mla: false, vllmVersion: "0.32.0" })).toMatchObject({ kind: "linear", kvBytesPerToken: 2048, blockSize: 16 });
    const mla = layoutCache([full(576), full(576)], { mla: true, blockSize: 16, vllmVersion: "0.32.0" });
    expect(mla).toMatchObject({ kind: "grouped", pageSizeBytes: 64 * 1152 });
  });
});
