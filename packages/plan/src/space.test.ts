import { describe, expect, it } from "vitest";
import { deploymentGpus, deploymentLabel, enumerateDeployments, type PlanSpace } from "./space.js";

const space = (sizes: PlanSpace["sizes"]): PlanSpace => ({
  gpus: 4,
  tp: [2, 1],
  topologies: ["aggregated", "disaggregated"],
  maxNumSeqs: [64],
  maxNumBatchedTokens: [2048],
  sizes,
});

describe("enumerateDeployments", () => {
  it("takes each layout as large as a 4-GPU budget allows", () => {
    const labels = enumerateDeployments(space("budget")).map((d) => deploymentLabel(d).replace(", seqs 64, batch 2048", ""));
    // Aggregated: 4 x TP1 and 2 x TP2. P/D TP1/TP1: 1+3, 2+2, 3+1; TP1/TP2: 2+1 (1+1 leaves a GPU
    // for another prefill worker); TP2/TP1: 1+2; TP2/TP2: 1+1.
    expect(labels).toEqual([
      "aggregated 4 x TP1",
      "aggregated 2 x TP2",
      "P/D 1 x TP1 + 3 x TP1",
      "P/D 2 x TP1 + 2 x TP1",
      "P/D 3 x TP1 + 1 x TP1",
      "P/D 2 x TP1 + 1 x TP2",
      "P/D 1 x TP2 + 2 x TP1",
      "P/D 1 x TP2 + 1 x TP2",
    ]);
  });

  it("takes every size within the budget for a given rate", () => {
    const all = enumerateDeployments(space("all"));
    // Aggregated: TP1 1..4, TP2 1..2 = 6. P/D TP1/TP1: x + y <= 4 with x, y >= 1: 6; TP1/TP2:
    // (1,1), (2,1): 2; TP2/TP1: (1,1), (1,2): 2; TP2/TP2: (1,1): 1. 17 in all.
    expect(all).toHaveLength(17);
    expect(Math.max(...all.map(deploymentGpus))).toBe(4);
    expect(all.filter((d) => deploymentGpus(d) === 2)).toHaveLength(3); // 2 x TP1, 1 x TP2, P/D 1 + 1 at TP1
  });

  it("crosses the engine ladder", () => {
    const d = enumerateDeployments({ ...space("budget"), maxNumSeqs: [128, 64], maxNumBatchedTokens: [8192, 2048], topologies: ["aggregated"], tp: [1] });
    expect(d.map((x) => [x.engine.max_num_seqs, x.engine.max_num_batched_tokens])).toEqual([
      [64, 2048],
      [64, 8192],
      [128, 2048],
      [128, 8192],
    ]);
  });
});
