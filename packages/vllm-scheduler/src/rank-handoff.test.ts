import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { createPromptTokens } from "@kvsim/kv-pool";
import type { Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import type { Command, LifecycleFact } from "./contract.js";
import { expectOk, glmProfile, makeRank, rangePrompt, request, runToIdle, scheduledOf } from "./test-helpers.js";

const reserved = (facts: readonly LifecycleFact[]) =>
  facts.flatMap((f) => (f.type === "destination_reserved" ? [{ handoffId: f.handoffId, missing: f.missing, hitTokens: f.hitTokens }] : []));

describe("GLM-5.3-Flash 0.32.0 source: an 8,192-token prompt on a prefill rank", () => {
  it("computes 8,191 tokens, frees 4 checkpoint blocks, holds 9 and reports the transfer terms", () => {
    const rank = makeRank({
      role: "prefill",
      profile: glmProfile("0.32.0"),
      engine: { num_gpu_blocks: 32, max_num_batched_tokens: 8192 },
      kvTransfer: { mode: "full_prompt", bandwidthGbps: 1 },
    });
    // maxOutputTokens is forced to 1 on a source (vLLM's proxy sends max_tokens = 1).
    const sub = expectOk(rank.submit({ type: "submit_handoff_prefill", handoffId: "h", request: request("r", rangePrompt(0, 8192), 50) }));
    expect(sub.result).toBe("submitted");
    const pass = rank.step(0)!;
    // The KDA groups are Mamba-type: backoff 1, T = 8,192 - 1 = 8,191, in one pass (budget 8,192;
    // 0.32.0 checkpoint blocks replace the block-aligned split).
    expect(scheduledOf(pass)).toEqual({ r: 8191 });
    // A prefill rank charges no decode time: the token comes from the prefill forward at 10 ms.
    expect([pass.prefillMs, pass.decodeMs, pass.endMs]).toEqual([10, 0, 10]);
    expect(pass.effects.tokens).toEqual([{ requestId: "r", index: 0, atMs: 10 }]);
    expect(pass.effects.finished).toEqual([{ requestId: "r" }]);
    // Held: cdiv(8191, 2176) = 4 full-attention blocks + 1 ring + 4 KDA running blocks = 9.
    // Freed at completion: the 4 KDA checkpoint blocks (one per KDA group).
    expect(pass.effects.lifecycle).toEqual([
      {
        type: "source_held",
        handoffId: "h",
        requestId: "r",
        heldPages: 9,
        releasedPages: 4,
        terms: {
          mode: "full_prompt",
          bandwidthGbps: 1,
          backoffTokens: 1,
          transferredTokens: 8191,
          unit: "block",
          blockSizeTokens: 2176,
          promptUnits: 4,
          bytesPerUnit: 13_045_120,
          // ring 22,528 + 2 x 9,768,960 + 2 x 8,683,520 = 36,927,488
          fixedBytes: 36_927_488,
        },
      },
    ]);
    expect(pass.effects.metrics.pagesUsed).toBe(9);
    expect(rank.isDrained()).toBe(false);
    expect(rank.hasWork()).toBe(false);
    const rel = expectOk(rank.submit({ type: "release_source", handoffId: "h" }));
    expect(rel.result).toBe("applied");
    expect(rel.effects.metrics.pagesUsed).toBe(0);
    expect(rank.isDrained()).toBe(true);
    expect(expectOk(rank.submit({ type: "release_source", handoffId: "h" })).result).toBe("noop");
    expect(expectOk(rank.submit({ type: "cancel_source", handoffId: "h" })).result).toBe("noop");
    // Forgotten, the retired handoff is unknown: a late release is refused, the id is free again.
    expect(rank.forgetHandoff("h")).toBe(true);
    expect(rank.forgetHandoff("h")).toBe(false);
    expect(rank.submit({ type: "release_source", handoffId: "h" })).toMatchObject({ ok: false, reason: 'unknown source handoff "h"' });
    expect(expectOk(rank.submit({ type: "submit_handoff_prefill", handoffId: "h", request: request("r2", rangePrompt(0, 8192), 1) })).result).toBe("submitted");
    // A live handoff is not forgotten.
    expect(rank.forgetHandoff("h")).toBe(false);
    expect(expectOk(rank.submit({ type: "cancel_source", handoffId: "h" })).result).toBe("applied");
  });
});

describe("GLM-5.3-Flash 0.32.0 destination: the same request on a decode rank", () => {
  it("reserves 4 full + 1 ring + 4 KDA blocks, computes one token as a decode row, then decodes", () => {
    const rank = makeRank({ role: "decode", profile: glmProfile("0.32.0"), engine: { num_gpu_blocks: 32 } });
    const res = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h", request: request("r", rangePrompt(0, 8192), 3) }));
    expect(res.result).toBe("accepted");
    // T = 8,191: the grouped rank counts missing full-attention blocks, cdiv(8191, 2176) = 4.
    expect(reserved(res.effects.lifecycle)).toEqual([{ handoffId: "h", missing: { unit: "block", units: 4 }, hitTokens: 0 }]);
    // 4 full-attention + 1 ring + 4 KDA (one state block each) = 9 pages.
    expect(res.effects.metrics.pagesUsed).toBe(9);
    expect(rank.load()).toEqual({ running: 0, waiting: 1 });
    expect(rank.step(0)).toBeUndefined(); // nothing runs before activation
    expect(expectOk(rank.submit({ type: "activate_destination", handoffId: "h" })).result).toBe("applied");
    const passes = runToIdle(rank, 100);
    // computed = min(T, N - 1) = 8,191: one token (the last prompt token, from the transferred
    // state), priced as a decode row (2 ms, no prefill), then two more decode passes.
    expect(passes.map((p) => [scheduledOf(p), p.prefillMs, p.decodeMs])).toEqual([
      [{ r: 1 }, 0, 2],
      [{ r: 1 }, 0, 2],
      [{ r: 1 }, 0, 2],
    ]);
    expect(passes.flatMap((p) => p.effects.tokens)).toEqual([
      { requestId: "r", index: 0, atMs: 102 },
      { requestId: "r", index: 1, atMs: 104 },
      { requestId: "r", index: 2, atMs: 106 },
    ]);
    expect(passes[0]!.effects.admissions).toEqual([{ requestId: "r", reusedTokens: 0, resumed: false }]);
    expect(rank.metrics().pagesUsed).toBe(0);
    expect(rank.isDrained()).toBe(true);
  });
});

describe("role checks", () => {
  const handoffCommands: Command[] = [
    { type: "submit_handoff_prefill", handoffId: "h", request: request("r", rangePrompt(0, 4), 1) },
    { type: "release_source", handoffId: "h" },
    { type: "cancel_source", handoffId: "h" },
    { type: "reserve_destination", handoffId: "h", request: request("r", rangePrompt(0, 4), 1) },
    { type: "activate_destination", handoffId: "h" },
    { type: "cancel_destination", handoffId: "h" },
  ];

  it("an aggregated rank refuses all six handoff commands with the reason", () => {
    const rank = makeRank({ profile: glmProfile("0.32.0"), engine: { num_gpu_blocks: 32 } });
    expect(handoffCommands.map((c) => rank.submit(c))).toEqual([
      { ok: false, reason: "submit_handoff_prefill is a source command: it needs a prefill rank, this rank is aggregated" },
      { ok: false, reason: "release_source is a source command: it needs a prefill rank, this rank is aggregated" },
      { ok: false, reason: "cancel_source is a source command: it needs a prefill rank, this rank is aggregated" },
      { ok: false, reason: "reserve_destination is a destination command: it needs a decode rank, this rank is aggregated" },
      { ok: false, reason: "activate_destination is a destination command: it needs a decode rank, this rank is aggregated" },
      { ok: false, reason: "cancel_destination is a destination command: it needs a decode rank, this rank is aggregated" },
    ]);
    expect(rank.isDrained()).toBe(true);
  });

  it("a decode rank refuses source commands and a prefill rank destination commands", () => {
    const decode = makeRank({ role: "decode", profile: glmProfile("0.32.0"), engine: { num_gpu_blocks: 32 } });
    const prefill = makeRank({ role: "prefill", profile: glmProfile("0.32.0"), engine: { num_gpu_blocks: 32 } });
    expect(handoffCommands.slice(0, 3).map((c) => decode.submit(c).ok)).toEqual([false, false, false]);
    expect(decode.submit(handoffCommands[0]!)).toEqual({
      ok: false,
      reason: "submit_handoff_prefill is a source command: it needs a prefill rank, this rank is decode",
    });
    expect(handoffCommands.slice(3).map((c) => prefill.submit(c).ok)).toEqual([false, false, false]);
    expect(prefill.submit(handoffCommands[3]!)).toEqual({
      ok: false,
      reason: "reserve_destination is a destination command: it needs a decode rank, this rank is prefill",
    });
    expect(decode.isDrained() && prefill.isDrained()).toBe(true);
  });
});

describe("linear destination reservations count block-rounded tokens", () => {
  it("a 10-token prompt with 4-token blocks lacks 12 tokens; an identical prompt reserved before activation too", () => {
    const rank = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 64 } });
    const first = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h1", request: request("r1", rangePrompt(0, 10), 2) }));
    // cdiv(10, 4) = 3 blocks x 4 tokens = 12.
    expect(reserved(first.effects.lifecycle)).toEqual([{ handoffId: "h1", missing: { unit: "token", units: 12 }, hitTokens: 0 }]);
    // Blocks still being received are never hashed (docs/rules/vllm-scheduling.md §6 T21, test_no_spurious_prefix_caching).
    const second = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h2", request: request("r2", rangePrompt(0, 10), 2) }));
    expect(reserved(second.effects.lifecycle)).toEqual([{ handoffId: "h2", missing: { unit: "token", units: 12 }, hitTokens: 0 }]);
    // Once r1 is activated its 2 full blocks (tokens 0-7) are cached. A third identical prompt hits
    // them, at most N - 1 = 9 tokens in whole blocks: 8; it lacks cdiv(10, 4) - 8 / 4 = 1 block = 4
    // tokens. The partial third block (tokens 8-9) can never be cached, so a linear destination of
    // 10 tokens never lacks 0 (upstream aisimulate reported 0 here; see the README).
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h1" }));
    const third = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h3", request: request("r3", rangePrompt(0, 10), 2) }));
    expect(reserved(third.effects.lifecycle)).toEqual([{ handoffId: "h3", missing: { unit: "token", units: 4 }, hitTokens: 8 }]);
  });

  it("a grouped destination whose transferred state is cached lacks 0 blocks", () => {
    // Full attention (B 4) and a Mamba-type state (B 4), 0.31.0: N = 9, T = 8. After the first
    // destination is activated, blocks 0-1 and the state at 8 tokens are cached; a second identical
    // prompt hits min(N - 1, T) = 8 tokens and lacks cdiv(8, 4) - 8 / 4 = 0 full-attention blocks.
    const hybrid: Profile = {
      schema_version: 1,
      model: "test/hybrid",
      vllm_version: "0.31.0",
      tensor_parallel_size: 1,
      page_size_bytes: 4096,
      kv_cache_groups: [
        { name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: 4, prefix_cacheable: true, transfer_bytes_per_block: 1000 },
        { name: "mamba", kind: "state", num_layers: 1, block_size_tokens: 4, prefix_cacheable: true, transfer_bytes_per_block: 3000 },
      ],
    };
    const rank = makeRank({ role: "decode", profile: hybrid, engine: { num_gpu_blocks: 64 } });
    const first = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h1", request: request("r1", rangePrompt(0, 9), 2) }));
    expect(reserved(first.effects.lifecycle)).toEqual([{ handoffId: "h1", missing: { unit: "block", units: 2 }, hitTokens: 0 }]);
    expectOk(rank.submit({ type: "activate_destination", handoffId: "h1" }));
    const second = expectOk(rank.submit({ type: "reserve_destination", handoffId: "h2", request: request("r2", rangePrompt(0, 9), 2) }));
    expect(reserved(second.effects.lifecycle)).toEqual([{ handoffId: "h2", missing: { unit: "block", units: 0 }, hitTokens: 8 }]);
  });
});

describe("Mamba-type align mode (docs/rules/vllm-scheduling.md §3.6, _mamba_block_aligned_split)", () => {
  // GLM-5.3-Flash on 0.31.0 has no checkpoint blocks, so with prefix caching the KDA states are
  // checkpointed at 2,176-token boundaries and prefill chunks are cut to them. A source of N = 8,192
  // computes T = 8,191; its last boundary is floor(8191 / 2176) x 2176 = 6,528.
  const source = (budget: number) => {
    const rank = makeRank({ role: "prefill", profile: glmProfile("0.31.0"), engine: { num_gpu_blocks: 32, max_num_batched_tokens: budget } });
    expectOk(rank.submit({ type: "submit_handoff_prefill", handoffId: "h", request: request("r", rangePrompt(0, 8192), 1) }));
    return runToIdle(rank);
  };

  it("a chunk crossing the last boundary ends on it; the last chunk runs to the end", () => {
    // Budget 8,192: 8,191 would cross 6,528, so pass 1 stops there; pass 2 computes 8,191 - 6,528 = 1,663.
    const passes = source(8192);
    expect(passes.map((p) => p.scheduledTokens)).toEqual([6528, 1663]);
    // Held: 4 full-attention + 1 ring + 4 KDA running states (block 3); released at completion: the
    // 4 KDA states checkpointed at 6,528 tokens (block 2), kept until then as the previous state.
    expect(passes[1]!.effects.lifecycle).toMatchObject([
      { type: "source_held", heldPages: 9, releasedPages: 4, terms: { promptUnits: 4, fixedBytes: 36_927_488 } },
    ]);
  });

  it("chunks before the last boundary are cut to whole blocks", () => {
    // Budget 4,096 (n is cut to floor(n / 2176) x 2176 while the chunk ends before 6,528):
    // pass 1: 0 + 4,096 < 6,528 -> n = 2,176; pass 2: 2,176 + 4,096 = 6,272 < 6,528 -> 2,176;
    // pass 3: 4,352 + 4,096 crosses 6,528 -> n = 6,528 - 4,352 = 2,176; pass 4: the last 1,663.
    expect(source(4096).map((p) => p.scheduledTokens)).toEqual([2176, 2176, 2176, 1663]);
  });
});

describe("vLLM 0.32.0 checkpoint blocks: whole-block chunks until the final one", () => {
  // GLM-5.3-Flash on 0.32.0: the final prefill chunk (the one reaching the end of the prompt) is not
  // cut, its checkpoint blocks keep the KDA states at the boundaries inside it; an earlier chunk
  // still ends on a 2,176-token boundary so its running KDA state is a reusable checkpoint.
  const prompt = (tail: number) => createPromptTokens(Uint32Array.from({ length: 11_264 }, (_, i) => (i < 8192 ? i : tail + i)));

  it("cuts a chunk that cannot reach the end to whole blocks, and a later request hits that boundary", () => {
    const rank = makeRank({ role: "aggregated", profile: glmProfile("0.32.0"), engine: { num_gpu_blocks: 64, max_num_batched_tokens: 8192 } });
    expectOk(rank.submit({ type: "submit", request: request("a", prompt(1_000_000), 1) }));
    // Pass 1: 11,264 tokens do not fit the 8,192 budget, so n = floor(8192 / 2176) x 2176 = 6,528.
    // Pass 2: 11,264 - 6,528 = 4,736 tokens reach the end of the prompt and run unchanged.
    const passes = runToIdle(rank);
    expect(passes.map((p) => p.scheduledTokens)).toEqual([6528, 4736]);
    // A second request shares the first 8,192 tokens. Its hit is the largest boundary where both the
    // full-attention blocks and a KDA checkpoint are cached: 6,528 (3 blocks); the checkpoint of the
    // final chunk (at 10,880) lies in the first request's own tail, so it does not match.
    expect(rank.peekPrefixHitTokens(prompt(2_000_000))).toBe(6528);
    expectOk(rank.submit({ type: "submit", request: request("b", prompt(2_000_000), 1) }));
    const next = rank.step(100)!;
    expect(next.effects.admissions).toEqual([{ requestId: "b", reusedTokens: 6528, resumed: false }]);
    // 11,264 - 6,528 = 4,736 tokens left, which reach the end: one pass.
    expect(next.scheduledTokens).toBe(4736);
  });
});

describe("retired handoffs do not keep their requests alive", () => {
  // A rank keeps only a tombstone of a retired handoff (its side and how it ended), never its
  // request: the prompt (tens of thousands of tokens in a real trace) must become garbage.
  const collectGarbage = (): (() => void) => {
    setFlagsFromString("--expose-gc");
    return runInNewContext("gc") as () => void;
  };

  it("a released source, a completed destination and a cancelled one: every prompt is collectable, late cleanups stay no-ops", async () => {
    const gc = collectGarbage();
    const prefill = makeRank({ role: "prefill", engine: { block_size: 4, num_gpu_blocks: 64 } });
    const decode = makeRank({ role: "decode", engine: { block_size: 4, num_gpu_blocks: 64 } });
    const refs: WeakRef<object>[] = [];
    // Builds each prompt inside the helper so the test holds only WeakRefs to them.
    const handoff = (i: number, cancelDestination: boolean): void => {
      const prompt = rangePrompt(100 * i, 8);
      refs.push(new WeakRef(prompt));
      const id = `h${i}`;
      expectOk(prefill.submit({ type: "submit_handoff_prefill", handoffId: id, request: request(`r${i}`, prompt, 1) }));
      runToIdle(prefill);
      expectOk(decode.submit({ type: "reserve_destination", handoffId: id, request: request(`r${i}`, prompt, 2) }));
      if (cancelDestination) {
        expect(expectOk(decode.submit({ type: "cancel_destination", handoffId: id })).result).toBe("applied");
      } else {
        expectOk(decode.submit({ type: "activate_destination", handoffId: id }));
        runToIdle(decode);
      }
      expect(expectOk(prefill.submit({ type: "release_source", handoffId: id })).result).toBe("applied");
    };
    for (let i = 0; i < 8; i++) handoff(i, i % 2 === 1);
    expect([prefill.isDrained(), decode.isDrained()]).toEqual([true, true]);
    // WeakRefs created in this job stay alive until it ends: let it end, then collect.
    await new Promise((r) => setTimeout(r, 0));
    gc();
    expect(refs.filter((r) => r.deref() !== undefined).length).toBe(0);
    // The tombstones keep the command semantics: cleanups are no-ops, ids stay used, an
    // activation after completion is a no-op and after a cancel is refused.
    expect(expectOk(prefill.submit({ type: "release_source", handoffId: "h0" })).result).toBe("noop");
    expect(expectOk(prefill.submit({ type: "cancel_source", handoffId: "h1" })).result).toBe("noop");
    expect(expectOk(decode.submit({ type: "cancel_destination", handoffId: "h0" })).result).toBe("noop");
    expect(expectOk(decode.submit({ type: "activate_destination", handoffId: "h0" })).result).toBe("noop");
    expect(decode.submit({ type: "activate_destination", handoffId: "h1" })).toEqual({ ok: false, reason: 'destination handoff "h1" was cancelled' });
    expect(prefill.submit({ type: "submit_handoff_prefill", handoffId: "h2", request: request("x", rangePrompt(0, 4), 1) })).toEqual({
      ok: false,
      reason: 'handoff "h2" was already used on this rank',
    });
  });

  it("a source cancelled while held and a source released before it completed: both prompts are collectable", async () => {
    const gc = collectGarbage();
    const prefill = makeRank({ role: "prefill", engine: { block_size: 4, num_gpu_blocks: 64 } });
    const refs: WeakRef<object>[] = [];
    const submit = (id: string): void => {
      const prompt = rangePrompt(id === "a" ? 0 : 1000, 8);
      refs.push(new WeakRef(prompt));
      expectOk(prefill.submit({ type: "submit_handoff_prefill", handoffId: id, request: request(`r-${id}`, prompt, 1) }));
    };
    submit("a");
    runToIdle(prefill);
    expect(expectOk(prefill.submit({ type: "cancel_source", handoffId: "a" })).result).toBe("applied");
    submit("b");
    expect(expectOk(prefill.submit({ type: "release_source", handoffId: "b" })).result).toBe("applied");
    runToIdle(prefill);
    expect(prefill.isDrained()).toBe(true);
    await new Promise((r) => setTimeout(r, 0));
    gc();
    expect(refs.filter((r) => r.deref() !== undefined).length).toBe(0);
    expect(expectOk(prefill.submit({ type: "release_source", handoffId: "a" })).result).toBe("noop");
    expect(expectOk(prefill.submit({ type: "cancel_source", handoffId: "b" })).result).toBe("noop");
  });
});
