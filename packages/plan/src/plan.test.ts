import { profileFromHfConfig } from "@kvsim/hf-profile";
import { SpecSchema, validateValue, type Spec } from "@kvsim/profile-schema";
import { inlineExecutor, pointTask } from "@kvsim/sweep";
import { describe, expect, it } from "vitest";
import { runPlan, type PlanInput } from "./plan.js";
import { syntheticStats } from "./workload.js";

// A Llama-like model small enough to replay quickly: 8 layers, 2,048 wide, on an L4 (24 GB).
const config = {
  architectures: ["LlamaForCausalLM"],
  hidden_size: 2048,
  num_hidden_layers: 8,
  num_attention_heads: 16,
  num_key_value_heads: 4,
  intermediate_size: 8192,
  vocab_size: 32000,
  max_position_embeddings: 8192,
  torch_dtype: "bfloat16",
};
const profileAt = (tp: number) => profileFromHfConfig(config, { tensorParallelSize: tp }).profile;
const model: PlanInput["model"] = (tp) => ({ profile: profileAt(tp) });
const base: Spec = validateValue(
  SpecSchema,
  {
    version: 1,
    profile: profileAt(1),
    topology: { kind: "aggregated", workers: 1 },
    engine: { gpu: "L4" },
    timing: { type: "roofline" },
    workload: { synthetic: { requests: 120, input_tokens: 2048, output_tokens: 32, rate_per_s: 4, seed: 7, shared_prefix_ratio: 0.5 } },
  },
  "test",
);
const sla = [
  { metric: "p90_ttft_ms", op: "<=" as const, value: 400 },
  { metric: "p90_tpot_ms", op: "<=" as const, value: 40 },
];
const host = { traceLines: () => Promise.reject(new Error("no trace")), now: () => 0 };

const plan = (roundSize: number) =>
  runPlan({
    base,
    model,
    space: { gpus: 4, tp: [1, 2], topologies: ["aggregated", "disaggregated"], maxNumSeqs: [64], maxNumBatchedTokens: [1024, 4096], sizes: "budget" },
    stats: syntheticStats(base.workload.synthetic!),
    sla,
    goal: { kind: "max-rate", tolerance: 0.02 },
    executor: inlineExecutor(host),
    task: (point, spec) => Promise.resolve(pointTask(point, {}, spec, new Map(), null)),
    roundSize,
  });

describe("runPlan with real replays", () => {
  it("names the exhaustive search's winner at the same rate while pruning", { timeout: 300_000 }, async () => {
    const exhaustive = await plan(1000); // one round: every candidate searched in full
    const pruned = await plan(1);
    expect(exhaustive.counts.pruned).toBe(0);
    const top = (r: Awaited<ReturnType<typeof plan>>) => r.rows.filter((x) => x.rank !== null).map((x) => [x.label, x.rate_rps]);
    expect(top(exhaustive).length).toBeGreaterThan(1);
    expect(top(pruned)[0]).toEqual(top(exhaustive)[0]);
    // Every candidate the pruned plan searched has the exhaustive plan's answer.
    for (const row of pruned.rows.filter((x) => x.status === "searched")) {
      expect(row.rate_rps).toBe(exhaustive.rows.find((x) => x.label === row.label)!.rate_rps);
    }
    expect(pruned.counts.replays).toBeLessThan(exhaustive.counts.replays);
  });
});
