import { describe, expect, it } from "vitest";
import { engineSettings } from "@kvsim/profile-schema";
import { LockstepClock, WAVE_CHECK_STEPS, dummyStepMs, pickDpRank } from "./data-parallel.js";
import { runReplay, type ReplayResult } from "./replay.js";
import { byLength, linearProfile, traceSpec } from "./test-fixtures.js";

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`replay failed: ${r.reason}`);
  return r;
}

const loads = (...l: [running: number, waiting: number][]) => l.map(([running, waiting]) => ({ load: () => ({ running, waiting }) }));
const fixed = (prefill_ms: number, decode_ms: number) => ({ type: "fixed", prefill_ms, decode_ms });
// A roomy pool of 4-token blocks, 4 sequences and 64 tokens per step on each rank.
const engine = (dp: number, ep: boolean, more: Record<string, unknown> = {}) => ({
  num_gpu_blocks: 1024,
  block_size: 4,
  max_num_seqs: 4,
  max_num_batched_tokens: 64,
  data_parallel_size: dp,
  enable_expert_parallel: ep,
  ...more,
});
const aggregated = (dp: number, ep: boolean, timing: Record<string, unknown> = fixed(10, 2), more: Record<string, unknown> = {}) =>
  traceSpec({ profile: linearProfile(1000), topology: { kind: "aggregated", workers: 1 }, engine: engine(dp, ep, more), timing });

describe("pickDpRank: vLLM's data-parallel load balancer", () => {
  it("takes the least waiting x 4 + running", () => {
    // Scores 3, 4, 2: rank 2. By running + waiting (3, 1, 2) rank 1 would win.
    expect(pickDpRank(loads([3, 0], [0, 1], [2, 0]))).toBe(2);
    // 4 running (4) beats 1 running + 1 waiting (5), though it has more requests.
    expect(pickDpRank(loads([4, 0], [1, 1]))).toBe(0);
  });
  it("breaks ties to the lowest rank", () => {
    expect(pickDpRank(loads([0, 0], [0, 0], [0, 0]))).toBe(0);
    // Scores 5, 4, 4: rank 1, the first of the two fours.
    expect(pickDpRank(loads([1, 1], [4, 0], [0, 1]))).toBe(1);
  });
});

describe("LockstepClock", () => {
  it("lasts as long as the slowest rank; no rank with work gives no length", () => {
    expect(LockstepClock.stepMs([2, undefined, 10, 3])).toBe(10);
    expect(LockstepClock.stepMs([undefined, undefined])).toBeUndefined();
  });
  it("ends a wave only at a check step (every 32nd) that finds every rank empty", () => {
    const c = new LockstepClock();
    c.startWork();
    // Steps 1..31: even with every rank empty, no check happens.
    for (let i = 1; i < WAVE_CHECK_STEPS; i++) c.endStep(i > 5, false);
    expect([c.waveRunning, c.steps]).toEqual([true, 31]);
    c.endStep(true, false); // step 32: checked, empty -> the wave ends
    expect([c.waveRunning, c.steps, c.totalSteps, c.dummySteps, c.waves]).toEqual([false, 0, 32, 27, 1]);
    c.startWork();
    for (let i = 1; i <= WAVE_CHECK_STEPS; i++) c.endStep(false, true); // step 32 finds a request: the wave goes on
    expect([c.waveRunning, c.steps, c.waves]).toEqual([true, 32, 2]);
  });
});

describe("dummyStepMs: the price of an idle expert-parallel step", () => {
  const config = (role: "aggregated" | "prefill" | "decode", timing: Record<string, unknown>) => ({
    role,
    profile: linearProfile(1000),
    engine: engineSettings({ block_size: 4, cudagraph_capture_sizes: [4, 8] }),
    timing: timing as never,
  });
  it("fixed: the decode price (a prefill rank: the prefill price)", () => {
    expect(dummyStepMs(config("aggregated", fixed(10, 2)))).toBe(2);
    expect(dummyStepMs(config("decode", fixed(10, 2)))).toBe(2);
    expect(dummyStepMs(config("prefill", fixed(10, 2)))).toBe(10);
  });
  it("polynomial: the decode polynomial at one KV token of the pool's", () => {
    // Pool: 16,384 pages x 4 tokens = 65,536 tokens; p = 1 / 65,536: -25.74 p^2 + 54.01 p + 5.74.
    const p = 1 / 65_536;
    expect(dummyStepMs(config("aggregated", { type: "polynomial" }))).toBeCloseTo(-25.74 * p * p + 54.01 * p + 5.74, 12);
  });
  it("linear: one decode row of one KV token, padded to the smallest capture size", () => {
    const linear = {
      type: "linear",
      step_ms: 3,
      per_sequence_ms: 0.5,
      per_kv_token_us: 100,
      per_prompt_token_us: 50,
      per_cached_token_us: 0,
      prompt_step_ms: 1,
    };
    // 3 + 0.5 x 4 (1 padded to 4) + 100 us x 1 token = 3 + 2 + 0.1 = 5.1 ms.
    expect(dummyStepMs(config("aggregated", linear))).toBeCloseTo(5.1, 12);
    // A prefill rank: one prompt row of one token: 3 + 0.5 x 1 + 1 + 50 us = 4.55 ms.
    expect(dummyStepMs(config("prefill", linear))).toBeCloseTo(4.55, 12);
  });
});

describe("data-parallel replay (fixed timing 10 / 2 ms, hand-derived)", () => {
  it("places by waiting x 4 + running, ties to rank 0, over independent ranks", async () => {
    // At 0, eight requests in a row (rank loads as waiting): r1 -> 0 (tie), r2 -> 1 (4 vs 0),
    // r3 -> 0 (4 vs 4), r4 -> 1 (8 vs 4), r5 -> 0 (8 vs 8), r6 -> 1, r7 -> 0, r8 -> 1.
    // Rank 0 gets r1, r3, r5, r7 (100 outputs each: running until ~210 ms), rank 1 gets r2, r4,
    // r6, r8 (1 output: done at 12, prefill 10 + decode 2).
    // r9 at 20: rank 0 scores 4 (running), rank 1 0 -> rank 1; its pass runs 20 -> 32.
    // r10 at 21: 4 vs 1 (r9 running) -> rank 1, waiting: rank 1 scores 1 + 4 = 5.
    // r11 at 22: 4 vs 5 -> rank 0 (by running + waiting, 4 vs 2, it would go to rank 1).
    const outs = [100, 1, 100, 1, 100, 1, 100, 1];
    const records = [...outs.map((o, i) => byLength(i + 1, 0, 4, o)), byLength(9, 20, 4, 2), byLength(10, 21, 4, 2), byLength(11, 22, 4, 2)];
    const r = ok(await runReplay({ spec: aggregated(2, false), records }));
    expect(r.records.map((x) => x.dp_ranks?.aggregated)).toEqual([0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 0]);
    expect(r.records.every((x) => x.workers.aggregated === 0 && x.status === "completed")).toBe(true);
    // r9 alone on rank 1 from 20: first token at 32 (independent ranks: rank 0's decodes do not matter).
    expect(r.records[8]!.first_token_ms).toBe(32);
    expect(r.report.data_parallel).toEqual({ aggregated: { data_parallel_size: 2, expert_parallel: false, workers: [{ placed: [5, 6] }] } });
  });

  // r1 (4 tokens, 6 outputs) at 0 goes to rank 0; r2 (256 tokens, 1 output) at 13 goes to rank 1
  // (rank 0 scores 1 running, rank 1 0). The budget of 64 tokens splits r2 into four chunks.
  const records = () => [byLength(1, 0, 4, 6), byLength(2, 13, 256, 1)];

  it("expert parallel: the decode rank's ITL is the busy rank's step time", async () => {
    // Lockstep steps (rank 0 | rank 1 -> the step's length, the slowest):
    //   A  0 -> 12: r1 prefill + token 0 (10 + 2) | dummy          -> 12: token 0 at 12
    //   B 12 -> 14: r1 decode (2)                   | dummy (r2 arrives at 13, mid-step)
    //   C 14 -> 24: decode (2)                      | chunk 1 (10)  -> 10: token 2 at 24
    //   D 24 -> 34: decode                          | chunk 2       -> token 3 at 34
    //   E 34 -> 44: decode                          | chunk 3       -> token 4 at 44
    //   F 44 -> 56: decode (2)                      | chunk 4 + r2's token (10 + 2) -> 12: token 5 and r2's at 56
    // r1: tokens at 12, 14, 24, 34, 44, 56: ITL 2, 10, 10, 10, 12; TPOT (56 - 12) / 5 = 8.8.
    // r2: arrival 13, token at 56: TTFT 43.
    // Then the wave's tail: steps 7..32 are dummies of 2 ms (fixed decode_ms): the wave ends at 56 + 26 x 2 = 108.
    const r = ok(await runReplay({ spec: aggregated(2, true), records: records() }));
    const [r1, r2] = r.records;
    expect(r.records.map((x) => x.dp_ranks?.aggregated)).toEqual([0, 1]);
    expect([r1!.first_token_ms, r1!.last_token_ms, r1!.tpot_ms]).toEqual([12, 56, 8.8]);
    expect([r2!.first_token_ms, r2!.ttft_ms]).toEqual([56, 43]);
    // ITL gaps over both requests: r1's five (r2 has one token): 2, 10, 10, 10, 12.
    expect([r.report.mean_itl_ms, r.report.p50_itl_ms, r.report.p99_itl_ms]).toEqual([8.8, 10, 12]);
    expect(r.report.data_parallel).toEqual({
      aggregated: { data_parallel_size: 2, expert_parallel: true, workers: [{ placed: [1, 1], steps: 32, idle_steps: 26, waves: 1 }] },
    });
  });

  it("without expert parallelism the same ranks step independently", async () => {
    // Rank 0: r1's tokens at 12, 14, 16, 18, 20, 22 (TPOT 2). Rank 1 is idle when r2 arrives at 13:
    // chunks 13 -> 23 -> 33 -> 43, then the last chunk and the token 43 -> 55: TTFT 42.
    const r = ok(await runReplay({ spec: aggregated(2, false), records: records() }));
    const [r1, r2] = r.records;
    expect([r1!.first_token_ms, r1!.last_token_ms, r1!.tpot_ms]).toEqual([12, 22, 2]);
    expect([r2!.first_token_ms, r2!.ttft_ms]).toEqual([55, 42]);
  });

  it("a request arriving in the wave's tail joins at the next dummy boundary; after the wave ends it starts at once", async () => {
    // r1 (4 tokens, 1 output) at 0: step 1, 0 -> 12. Tail dummies of 2 ms from 12: boundaries 14, 16, ...
    // r2 at 17 (4 tokens, 1 output): joins at 18 (step 4, 16 -> 18 ends): token at 18 + 12 = 30, TTFT 13.
    // Steps 2-4 were dummies, step 5 ran r2; dummies 6..32 follow: the wave ends at 30 + 27 x 2 = 84.
    // r3 at 200: the ranks are paused, it starts at once: token at 212, TTFT 12; a second wave.
    const r = ok(await runReplay({ spec: aggregated(2, true), records: [byLength(1, 0, 4, 1), byLength(2, 17, 4, 1), byLength(3, 200, 4, 1)] }));
    expect(r.records.map((x) => [x.first_token_ms, x.ttft_ms])).toEqual([
      [12, 12],
      [30, 13],
      [212, 12],
    ]);
    const w = r.report.data_parallel?.aggregated?.workers[0];
    // Wave 1: 32 steps (r1, r2 and 30 dummies); wave 2: 32 steps (r3 and 31 dummies).
    expect(w).toEqual({ placed: [3, 0], steps: 64, idle_steps: 61, waves: 2 });
  });

  it("each rank has its own KV pool (num_gpu_blocks per rank)", async () => {
    // 5 pages per rank (4 usable) of 4 tokens hold 16 tokens. Two 12-token prompts (3 blocks + 1
    // for the output) cannot share one rank's pool, but one per rank fits: both run at once and
    // neither is preempted or rejected. r2 goes to rank 1 (rank 0 scores 4 with r1 waiting).
    const spec = aggregated(2, true, fixed(10, 2), { num_gpu_blocks: 5 });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 12, 2), byLength(2, 0, 12, 2)] }));
    expect(r.records.map((x) => [x.dp_ranks?.aggregated, x.status, x.first_token_ms, x.preemptions])).toEqual([
      [0, "completed", 12, 0],
      [1, "completed", 12, 0],
    ]);
  });

  it("P/D: a decode worker of 2 lockstep ranks starts an activated request at its next step boundary", async () => {
    // Linear profile of 10^6 B per token moved in full_prompt mode at 1 GB/s; one prefill rank, one
    // decode worker of 2 ranks. r1 (4 tokens, 3 outputs) and r2 (7 tokens, 2 outputs) at 0 share one
    // prefill pass 0 -> 10 (a prefill rank charges prefill 10 only): both sources held at 10.
    // Reservations in that order: r1 -> decode rank 0 (tie), r2 -> rank 1 (rank 0 scores 4, its
    // reservation waiting). Transfers 4 and 7 ms: r1 activated at 14, r2 at 17.
    // Lockstep: steps 14 -> 16 (r1's token 0) and 16 -> 18 (token 1); r2, activated mid-step, waits
    // for the boundary at 18: 18 -> 20 gives r1's token 2 and r2's token 0, 20 -> 22 r2's token 1.
    // Independent: rank 1 starts at 17: r2's tokens at 19 and 21. r1 is the same either way.
    const spec = (ep: boolean) =>
      traceSpec({
        profile: linearProfile(1_000_000),
        topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
        engine: { num_gpu_blocks: 64, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 },
        decode: { engine: { data_parallel_size: 2, enable_expert_parallel: ep } },
        timing: fixed(10, 2),
        kv_transfer: { bandwidth_gbps: 1, mode: "full_prompt" },
      });
    const recs = () => [byLength(1, 0, 4, 3), byLength(2, 0, 7, 2)];
    const times = (r: Extract<ReplayResult, { ok: true }>) =>
      r.records.map((x) => [x.dp_ranks, x.handoff?.destination_activated_ms, x.first_token_ms, x.last_token_ms]);
    expect(times(ok(await runReplay({ spec: spec(true), records: recs() })))).toEqual([
      [{ decode: 0 }, 14, 16, 20],
      [{ decode: 1 }, 17, 20, 22],
    ]);
    expect(times(ok(await runReplay({ spec: spec(false), records: recs() })))).toEqual([
      [{ decode: 0 }, 14, 16, 20],
      [{ decode: 1 }, 17, 19, 21],
    ]);
  });

  it("data_parallel_size 1 with enable_expert_parallel is vLLM's EP over TP ranks: the replay is unchanged", async () => {
    const base = ok(await runReplay({ spec: aggregated(1, false), records: records() }));
    const ep = ok(await runReplay({ spec: aggregated(1, true), records: records() }));
    expect(ep.report.digest).toBe(base.report.digest);
    expect(ep.report.data_parallel).toBeUndefined();
    expect(ep.records[0]!.dp_ranks).toBeUndefined();
  });
});
