import { InputError } from "@kvsim/profile-schema";
import type { RequestRecord } from "@kvsim/replay-engine";
import { describe, expect, it } from "vitest";
import { chatTemplateTokens, looksLikeStageSummary, parseStageSummary, stageMetrics, stageWorkload } from "./index.js";

/** A hand-made stage file: 2 groups x 2 prompts of 3 + 2 tokens; two stages, the second overloaded. */
function stageFile(patch: Record<string, unknown> = {}): string {
  const doc: Record<string, unknown> = {
    experiment: "tiny",
    engine: { model: "m", tensor_parallelism: 2, max_model_len: 4096, max_num_batched_tokens: 2048, max_num_seqs: 64 },
    workload: {
      data: { type: "shared_prefix", shared_prefix: { num_groups: 2, num_prompts_per_group: 2, system_prompt_len: 3, question_len: 2, output_len: 12 } },
      load: {
        type: "constant",
        stages: [
          { rate: 2, duration: 3 },
          { rate: 4, duration: 1 },
        ],
      },
    },
    stages: [
      {
        stage: 0,
        rate: 2,
        successes: 6,
        failures: 0,
        ttft: { mean: 0.025, median: 0.024, p90: 0.03, p99: 0.04 },
        tpot: { mean: 0.0001 },
        e2e: { mean: 1.0, median: 1.1, p90: 1.2, p99: 1.3 },
        prompt_len: { mean: 8.2 },
        output_len: { mean: 10.6, median: 12 },
      },
      {
        stage: 1,
        rate: 4,
        successes: 1,
        failures: 3,
        ttft: { mean: 2 },
        e2e: { mean: 3 },
        prompt_len: { mean: 8.2 },
        output_len: { mean: 1 },
      },
    ],
    gpu: "H100-SXM-80GB",
  };
  // Each key of the patch is a dotted path (list indices as numbers); undefined deletes the field.
  for (const [path, value] of Object.entries(patch)) {
    const keys = path.split(".");
    let at = doc;
    for (const k of keys.slice(0, -1)) at = at[k] as Record<string, unknown>;
    const last = keys[keys.length - 1]!;
    if (value === undefined) Reflect.deleteProperty(at, last);
    else at[last] = value;
  }
  return JSON.stringify(doc, null, 1);
}

function issue(fn: () => unknown): { file: string; path: string; message: string } {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    const i = e.issues[0]!;
    return { file: e.file, path: i.path, message: i.message };
  }
  throw new Error("expected an InputError");
}

describe("parseStageSummary", () => {
  it("reads the engine, the workload and each stage in ms, deriving TPOT from the means, not the chunk-counting tpot", () => {
    const run = parseStageSummary(stageFile(), "s.json");
    expect(run.name).toBe("tiny");
    expect(run.engine).toEqual({ model: "m", tensorParallelSize: 2, maxModelLen: 4096, maxNumBatchedTokens: 2048, maxNumSeqs: 64 });
    expect(run.workload).toEqual({ numGroups: 2, numPromptsPerGroup: 2, systemPromptLen: 3, questionLen: 2, outputLen: 12 });
    const s = run.stages[0]!;
    expect([s.rate, s.durationS, s.successes, s.failures, s.excluded]).toEqual([2, 3, 6, 0, false]);
    expect(s.ttftMs).toEqual({ mean: 25, median: 24, p90: 30, p99: 40 });
    expect(s.outputLen).toEqual({ mean: 10.6, median: 12, p90: null, p99: null });
    // (1000 - 25) / (10.6 - 1) = 101.5625 ms.
    expect(s.tpotMs).toBeCloseTo(101.5625, 9);
  });

  it("marks a stage with failures excluded from fitting and says why", () => {
    const s = parseStageSummary(stageFile(), "s.json").stages[1]!;
    expect(s.excluded).toBe(true);
    expect(s.excludedReason).toBe(
      "3 of 4 requests failed (client timeouts): the stage was overloaded and its means cover only the requests that finished, so it is not fitted on",
    );
    // A mean output of one token has no time per output token.
    expect(s.tpotMs).toBeNull();
  });

  it("names the file and the field path of a problem", () => {
    expect(issue(() => parseStageSummary(stageFile({ "stages.1.ttft.mean": undefined }), "s.json"))).toEqual({
      file: "s.json",
      path: "stages[1].ttft.mean",
      message: "is required",
    });
    expect(issue(() => parseStageSummary(stageFile({ "workload.data.type": "random" }), "s.json"))).toEqual({
      file: "s.json",
      path: "workload.data.type",
      message: 'must be shared_prefix, the workload kvsim rebuilds (got "random")',
    });
    expect(issue(() => parseStageSummary(stageFile({ "workload.load.stages": [{ rate: 2, duration: 3 }] }), "s.json")).message).toBe(
      "has 2 stages, workload.load.stages has 1",
    );
    expect(issue(() => parseStageSummary(stageFile({ "stages.0.rate": 3 }), "s.json"))).toEqual({
      file: "s.json",
      path: "stages[0].rate",
      message: "is 3, workload.load.stages[0].rate is 2",
    });
    expect(issue(() => parseStageSummary(stageFile({ "workload.data.shared_prefix.num_groups": 0.5 }), "s.json")).path).toBe(
      "workload.data.shared_prefix.num_groups",
    );
    expect(issue(() => parseStageSummary(stageFile({ "stages.0.e2e.mean": 0.01 }), "s.json")).path).toBe("stages[0].e2e.mean");
    expect(issue(() => parseStageSummary("{ nope", "s.json")).path).toBe("");
  });

  it("is told apart from per-request formats", () => {
    expect(looksLikeStageSummary(stageFile())).toBe(true);
    expect(looksLikeStageSummary('{"ttfts": [], "itls": []}')).toBe(false);
    expect(looksLikeStageSummary('{"request_id": "a", "queued_ts": 1}\n')).toBe(false);
  });
});

describe("stageWorkload", () => {
  const run = parseStageSummary(stageFile(), "s.json");

  it("adds the chat template so prompts match the measured prompt_len mean", () => {
    // 8.2 - 3 - 2 = 3.2, rounded: 3.
    expect(chatTemplateTokens(run)).toBe(3);
  });

  it("spaces arrivals at 1 / rate per stage, stages back to back, asking for the rounded mean output", () => {
    const recs = stageWorkload(run);
    // Stage 0: 2/s for 3 s = 6 requests every 500 ms; stage 1 from 3,000 ms: 4/s for 1 s = 4.
    expect(recs.map((r) => [r.requestId, r.arrivalMs])).toEqual([
      ["stage0-0", 0],
      ["stage0-1", 500],
      ["stage0-2", 1000],
      ["stage0-3", 1500],
      ["stage0-4", 2000],
      ["stage0-5", 2500],
      ["stage1-0", 3000],
      ["stage1-1", 3250],
      ["stage1-2", 3500],
      ["stage1-3", 3750],
    ]);
    // round(10.6) = 11 in stage 0; stage 1's mean of 1 token: 1.
    expect(recs.map((r) => r.outputTokens)).toEqual([11, 11, 11, 11, 11, 11, 1, 1, 1, 1]);
    // 3 template + 3 system + 2 question tokens.
    expect(new Set(recs.map((r) => r.inputTokens))).toEqual(new Set([8]));
    expect(recs.map((r) => r.line)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("cycles through the 4 prompts in one shuffled order: a prompt repeats every 4 requests, groups share their system prompt, all share the template", () => {
    const recs = stageWorkload(run);
    const ids = recs.map((r) => Array.from(r.inputTokenIds!));
    for (let i = 0; i + 4 < ids.length; i++) expect(ids[i + 4]).toEqual(ids[i]);
    const first4 = ids.slice(0, 4);
    expect(new Set(first4.map((t) => t.join(","))).size).toBe(4);
    expect(new Set(first4.map((t) => t.slice(0, 3).join(","))).size).toBe(1);
    // Two groups: the template and system prompt (6 tokens) take two values, each held by two prompts.
    const systems = first4.map((t) => t.slice(0, 6).join(","));
    expect([...new Set(systems)].map((s) => systems.filter((x) => x === s).length)).toEqual([2, 2]);
  });

  it("is seeded: the same seed gives the same ids, another seed others", () => {
    const ids = (seed: number) => stageWorkload(run, { seed }).map((r) => Array.from(r.inputTokenIds!).join(","));
    expect(ids(7)).toEqual(ids(7));
    expect(ids(8)).not.toEqual(ids(7));
  });

  it("with maxStageSeconds simulates the first S seconds of each stage", () => {
    const recs = stageWorkload(run, { maxStageSeconds: 1 });
    // Stage 0: 2 requests in its first second; stage 1 starts at 1,000 ms.
    expect(recs.map((r) => [r.requestId, r.arrivalMs])).toEqual([
      ["stage0-0", 0],
      ["stage0-1", 500],
      ["stage1-0", 1000],
      ["stage1-1", 1250],
      ["stage1-2", 1500],
      ["stage1-3", 1750],
    ]);
  });
});

describe("stageMetrics", () => {
  const run = parseStageSummary(stageFile(), "s.json");
  const rec = (id: string, ttft: number | null, e2e: number | null, out: number, status: RequestRecord["status"] = "completed"): RequestRecord => ({
    request_id: id,
    status,
    arrival_ms: 0,
    admitted_ms: 0,
    first_token_ms: ttft,
    last_token_ms: e2e,
    ttft_ms: ttft,
    tpot_ms: null,
    e2e_ms: e2e,
    input_tokens: 8,
    output_tokens: out,
    requested_output_tokens: out,
    reused_tokens: 0,
    preemptions: 0,
    workers: { aggregated: 0 },
  });

  it("compares each stage's simulated means with the measured ones, TPOT derived the same way on both sides", () => {
    const records = [
      rec("stage0-0", 20, 1020, 11),
      rec("stage0-1", 40, 1240, 11),
      rec("stage0-2", null, null, 0, "failed"),
      rec("stage1-0", 2000, 2000, 1),
      rec("other", 1, 1, 1),
    ];
    const [s0, s1] = stageMetrics(records, run);
    expect([s0!.measuredRequests, s0!.simulatedRequests, s0!.simulatedIncomplete, s0!.excluded]).toEqual([6, 2, 1, false]);
    // TTFT mean (20 + 40) / 2 = 30 against 25: +5 ms, +20%.
    expect(s0!.ttftMean.simulated).toBe(30);
    expect(s0!.ttftMean.difference).toBeCloseTo(5, 9);
    expect(s0!.ttftMean.error).toBeCloseTo(0.2, 9);
    // p90 of [20, 40]: 20 + 0.9 x 20 = 38 against 30.
    expect(s0!.ttftP90.simulated).toBeCloseTo(38, 9);
    expect(s0!.ttftP90.error).toBeCloseTo(8 / 30, 9);
    // E2E mean 1130 against 1000; TPOT (1130 - 30) / (11 - 1) = 110 against 101.5625.
    expect(s0!.e2eMean.error).toBeCloseTo(0.13, 9);
    expect(s0!.tpot.simulated).toBeCloseTo(110, 9);
    expect(s0!.tpot.error).toBeCloseTo(110 / 101.5625 - 1, 9);
    expect(s1!.excluded).toBe(true);
    expect(s1!.tpot).toEqual({ measured: null, simulated: null, difference: null, error: null });
  });
});
