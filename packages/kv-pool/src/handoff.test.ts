import { engineSettings } from "@kvsim/profile-schema";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { describe, expect, it } from "vitest";
import { computeBlockHashes } from "./hashing.js";
import { KvCacheManager, poolOf } from "./kv-cache-manager.js";
import { poolGroupsForProfile } from "./pool-groups.js";
import { createPromptTokens } from "./prompt-tokens.js";
import { group, manager, range, seqOf } from "./test-helpers.js";

describe("source release (docs/rules/grouped-pd.md §3)", () => {
  it("a 1,024-token prefill with a 32-token window (B 16) holds 2 of its 64 window blocks", () => {
    const m = manager(200, [group("full_attention", 16), group("sliding_window", 16, { window_tokens: 32 })]);
    const seq = seqOf(m, "r", range(0, 1024));
    // One pass: C = 0 at allocation, so nothing is trimmed: cdiv(1024,16) = 64 blocks per group.
    expect(m.allocateSlots(seq, { computedTokens: 0, newTokens: 1024 })).toBe(true);
    m.commitComputed(seq, 1024);
    expect(m.heldBlocks(seq)).toEqual([64, 64]);
    // S(1024) = 1024 - 32 + 1 = 993 tokens -> floor(993/16) = 62 blocks below the window.
    expect(m.releaseSourceSkipped(seq, 1024)).toBe(62);
    expect(m.heldBlocks(seq)).toEqual([64, 2]);
    // The 62 freed blocks were full and computed, so hashed: back in the queue and still cached.
    expect(m.metrics()).toMatchObject({ usablePages: 199, usedPages: 66, freePages: 133, cachedEvictablePages: 62 });
    // Per group: the full-attention table holds 64, the window table 2; the 62 cached ones are the window's.
    expect(Array.from(m.groupPages().used)).toEqual([64, 2]);
    expect(Array.from(m.groupPages().cached)).toEqual([0, 62]);
  });

  it("a GLM-5.3-Flash 0.32.0 source of 8,191 tokens holds 13 blocks, then 9; its checkpoints stay cached", () => {
    // docs/rules/grouped-pd.md §2 table: every group has 2,176-token blocks; page 13,045,120 B.
    // (The fixture is built from that table, with prefill_checkpoint_blocks 1 on the KDA groups.)
    const profile = glmFlashProfile("0.32.0");
    const m = new KvCacheManager({
      numPages: 64,
      groups: poolGroupsForProfile(profile, engineSettings({ num_gpu_blocks: 64 })),
      enablePrefixCaching: true,
      vllmVersion: "0.32.0",
    });
    // With checkpoint blocks on 0.32.0 a chunk that reaches the end of the prompt is not cut.
    expect(m.prefillChunking).toBe("whole_blocks_before_final");
    // The 8,192-token prompt backs off one token: the source computes T = 8,191.
    const prompt = createPromptTokens(Uint32Array.from(range(0, 8191)));
    const src = m.createSequence("src", prompt);
    // Full: cdiv(8191, 2176) = 4; ring 1; each KDA group: 1 running + 1 checkpoint = 2 -> 4 + 1 + 8 = 13.
    expect(m.pagesNeeded(src, { computedTokens: 0, newTokens: 8191 })).toBe(13);
    expect(m.allocateSlots(src, { computedTokens: 0, newTokens: 8191 })).toBe(true);
    m.commitComputed(src, 8191);
    expect(m.heldBlocks(src)).toEqual([4, 1, 2, 2, 2, 2]);
    // Release: the 4 checkpoint blocks go (no previous state block exists after one pass).
    expect(m.releaseSourceSkipped(src, 8191)).toBe(4);
    expect(m.heldBlocks(src)).toEqual([4, 1, 1, 1, 1, 1]);
    // 63 usable - 9 held = 54 free, of which the 4 checkpoints are cached (the boundary at
    // 3 x 2176 = 6528 is the last one inside the chunk (0, 8191)).
    expect(m.metrics()).toMatchObject({ usedPages: 9, freePages: 54, cachedEvictablePages: 4 });
    // Per group: as heldBlocks; each of the 4 KDA groups (2..5) left its one checkpoint cached.
    expect(Array.from(m.groupPages().used)).toEqual([4, 1, 1, 1, 1, 1]);
    expect(Array.from(m.groupPages().cached)).toEqual([0, 0, 1, 1, 1, 1]);
    // A second request with the same prompt: M = 8190 -> floor(8190/2176) = 3 full blocks (6528 tokens),
    // and every KDA group has the state at 6528 (its checkpoint): the hit is 6528 tokens.
    const again = m.createSequence("again", prompt);
    const hit = m.findPrefixHit(again);
    expect(hit.tokens).toBe(6528);
    // Its allocation: full 4 - 3 hit = 1; ring 1; each KDA: 1 running + 1 evictable checkpoint (touched)
    // + 1 checkpoint block for its own chunk (6528 is its start, not inside: taken, no hash) = 3.
    // 1 + 1 + 4 x 3 = 14.
    expect(m.pagesNeeded(again, { computedTokens: 0, newTokens: 8191 - 6528, hit })).toBe(14);
    expect(m.allocateSlots(again, { computedTokens: 0, newTokens: 8191 - 6528, hit })).toBe(true);
    expect(m.metrics()).toMatchObject({ freePages: 54 - 14, cachedEvictablePages: 0 });
  });
});

describe("destination reservation and activation (docs/rules/grouped-pd.md §4)", () => {
  // Full, SW (W 32), Mamba-type state and a ring, all B 16; 199 usable pages.
  const groups = [
    group("full_attention", 16),
    group("sliding_window", 16, { window_tokens: 32 }),
    group("state", 16, { name: "mamba" }),
    group("state", 16, { name: "ring", prefix_cacheable: false }),
  ];
  const prompt = range(1000, 2001); // N = 1001; a Mamba-type model transfers T = 1000

  /** Leaves a hit of 512 tokens on the rank: a request sharing 600 tokens, in block-aligned chunks. */
  function warmed(): KvCacheManager {
    const m = manager(200, groups, { events: true });
    expect(m.prefillChunking).toBe("align_split");
    const warm = seqOf(m, "warm", prompt.slice(0, 600));
    expect(m.allocateSlots(warm, { computedTokens: 0, newTokens: 512 })).toBe(true);
    m.commitComputed(warm, 512); // 512 = 32 x 16: the state block at index 31 is cached
    expect(m.allocateSlots(warm, { computedTokens: 512, newTokens: 88 })).toBe(true);
    m.commitComputed(warm, 600); // 600 is mid-block: no state cached
    m.free(warm);
    m.takeEvents();
    return m;
  }

  it("reserves the window-limited blocks over the local hit, then makes them cache-visible on activation", () => {
    const m = warmed();
    const pool = poolOf(m);
    expect(m.metrics().freePages).toBe(199);
    const dst = seqOf(m, "dst", prompt);
    // Hit: full attention has 37 cached blocks (592), SW its last 2 before 592, but the Mamba state
    // exists only at 512 -> second pass at 512: all agree -> L = 512.
    const res = m.reserveDestination(dst, 1000);
    // Full: cdiv(1000,16) = 63 blocks, 512/16 = 32 reused -> 31 missing (fresh).
    // SW: floor((1000 - 31)/16) = 60 nulls, blocks 60..62 in the window -> 3 fresh.
    // Mamba 1 fresh, ring 1 fresh. Held: 63 + 3 + 1 + 1 = 68.
    expect(res).toEqual({ hitTokens: 512, missingFullAttentionBlocks: 31, reservedPages: 68 });
    expect(m.heldBlocks(dst)).toEqual([63, 3, 1, 1]);
    // 32 evictable hit blocks touched + 36 fresh taken: 199 - 68 = 131.
    expect(m.metrics().freePages).toBe(131);
    // Nothing new is cache-visible before activation.
    expect(m.takeEvents()).toEqual([]);
    const fresh = computeBlockHashes(prompt, 16);
    expect(pool.cachedBlock(0, fresh[40]!.blockHash)).toBe(0);

    m.activateDestination(dst, 1000);
    // Full: blocks 32..61 are full (floor(1000/16) = 62); 32..36 were already cached by the warm
    // request (duplicates are not announced), so the stored run is 37..61 (25 blocks), parent = block 36.
    // SW: in-window full blocks 60 and 61, parent = block 59. Mamba: 1000 is mid-block, nothing.
    const events = m.takeEvents();
    expect(events).toEqual([
      {
        type: "stored",
        groupIndex: 0,
        parentHash: fresh[36]!.blockHash,
        blocks: fresh.slice(37, 62).map(({ blockHash, tokensHash }) => ({ blockHash, tokensHash })),
      },
      {
        type: "stored",
        groupIndex: 1,
        parentHash: fresh[59]!.blockHash,
        blocks: fresh.slice(60, 62).map(({ blockHash, tokensHash }) => ({ blockHash, tokensHash })),
      },
    ]);
    // The one-token row (the last prompt token) needs no new block: cdiv(1001,16) = 63 everywhere.
    expect(m.pagesNeeded(dst, { computedTokens: 1000, newTokens: 1 })).toBe(0);
    expect(m.allocateSlots(dst, { computedTokens: 1000, newTokens: 1 })).toBe(true);
  });

  it("returns undefined and changes nothing when the reservation does not fit", () => {
    const m = manager(60, groups);
    const dst = seqOf(m, "dst", prompt);
    // 63 + 3 + 1 + 1 = 68 fresh pages > 59 usable.
    const before = poolOf(m).freeQueueOrder();
    expect(m.reserveDestination(dst, 1000)).toBeUndefined();
    expect(poolOf(m).freeQueueOrder()).toEqual(before);
    expect(m.heldBlocks(dst)).toEqual([0, 0, 0, 0]);
  });

  it("frees a cancelled reservation", () => {
    const m = manager(200, groups);
    const dst = seqOf(m, "dst", prompt);
    expect(m.reserveDestination(dst, 1000)?.reservedPages).toBe(68);
    m.free(dst);
    expect(m.metrics().freePages).toBe(199);
  });
});
