import { describe, expect, it } from "vitest";
import {
  blocksCovering,
  cdiv,
  groupBlocksForTokens,
  inWindowBlocks,
  prefillCheckpointBlocks,
  skippedWindowBlocks,
  takesPrefillCheckpoints,
  windowClipBlocks,
} from "./geometry.js";
import type { CacheGroup } from "./profile.js";
import { tokens } from "./units.js";

const sw = (window: number, block: number): CacheGroup => ({
  name: "sw",
  kind: "sliding_window",
  num_layers: 1,
  block_size_tokens: block,
  window_tokens: window,
});
const full = (block: number): CacheGroup => ({ name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: block });

describe("cdiv", () => {
  it("rounds up", () => {
    expect(cdiv(0, 16)).toBe(0);
    expect(cdiv(1, 16)).toBe(1);
    expect(cdiv(16, 16)).toBe(1);
    expect(cdiv(17, 16)).toBe(2);
  });
  it("refuses a divisor of 0 or below", () => {
    expect(() => cdiv(1, 0)).toThrow(new RangeError("cdiv by 0"));
    expect(() => cdiv(1, -16)).toThrow(new RangeError("cdiv by -16"));
  });
});

describe("window geometry (docs/rules/grouped-pd.md §2 oracles)", () => {
  it("W 33, B 16, T 1,000: 63 blocks cover the tokens, 60 lie below the window, 3 remain", () => {
    // floor(max(0, 1000 - 33 + 1) / 16) = floor(968 / 16) = 60; cdiv(1000, 16) = 63.
    expect(blocksCovering(sw(33, 16), tokens(1000))).toBe(63);
    expect(skippedWindowBlocks(sw(33, 16), tokens(1000))).toBe(60);
    expect(inWindowBlocks(sw(33, 16), tokens(1000))).toBe(3);
  });
  it("the prefill clip of W 33, B 16 is cdiv(33, 16) + 1 = 4", () => {
    expect(windowClipBlocks(sw(33, 16))).toBe(4);
    expect(() => windowClipBlocks(full(16))).toThrow(new RangeError("group fa (full_attention) has no window"));
  });
  it("W 32, B 16, T 1,024 (a block boundary) gives 2", () => {
    // skipped floor((1024 - 32 + 1) / 16) = floor(993 / 16) = 62; cdiv(1024, 16) = 64; 64 - 62 = 2.
    expect(inWindowBlocks(sw(32, 16), tokens(1024))).toBe(2);
  });
  it("W 33, B 16, T 1,024: T - W + 1 is a whole number of blocks, so the +1 decides the count", () => {
    // T - W + 1 = 1024 - 33 + 1 = 992 = 62 x 16: tokens 0..991 (blocks 0..61) lie below the window
    // of the next token (992..1024), so 62 blocks are skipped and 64 - 62 = 2 remain (blocks 62, 63).
    // Writing T - W (991) would skip only 61 and keep 3.
    expect(skippedWindowBlocks(sw(33, 16), tokens(1024))).toBe(62);
    expect(inWindowBlocks(sw(33, 16), tokens(1024))).toBe(2);
    expect(groupBlocksForTokens(sw(33, 16), tokens(1024))).toBe(2);
    // One token earlier, T - W + 1 = 991 skips floor(991 / 16) = 61 of cdiv(1023, 16) = 64: 3 remain.
    expect(inWindowBlocks(sw(33, 16), tokens(1023))).toBe(3);
  });
  it("a window wider than the tokens skips nothing", () => {
    // W 64, T 63: T - W + 1 = 0, nothing below the window; cdiv(63, 16) = 4 blocks, all kept.
    expect(skippedWindowBlocks(sw(64, 16), tokens(63))).toBe(0);
    expect(inWindowBlocks(sw(64, 16), tokens(63))).toBe(4);
    // W 64, T 10: T - W + 1 = -53, clamped to 0 (not a negative skip that would add blocks).
    expect(inWindowBlocks(sw(64, 16), tokens(10))).toBe(1);
  });
  it("a convolution group follows the window rule too", () => {
    const conv: CacheGroup = { name: "conv", kind: "convolution", num_layers: 1, block_size_tokens: 16, window_tokens: 33 };
    expect(inWindowBlocks(conv, tokens(1024))).toBe(2);
    expect(groupBlocksForTokens(conv, tokens(1024))).toBe(2);
    expect(windowClipBlocks(conv)).toBe(4);
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

describe("prefill checkpoint blocks (vLLM 0.32.0)", () => {
  const kda = (checkpoints?: number): CacheGroup => ({
    name: "kda",
    kind: "state",
    num_layers: 9,
    block_size_tokens: 2176,
    prefix_cacheable: true,
    ...(checkpoints === undefined ? {} : { prefill_checkpoint_blocks: checkpoints }),
  });
  it("only 0.32.0 (with or without a local suffix) takes them", () => {
    expect(["0.32.0", "0.32.0+cu128", "0.32.0.post1", "0.32.0-rc"].map(takesPrefillCheckpoints)).toEqual([true, true, true, true]);
    expect(["0.31.0", "0.32.1", "0.33.0", "10.32.0", "0.32.00", "0.32.0rc1"].map(takesPrefillCheckpoints)).toEqual([false, false, false, false, false, false]);
  });
  it("a Mamba-type group of 0.32.0 with prefix caching takes its prefill_checkpoint_blocks, every other case none", () => {
    expect(prefillCheckpointBlocks(kda(2), "0.32.0", true)).toBe(2);
    expect(prefillCheckpointBlocks(kda(), "0.32.0", true)).toBe(0);
    // Without prefix caching vLLM keeps one state block and caches no state.
    expect(prefillCheckpointBlocks(kda(2), "0.32.0", false)).toBe(0);
    expect(prefillCheckpointBlocks(kda(2), "0.31.0", true)).toBe(0);
    // A non-cacheable state (a ring) and full attention never checkpoint.
    expect(prefillCheckpointBlocks({ ...kda(2), prefix_cacheable: false }, "0.32.0", true)).toBe(0);
    expect(prefillCheckpointBlocks({ ...full(16), prefill_checkpoint_blocks: 2 }, "0.32.0", true)).toBe(0);
  });
});
