import { engineSettings } from "@kvsim/profile-schema";
import { linearTestProfile } from "@kvsim/profile-schema/testing";
import type { RoleRankConfig } from "@kvsim/replay-engine";
import { describe, expect, it } from "vitest";
import { decodeLimitMs, estimateCapacity } from "./estimate.js";
import type { Deployment } from "./space.js";

const engine = { max_num_seqs: 8, max_num_batched_tokens: 512 };
const config = (role: RoleRankConfig["role"]): RoleRankConfig => ({
  role,
  config: {
    role,
    profile: linearTestProfile(100),
    engine: engineSettings({ ...engine, num_gpu_blocks: 1000, block_size: 16 }),
    timing: { type: "fixed", prefill_ms: 10, decode_ms: 5 },
  },
  capacity: undefined,
});
const stats = { requests: 10, meanInputTokens: 256, meanOutputTokens: 64, minInputTokens: 100, maxRequestTokens: 400 };

describe("estimateCapacity", () => {
  // Prefill: a 512-token step costs 10 ms: 51,200 prompt tokens/s. Decode: 1,000 pages x 16 =
  // 16,000 KV tokens over a mean context of 256 + 64 / 2 = 288 allow 55 rows, capped at 8; a
  // step costs 5 ms: 8 x 1000 / 5 = 1,600 tokens/s.
  it("time-shares one aggregated rank between prefill and decode", () => {
    const d: Deployment = { topology: "aggregated", pool: { workers: 2, tp: 1 }, engine };
    // 1 / (256 / 51,200 + 64 / 1,600) = 1 / 0.045 s per request, x 2 workers.
    expect(estimateCapacity(d, [config("aggregated")], stats, []).rps).toBeCloseTo(2 / 0.045, 9);
  });

  it("takes the slower side of a P/D split", () => {
    const d: Deployment = { topology: "disaggregated", prefill: { workers: 1, tp: 1 }, decode: { workers: 2, tp: 1 }, engine };
    // Prefill: 51,200 / 256 = 200 req/s; decode: 2 x 1,600 / 64 = 50 req/s.
    expect(estimateCapacity(d, [config("prefill"), config("decode")], stats, []).rps).toBeCloseTo(50, 9);
  });

  it("shrinks the decode batch to the SLA's per-token limit", () => {
    const d: Deployment = { topology: "aggregated", pool: { workers: 1, tp: 1 }, engine };
    // A 5 ms step is over a 4 ms limit at any batch: one row, 200 tokens/s; 1 / (0.005 + 64 / 200).
    const sla = [{ metric: "p90_tpot_ms", op: "<=" as const, value: 4 }];
    const e = estimateCapacity(d, [config("aggregated")], stats, sla);
    expect(e.rps).toBeCloseTo(1 / 0.325, 9);
    // Fixed timing is not a roofline: no outright infeasibility is claimed.
    expect(e.infeasible).toBeUndefined();
  });

  it("reads the tightest TPOT or ITL bound of an SLA", () => {
    expect(
      decodeLimitMs([
        { metric: "p90_ttft_ms", op: "<=", value: 1 },
        { metric: "p99_itl_ms", op: "<=", value: 60 },
        { metric: "mean_tpot_ms", op: "<=", value: 40 },
        { metric: "goodput_rps", op: ">=", value: 2 },
        { metric: "std_tpot_ms", op: "<=", value: 1 }, // a spread, not a per-token bound
      ]),
    ).toBe(40);
    expect(decodeLimitMs([{ metric: "p90_ttft_ms", op: "<=", value: 1 }])).toBeUndefined();
  });
});
