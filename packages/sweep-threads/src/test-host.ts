// The tests' inputs: one spec and a trace held in memory, read through the same host in this
// thread and in the worker threads (test-worker.ts).
import { InputError, parseDocumentText, type Profile } from "@kvsim/profile-schema";
import { pointTask, specWithOverrides, type PointHost, type PointTask, type SpecOverride } from "@kvsim/sweep";

// One GPU, one sequence at a time, fixed steps: prefill 10 ms, decode 2 ms. A request of 4 + 2
// tokens alone has TTFT 10 + 2 = 12 ms and ends at 14 ms (the golden seed S1).
const PROFILE = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 } as Profile;
const doc = parseDocumentText(
  `version: 1
profile: /p/linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 1 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: /t/trace.jsonl, format: kvsim }
`,
  "/s/spec.yaml",
);
// Two requests 100 ms apart: at speedup s the second arrives at 100 / s ms.
const LINES = [
  '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}',
  '{"request_id":"b","arrival_ms":100,"input_tokens":4,"output_tokens":2}',
];
const TRACE = { path: "/t/trace.jsonl", sha256: "abc" };

/** The trace above for its hash; any other is refused, as a file with other content would be. */
export const memoryHost: PointHost = {
  traceLines: (trace) =>
    trace.sha256 === TRACE.sha256
      ? Promise.resolve({ lines: LINES, close: () => undefined })
      : Promise.reject(new InputError(trace.path, [{ path: "", message: "another trace" }])),
  now: () => 0,
};

/** The spec with a point's overrides. */
export const specAt = (overrides: readonly SpecOverride[]) => specWithOverrides(doc, overrides);

/** A point's task over the trace above. */
export const taskAt = (point: number, settings: Readonly<Record<string, unknown>>, overrides: readonly SpecOverride[]): PointTask =>
  pointTask(point, settings, specAt(overrides), new Map([["/p/linear.json", PROFILE]]), TRACE);
