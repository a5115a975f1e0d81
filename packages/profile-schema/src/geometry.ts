import type { CacheGroup } from "./profile.js";
import { isMambaTypeGroup, isWindowKind } from "./profile.js";
import { blocks, type Blocks, type Tokens } from "./units.js";

/** Ceiling division of non-negative integers. */
export function cdiv(a: number, b: number): number {
  if (b <= 0) throw new RangeError(`cdiv by ${b}`);
  return Math.floor((a + b - 1) / b);
}

/** The window of a sliding-window or convolution group; undefined for other kinds. */
export function groupWindow(group: CacheGroup): number | undefined {
  return isWindowKind(group.kind) ? group.window_tokens : undefined;
}

/**
 * Blocks of a window group that lie wholly below the window of the next token after `computed`
 * tokens: floor(max(0, C - W + 1) / B). vLLM frees (nulls) them. Zero for groups without a window.
 */
export function skippedWindowBlocks(group: CacheGroup, computed: Tokens): Blocks {
  const w = groupWindow(group);
  if (w === undefined) return blocks(0);
  return blocks(Math.floor(Math.max(0, computed - w + 1) / group.block_size_tokens));
}

/** Blocks that cover `t` tokens: cdiv(T, B). */
export function blocksCovering(group: CacheGroup, t: Tokens): Blocks {
  return blocks(cdiv(t, group.block_size_tokens));
}

/**
 * Blocks of a window group inside the window of the next token once `t` tokens are computed:
 * cdiv(T, B) - floor(max(0, T - W + 1) / B). For a full-attention group, all cdiv(T, B) blocks.
 */
export function inWindowBlocks(group: CacheGroup, t: Tokens): Blocks {
  return blocks(cdiv(t, group.block_size_tokens) - skippedWindowBlocks(group, t));
}

/** The prefill side's clip for a window group: cdiv(W, B) + 1 blocks (vLLM's blocks_per_sw). */
export function windowClipBlocks(group: CacheGroup): Blocks {
  const w = groupWindow(group);
  if (w === undefined) throw new RangeError(`group ${group.name} (${group.kind}) has no window`);
  return blocks(cdiv(w, group.block_size_tokens) + 1);
}

/**
 * Blocks a group holds for `t` computed tokens once blocks below the window are released:
 * full attention cdiv(T, B); window groups the in-window blocks; state groups one block (the
 * running state, or the one block of a ring). Zero tokens hold nothing.
 */
export function groupBlocksForTokens(group: CacheGroup, t: Tokens): Blocks {
  if (t <= 0) return blocks(0);
  switch (group.kind) {
    // Stryker disable next-line ConditionalExpression: PS-01
    case "full_attention":
      return blocksCovering(group, t);
    case "sliding_window":
    case "convolution":
      return inWindowBlocks(group, t);
    case "state":
      return blocks(1);
  }
}

/**
 * True for a vLLM release whose Mamba-type groups take `prefill_checkpoint_blocks`: 0.32.0, with
 * or without a local suffix (0.32.0+cu128, 0.32.0.post1). The one place kvsim asks it.
 */
export function takesPrefillCheckpoints(vllmVersion: string): boolean {
  return /^0\.32\.0(?:[+.-].*)?$/.test(vllmVersion);
}

/**
 * Checkpoint blocks a group takes, beside its running state block, in the prefill chunk that
 * reaches the end of the prompt: its `prefill_checkpoint_blocks` on a Mamba-type group of vLLM
 * 0.32.0 with prefix caching on; zero otherwise (without prefix caching vLLM keeps one state
 * block and caches no state, so there is nothing to checkpoint).
 */
export function prefillCheckpointBlocks(group: CacheGroup, vllmVersion: string, enablePrefixCaching: boolean): Blocks {
  if (!enablePrefixCaching || !isMambaTypeGroup(group) || !takesPrefillCheckpoints(vllmVersion)) return blocks(0);
  return blocks(group.prefill_checkpoint_blocks ?? 0);
}
