import { describe, expect, it } from "vitest";
import { admit, group, manager, range, seqOf } from "./test-helpers.js";

// P/D handoff rules at the exact edges where an off-by-one would change the answer: the window
// blocks a source frees, a destination's local hit, a source's checkpoint blocks. Each expected
// value is derived in the comment beside it.

describe("a window group where C - W + 1 is a whole number of blocks (W 33, B 16, C 1,024)", () => {
  // S(C) = C - W + 1 = 1024 - 33 + 1 = 992 = 62 x 16 tokens lie below the window of the next token:
  // blocks 0..61 go, blocks 62 and 63 stay. (C - W = 991 would free only 61 and keep 3.)
  const groups = [group("full_attention", 16), group("sliding_window", 16, { window_tokens: 33 })];

  it("the source frees 62 window blocks and keeps 2", () => {
    const m = manager(200, groups);
    const seq = seqOf(m, "r", range(0, 1024));
    expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: 1024 })).toBe(true);
    m.commitComputed(seq, 1024);
    // One pass from C = 0 trims nothing: cdiv(1024, 16) = 64 blocks in each group.
    expect(m.heldBlocks(seq)).toEqual([64, 64]);
    expect(m.releaseSourceSkipped(seq, 1024)).toBe(62);
    expect(m.heldBlocks(seq)).toEqual([64, 2]);
  });

  it("the next step frees the same 62 before it takes the block of token 1,024", () => {
    const m = manager(200, groups);
    const seq = seqOf(m, "r", range(0, 1025));
    expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: 1024 })).toBe(true);
    m.commitComputed(seq, 1024);
    // Step at C = 1,024: window blocks 0..61 released, block 64 taken: 64 - 62 + 1 = 3 window
    // blocks; full attention cdiv(1025, 16) = 65.
    expect(m.allocateSlots(seq, { computedTokens: 1024, newTokens: 1 })).toBe(true);
    expect(m.heldBlocks(seq)).toEqual([65, 3]);
  });

  it("a destination of T = 1,024 reserves 2 window blocks", () => {
    const m = manager(200, groups);
    const dst = seqOf(m, "dst", range(0, 1024));
    // No local hit: full attention 64 fresh blocks; window 64 - 62 = 2. 66 pages.
    expect(m.reserveDestination(dst, 1024)).toEqual({ hitTokens: 0, missingFullAttentionBlocks: 64, reservedPages: 66 });
    expect(m.heldBlocks(dst)).toEqual([64, 2]);
  });
});

describe("a destination's local hit never covers the whole prompt", () => {
  it("attention only, T = N = 32 (B 16) cached in full: the hit is 16 tokens and the last block moves", () => {
    const m = manager(20, [group("full_attention", 16)]);
    // A finished 48-token request leaves blocks 0..2 (tokens 0..47) cached.
    const warm = seqOf(m, "warm", range(0, 48));
    expect(admit(m, warm)).toEqual({ ok: true, hit: 0 });
    m.free(warm);
    // The destination's 32 tokens are all cached, but a hit is at most N - 1 = 31 tokens, whole
    // blocks: 16. It lacks cdiv(32, 16) - 1 = 1 block; it holds the hit block and 1 fresh one.
    const dst = seqOf(m, "dst", range(0, 32));
    expect(m.reserveDestination(dst, 32)).toEqual({ hitTokens: 16, missingFullAttentionBlocks: 1, reservedPages: 2 });
  });
});

describe("a vLLM 0.32.0 source releases its checkpoint blocks after a chunked prefill", () => {
  it("full attention + a Mamba-type state with 2 checkpoint blocks (B 16), N = 100 in chunks of 64 and 36", () => {
    const m = manager(40, [group("full_attention", 16), group("state", 16, { name: "mamba", prefill_checkpoint_blocks: 2 })], { version: "0.32.0" });
    expect(m.prefillChunking).toBe("whole_blocks_before_final");
    const seq = seqOf(m, "src", range(0, 100));
    // Chunk 1, tokens 0..63 (it does not reach the end of the prompt: no checkpoint blocks): full
    // attention 4 blocks, the state its running block (its state at 64 is cached on commit).
    expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: 64 })).toBe(true);
    m.commitComputed(seq, 64);
    expect(m.heldBlocks(seq)).toEqual([4, 1]);
    // Chunk 2, tokens 64..99, reaches the end: full attention cdiv(100, 16) = 7 blocks; the state
    // keeps the previous state block (at 64), takes a new running block and 2 checkpoint blocks for
    // the last 2 boundaries inside the chunk (96 and 80): 4.
    expect(m.allocateSlots(seq, { computedTokens: 64, newTokens: 36 })).toBe(true);
    m.commitComputed(seq, 100);
    expect(m.heldBlocks(seq)).toEqual([7, 4]);
    // Release: the previous state block and both checkpoint blocks go, the running block stays.
    expect(m.releaseSourceSkipped(seq, 100)).toBe(3);
    expect(m.heldBlocks(seq)).toEqual([7, 1]);
    // The three freed blocks hold the states at 64, 80 and 96: hashed, so still cached. 39 usable
    // pages - 8 held = 31 free.
    expect(m.metrics()).toMatchObject({ usablePages: 39, usedPages: 8, freePages: 31, cachedEvictablePages: 3 });
  });
});
