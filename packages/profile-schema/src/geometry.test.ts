import { describe, expect, it } from "vitest";
import { blocksCovering, cdiv, groupBlocksForTokens, inWindowBlocks, skippedWindowBlocks, windowClipBlocks } from "./geometry.js";
import type { CacheGroup } from "./profile.js";
import { tokens } from "./units.js";

const sw = (window: number, block: number): CacheGroup => ({ name: "sw", kind: "sliding_window", num_layers: 1, block_size_tokens: block, window_tokens: window });
const full = (block: number): CacheGroup => ({ name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: block });

describe("cdiv", () => {
  it("rounds up", () => {
    expect(cdiv(0, 16)).toBe(0);
    expect(cdiv(1, 16)).toBe(1);
    expect(cdiv(16, 16)).toBe(1);
    expect(cdiv(17, 16)).toBe(2);
  });
});

describe("window geometry (grouped-pd.md section 2 oracles)", () => {
  it("W 33, B 16, T 1,000: 63 blocks cover the tokens, 60 lie below the window, 3 remain", () => {
    // floor(max(0, 1000 - 33 + 1) / 16) = floor(968 / 16) = 60; cdiv(1000, 16) = 63.
    expect(blocksCovering(sw(33, 16), tokens(1000))).toBe(63);
    expect(skippedWindowBlocks(sw(33, 16), tokens(1000))).toBe(60);
    expect(inWindowBlocks(sw(33, 16), tokens(1000))).toBe(3);
  });
  it("the prefill clip of W 33, B 16 is cdiv(33, 16) + 1 = 4", () => {
    expect(windowClipBlocks(sw(33, 16))).toBe(4);
  });
  it("W 32, B 16, T 1,024 (a block boundary) gives 2", () => {
    // skipped floor((1024 - 32 + 1) / 16) = floor(993 / 16) = 62; cdiv(1024, 16) = 64; 64 - 62 = 2.
    expect(inWindowBlocks(sw(32, 16), tokens(1024))).toBe(2);
  });
  it("full attention keeps every block, a partial last block included", () => {
    expect(groupBlocksForTokens(full(2176), tokens(8191))).toBe(4);
    expect(skippedWindowBlocks(full(16), tokens(10_000))).toBe(0);
  });
  it("a state group holds one block once it holds any token", () => {
    const state: CacheGroup = { name: "kda", kind: "state", num_layers: 9, block_size_tokens: 2176, prefix_cacheable: true };
    expect(groupBlocksForTokens(state, tokens(0))).toBe(0);
    expect(groupBlocksForTokens(state, tokens(1))).toBe(1);
    expect(groupBlocksForTokens(state, tokens(131_071))).toBe(1);
  });
});
