import { InputError, parseDocumentText, type Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { gpuCount, inlineExecutor, parseSla, pointTask, runSweep, specWithOverrides, SearchSetupError, type PointHost, type SpecOverride } from "./index.js";

// One GPU, one sequence at a time, fixed steps: prefill 10 ms, decode 2 ms. A request of 4 + 2
// tokens alone has TTFT 10 + 2 = 12 ms and ends at 14 ms (the golden seed S1).
const PROFILE = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 };
const SPEC = `version: 1
profile: /p/linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 1 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: /t/trace.jsonl, format: kvsim }
`;
// Two requests 100 ms apart in the trace: at speedup s the second arrives at 100 / s ms.
const LINES = [
  '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}',
  '{"request_id":"b","arrival_ms":100,"input_tokens":4,"output_tokens":2}',
];
const profiles = new Map<string, Profile>([["/p/linear.json", PROFILE as Profile]]);
const host: PointHost = {
  traceLines: (trace) =>
    trace.sha256 === "abc"
      ? Promise.resolve({ lines: LINES, close: () => undefined })
      : Promise.reject(new InputError(trace.path, [{ path: "", message: "other" }])),
  now: () => 0,
};
const doc = parseDocumentText(SPEC, "/s/spec.yaml");
const spec = (overrides: readonly SpecOverride[]) => specWithOverrides(doc, overrides);

describe("runSweep, a max-rate search without the CLI", () => {
  it("finds the highest speedup at which the second request never waits", async () => {
    // The second request meets TTFT <= 12 ms (both alone: mean 12) only when it arrives after the first ends (14 ms):
    // 100 / s >= 14, so s <= 100 / 14 = 7.142857... From speedup 1: 1, 2, 4 meet, 8 fails;
    // bisect [4, 8]: 6, 7 meet, 7.5 and 7.25 fail, 7.125 meets ((7.25 - 7.125) / 7.125 = 1.75%),
    // 7.1875 rounds to 7.188, fails: (7.188 - 7.125) / 7.125 = 0.88% <= 1%, done.
    const sla = parseSla("mean_ttft_ms<=12");
    const { rows, searches } = await runSweep({
      find: "max-rate",
      sla,
      spec,
      executor: inlineExecutor(host),
      task: (point, settings, overrides) => Promise.resolve(pointTask(point, settings, spec(overrides), profiles, { path: "/t/trace.jsonl", sha256: "abc" })),
    });
    const s = searches![0]!;
    expect(s.variable).toBe("workload.speedup");
    expect([s.answer, s.failing]).toEqual([7.125, 7.188]);
    expect(s.answer as number).toBeLessThanOrEqual(100 / 14);
    expect(s.failing!).toBeGreaterThan(100 / 14);
    // Rows numbered in the search's order, each marked against the SLA.
    expect(rows.map((r) => [r.point, r.settings["workload.speedup"], r.sla_met])).toEqual([
      [0, 1, true],
      [1, 2, true],
      [2, 4, true],
      [3, 8, false],
      [4, 6, true],
      [5, 7, true],
      [6, 7.5, false],
      [7, 7.25, false],
      [8, 7.125, true],
      [9, 7.188, false],
    ]);
    expect(s.rows).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("counts GPUs from profiles given inline or through a loader, and refuses a path without one", () => {
    const base = spec([]);
    // The profile by path, TP 4 from the loader: 1 worker x 4.
    expect(gpuCount(base, () => 4)).toBe(4);
    expect(() => gpuCount(base)).toThrow(SearchSetupError);
    // The profile inline (as in a point's task): its own TP 1, no loader needed: 1 x 1.
    expect(gpuCount({ ...base, profile: PROFILE as Profile })).toBe(1);
  });
});
