import { InputError, SpecSchema, type Spec, type TraceRecord } from "@kvsim/profile-schema";
import type { RequestRecord } from "@kvsim/replay-engine";
import { linearTestProfile } from "@kvsim/profile-schema/testing";
import { describe, expect, it } from "vitest";
import {
  checkMeasuredAgainstWorkload,
  compareRuns,
  fitPart,
  fitTiming,
  nelderMead,
  replayWith,
  simulatedRun,
  clockStartFor,
  type LinearCoefficients,
  type ScalarCoefficient,
  type MeasuredRun,
} from "./index.js";
import { nonNegativeLeastSquares } from "./nnls.js";

describe("nonNegativeLeastSquares", () => {
  it("solves an exact system and clamps a coefficient the data wants negative to 0", () => {
    // y = 2 a + 3 b exactly on (1,0), (0,1), (1,1): x = [2, 3].
    expect(
      nonNegativeLeastSquares(
        [
          [1, 0],
          [0, 1],
          [1, 1],
        ],
        [2, 3, 5],
      )!.map((v) => Number(v.toFixed(9))),
    ).toEqual([2, 3]);
    // y = a - b wants b = -1 on (1,0) -> 1, (0,1) -> -1; with b >= 0 the best is b = 0 and a = 1.
    expect(
      nonNegativeLeastSquares(
        [
          [1, 0],
          [0, 1],
        ],
        [1, -1],
      )!.map((v) => Number(v.toFixed(9))),
    ).toEqual([1, 0]);
  });
});

describe("nelderMead", () => {
  it("finds the minimum of a convex quadratic, deterministically", async () => {
    // (x - 1)^2 + 2 (y + 0.5)^2 has its minimum 0 at (1, -0.5).
    const f = (x: readonly number[]) => Promise.resolve((x[0]! - 1) ** 2 + 2 * (x[1]! + 0.5) ** 2);
    const a = await nelderMead(f, [0, 0], { step: 0.3, maxEvaluations: 200, tolerance: 1e-12 });
    expect(a.x[0]).toBeCloseTo(1, 4);
    expect(a.x[1]).toBeCloseTo(-0.5, 4);
    const b = await nelderMead(f, [0, 0], { step: 0.3, maxEvaluations: 200, tolerance: 1e-12 });
    expect(b).toEqual(a);
  });
});

/** 80 requests in bursts, prompts 200..1,800 tokens, outputs 20..200 tokens (fixed seed). */
function workload(): TraceRecord[] {
  // A 31-bit linear congruential generator (Park-Miller), seed 11: fixed, so the workload is too.
  let state = 11;
  const next = () => (state = (state * 48271) % 2147483647) / 2147483647;
  let t = 0;
  const out: TraceRecord[] = [];
  for (let i = 0; i < 80; i++) {
    // Bursts (10 requests 20 ms apart) between quiet spells (gaps of about 1.5 s): the batch
    // size and the prompt load both vary widely, so the coefficients are identifiable.
    t += i % 20 < 10 ? 20 : -Math.log(1 - next() * 0.999) * 1500;
    out.push({ line: i + 1, requestId: `q${i}`, arrivalMs: t, inputTokens: 200 + Math.floor(next() * 1600), outputTokens: 20 + Math.floor(next() * 180) });
  }
  return out;
}

const TRUE: LinearCoefficients = {
  step_ms: 12,
  per_sequence_ms: 0.2,
  per_kv_token_us: 0.5,
  per_prompt_token_us: 60,
  per_cached_token_us: 0,
  prompt_step_ms: 3,
};

function spec(): Spec {
  return SpecSchema.parse({
    version: 1,
    profile: linearTestProfile(1000),
    topology: { kind: "aggregated", workers: 1 },
    engine: { num_gpu_blocks: 4000, block_size: 16, max_num_batched_tokens: 1024, max_num_seqs: 32 },
    timing: { type: "linear", ...TRUE },
    workload: { trace: "w.jsonl", format: "kvsim" },
  });
}

async function measuredRun(): Promise<{ records: TraceRecord[]; run: MeasuredRun }> {
  const records = workload();
  const simulated = await replayWith({ spec: spec(), records }, TRUE);
  return { records, run: { ...simulatedRun(simulated!, "measured.jsonl"), format: "kvsim-requests" } };
}

describe("fitTiming", () => {
  it("recovers the step time a known model produced: held-out TPOT and TTFT within 2%, the coefficients within 10% to 35%", async () => {
    const { records, run } = await measuredRun();
    const fit = fitPart(run, 0.5);
    expect(fit.requests).toHaveLength(40);
    const result = await fitTiming({ spec: spec(), records, fit, maxEvaluations: 30 });
    // The per-step constant and the per-prompt-token cost dominate this workload's step times:
    // within 10%; the smaller terms within 35%.
    const off = (k: ScalarCoefficient) => Math.abs(result.coefficients[k] / TRUE[k] - 1);
    expect(off("step_ms")).toBeLessThan(0.1);
    expect(off("per_prompt_token_us")).toBeLessThan(0.1);
    expect(off("per_sequence_ms")).toBeLessThan(0.35);
    expect(off("per_kv_token_us")).toBeLessThan(0.35);
    expect(off("prompt_step_ms")).toBeLessThan(0.35);
    const replayed = await replayWith({ spec: spec(), records }, result.coefficients);
    const held = compareRuns(run, simulatedRun(replayed!), { kind: "from_request", index: 40 });
    for (const metric of ["tpot", "ttft"] as const) {
      const mean = held.latency.find((l) => l.metric === metric && l.stat === "mean")!;
      expect(Math.abs(mean.error!)).toBeLessThan(0.02);
    }
  });

  it("is deterministic: the same inputs give the same coefficients", async () => {
    const { records, run } = await measuredRun();
    const a = await fitTiming({ spec: spec(), records, fit: fitPart(run, 0.5), maxEvaluations: 8 });
    const b = await fitTiming({ spec: spec(), records, fit: fitPart(run, 0.5), maxEvaluations: 8 });
    expect(b.coefficients).toEqual(a.coefficients);
    expect(b.evaluations).toBe(a.evaluations);
  });

  it("fits the experts term when the spec's timing names the model's experts, keeping their routing", async () => {
    // The true model spends half its per-step constant on expert weights (16 experts, top 2: one
    // token touches 1/8 of them, 8 tokens 1 - (7/8)^8 = 66%), so small batches are cheaper.
    const experts = { num_experts: 16, num_experts_per_tok: 2, all_experts_ms: 6 };
    const moe: LinearCoefficients = { ...TRUE, step_ms: 6, experts };
    const moeSpec = (): Spec => ({ ...spec(), timing: { type: "linear", ...TRUE, step_ms: 6, experts } });
    const records = workload();
    const simulated = await replayWith({ spec: moeSpec(), records }, moe);
    const run: MeasuredRun = { ...simulatedRun(simulated!, "measured.jsonl"), format: "kvsim-requests" };
    const result = await fitTiming({ spec: moeSpec(), records, fit: fitPart(run, 0.5), maxEvaluations: 30 });
    expect(result.coefficients.experts).toMatchObject({ num_experts: 16, num_experts_per_tok: 2 });
    expect(result.start.experts).toMatchObject({ num_experts: 16, num_experts_per_tok: 2 });
    const replayed = await replayWith({ spec: moeSpec(), records }, result.coefficients);
    const held = compareRuns(run, simulatedRun(replayed!), { kind: "from_request", index: 40 });
    for (const metric of ["tpot", "ttft"] as const) {
      const mean = held.latency.find((l) => l.metric === metric && l.stat === "mean")!;
      expect(Math.abs(mean.error!)).toBeLessThan(0.03);
    }
  });

  it("refuses a fit part of fewer than 10 requests", async () => {
    const { records, run } = await measuredRun();
    await expect(fitTiming({ spec: spec(), records, fit: { ...run, requests: run.requests.slice(0, 9) } })).rejects.toThrow(
      /9 requests in its fit part, fewer than the 10/,
    );
  });
});

describe("simulatedRun", () => {
  const record = (id: string, arrival: number, admitted: number, first: number, last: number, output: number): RequestRecord => ({
    request_id: id,
    status: "completed",
    arrival_ms: arrival,
    admitted_ms: admitted,
    first_token_ms: first,
    last_token_ms: last,
    ttft_ms: first - arrival,
    tpot_ms: (last - first) / (output - 1),
    e2e_ms: last - arrival,
    input_tokens: 10,
    output_tokens: output,
    requested_output_tokens: output,
    reused_tokens: 0,
    preemptions: 0,
    workers: { aggregated: 0 },
  });
  // a arrives at an idle rank (admitted at once), its first step ends at 50; b arrives at 20 and
  // is admitted at that boundary; c arrives at 30 but waits for a slot until 150.
  const records = [record("a", 0, 0, 50, 150, 3), record("b", 20, 50, 140, 200, 2), record("c", 30, 150, 260, 300, 2)];
  const times = (run: MeasuredRun) => run.requests.map((r) => [r.requestId, r.ttftMs, r.e2eMs, r.tpotMs]);

  it("starts TTFT and E2E at the arrival by default", () => {
    // a: 50 - 0, 150 - 0, (150 - 50) / 2; b: 140 - 20, 200 - 20, 60 / 1; c: 260 - 30, 300 - 30, 40.
    expect(times(simulatedRun(records))).toEqual([
      ["a", 50, 150, 50],
      ["b", 120, 180, 60],
      ["c", 230, 270, 40],
    ]);
  });

  it("starts them at the engine's pickup for a request admitted at the first step end after its arrival", () => {
    // The first recorded step end at or after b's arrival (20) is 50 (a's first token) and b was
    // admitted at 50: its clock starts 30 ms later, TTFT 140 - 50 = 90, E2E 200 - 50 = 150. c was
    // admitted at 150, after that end: it waited for a slot and keeps its arrival (230, 270). a
    // was admitted on arrival: no change. TPOT never changes.
    expect(times(simulatedRun(records, undefined, "engine-pickup"))).toEqual([
      ["a", 50, 150, 50],
      ["b", 90, 150, 60],
      ["c", 230, 270, 40],
    ]);
  });

  it("matches vLLM's per-request stats (TTFT from queued_ts) with the pickup, other formats with the arrival", () => {
    const run = (format: MeasuredRun["format"]): MeasuredRun => ({ format, file: "m", requests: [], skipped: 0, lacks: [] });
    expect(clockStartFor(run("vllm-requests"))).toBe("engine-pickup");
    expect(clockStartFor(run("vllm-bench"))).toBe("arrival");
    expect(clockStartFor(run("kvsim-requests"))).toBe("arrival");
  });
});

describe("checkMeasuredAgainstWorkload", () => {
  it("names the measured line of an id the workload lacks, or of other lengths", async () => {
    const { records, run } = await measuredRun();
    const stranger = { ...run, requests: [{ ...run.requests[0]!, requestId: "nobody", line: 7 }] };
    try {
      checkMeasuredAgainstWorkload(stranger, records, "w.jsonl");
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(InputError);
      expect((e as InputError).issues[0]).toMatchObject({
        line: 7,
        path: "request_id",
        message: expect.stringContaining("nobody is not a request of the workload w.jsonl"),
      });
    }
    const longer = { ...run, requests: [{ ...run.requests[0]!, inputTokens: run.requests[0]!.inputTokens + 1 }] };
    expect(() => {
      checkMeasuredAgainstWorkload(longer, records, "w.jsonl");
    }).toThrow(/input_toks: .* prompt tokens, the workload's request/);
    expect(() => {
      checkMeasuredAgainstWorkload(run, records, "w.jsonl");
    }).not.toThrow();
  });
});
