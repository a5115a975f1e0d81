import { InputError, parseDocumentText, type Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { pointTask, runPoint, specWithOverrides, type PointHost } from "./index.js";

const PROFILE = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 };
// The golden seed S1 (fixed 10 / 2 ms, one request of 4 + 2 tokens): TTFT 10 + 2 = 12, E2E 14.
const SPEC = `version: 1
profile: /p/linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: /t/trace.jsonl, format: kvsim }
`;
const LINES = ['{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}'];
const TRACE = { path: "/t/trace.jsonl", sha256: "abc" };
const profiles = new Map<string, Profile>([["/p/linear.json", PROFILE as Profile]]);

function host(lines = LINES): PointHost & { closed: number } {
  let t = 0;
  const h = {
    closed: 0,
    traceLines(trace: { path: string; sha256: string }) {
      if (trace.sha256 !== "abc")
        return Promise.reject(new InputError(trace.path, [{ path: "", message: "the trace's content differs from the sweep's (sha256 abc expected)" }]));
      return Promise.resolve({
        lines,
        close: () => {
          h.closed++;
        },
      });
    },
    now: () => (t += 5),
  };
  return h;
}

const task = (settings: Record<string, unknown> = {}, text = SPEC, trace = TRACE) => {
  const spec = specWithOverrides(parseDocumentText(text, "/s/spec.yaml"));
  return pointTask(3, settings, spec, profiles, trace);
};

describe("one point", () => {
  it("carries its profiles inline and its trace by path and hash", () => {
    const t = task({ "engine.max_num_seqs": 4 });
    expect((t.spec as { profile: unknown }).profile).toEqual({ ...PROFILE });
    expect(t.trace).toEqual(TRACE);
    expect(t.point).toBe(3);
  });

  it("runs to an ok row with every report metric, the digest and the wall time", async () => {
    const h = host();
    const row = await runPoint(task({ "engine.max_num_seqs": 4 }), h);
    expect(row.status).toBe("ok");
    expect([row.report?.mean_ttft_ms, row.report?.mean_e2e_ms, row.report?.num_requests]).toEqual([12, 14, 1]);
    expect(row.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(row.report).not.toHaveProperty("digest");
    // The fake clock advances 5 ms per reading: started at 5, finished at 10.
    expect(row.wall_time_ms).toBe(5);
    expect(row.settings).toEqual({ "engine.max_num_seqs": 4 });
    expect(h.closed).toBe(1);
    // The same task gives the same digest.
    expect((await runPoint(task({ "engine.max_num_seqs": 4 }), host())).digest).toBe(row.digest);
  });

  it("is refused, with the reason, when its spec is invalid", async () => {
    const bad = { ...task(), spec: { ...(task().spec as object), engine: { max_num_seqs: 0 } } };
    const row = await runPoint(bad, host());
    expect([row.status, row.reason, row.report, row.digest]).toEqual(["refused", "engine.max_num_seqs: must be at least 1 (got 0)", null, null]);
  });

  it("is refused when the trace differs from the sweep's, or has a bad line", async () => {
    const other = await runPoint(task({}, SPEC, { path: TRACE.path, sha256: "def" }), host());
    expect([other.status, other.reason]).toEqual(["refused", "/t/trace.jsonl: the trace's content differs from the sweep's (sha256 abc expected)"]);
    const badLine = await runPoint(task(), host(['{"request_id":"a","arrival_ms":0}']));
    expect(badLine.status).toBe("refused");
    expect(badLine.reason).toMatch(/^\/t\/trace\.jsonl:1/);
  });

  it("is refused when the ranks refuse its settings", async () => {
    // Timing "profile" needs forward_pass tables, which this profile has not: a valid spec the rank refuses.
    const row = await runPoint(task({}, SPEC.replace("{ type: fixed, prefill_ms: 10, decode_ms: 2 }", "{ type: profile }")), host());
    expect(row.status).toBe("refused");
    // Reported at the spec's choice of timing, with the way out.
    expect(row.reason).toBe(
      'timing.type: "profile" timing needs the profile\'s forward_pass tables, and profile test/linear has none: measure its passes, or use timing type roofline (from the model_shape kvsim profile from-hf writes), linear (fitted by kvsim calibrate) or fixed',
    );
  });
});
