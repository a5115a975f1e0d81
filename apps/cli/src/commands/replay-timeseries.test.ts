import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

let dir: string;
const path = (name: string) => join(dir, name);

// The golden seed S1: fixed 10 / 2 ms, one request of 4 + 2 tokens (TTFT 12, E2E 14).
const LINEAR = JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 });
const SPEC = `version: 1
profile: ./linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ./trace.jsonl, format: kvsim }
`;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-ts-"));
  writeFileSync(path("linear.json"), LINEAR);
  writeFileSync(path("spec.yaml"), SPEC);
  writeFileSync(path("trace.jsonl"), '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}\n');
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function replay(...args: string[]) {
  const io = captureIo();
  const code = await runCli(["replay", ...args], io);
  return { code, ...io };
}

describe("kvsim replay --timeseries", () => {
  it("writes CSV: a row per sample, the deployment's columns then the worker's", async () => {
    const r = await replay("--spec", path("spec.yaml"), "--timeseries", path("ts.csv"), "--sample-ms", "5");
    expect(r.code).toBe(0);
    const lines = readFileSync(path("ts.csv"), "utf8").trimEnd().split("\n");
    // Samples at 0, 5, 10 and 15 (the first at or after the end, 14).
    expect(lines[0]).toBe(
      "time_ms,arrivals,completions,rejected_or_failed,input_tokens_per_s,output_tokens_per_s,handoffs_in_flight,handoff_bytes,W0.running,W0.waiting,W0.kv_used_pages,W0.kv_cached_pages,W0.passes,W0.batch_tokens,W0.step_ms",
    );
    // Row 15: the completion, 2 tokens / 5 ms = 400 tok/s out, the 4-token prompt = 800 tok/s in,
    // nothing running, the full first page cached, pass 2 (1 token, 2 ms) started at 12.
    expect(lines.slice(1)).toEqual([
      "0,1,0,0,0,0,0,0,1,0,1,0,1,4,12",
      "5,0,0,0,0,0,0,0,1,0,1,0,0,,",
      "10,0,0,0,0,0,0,0,1,0,1,0,0,,",
      "15,0,1,0,800,400,0,0,0,0,0,1,1,1,2",
    ]);
  });

  it("writes JSONL by the extension: one object per sample", async () => {
    const r = await replay("--spec", path("spec.yaml"), "--timeseries", path("ts.jsonl"), "--sample-ms", "5");
    expect(r.code).toBe(0);
    const rows = readFileSync(path("ts.jsonl"), "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { time_ms: number; workers: { W0: { running: number } } });
    expect(rows.map((x) => [x.time_ms, x.workers.W0.running])).toEqual([
      [0, 1],
      [5, 1],
      [10, 1],
      [15, 0],
    ]);
  });

  it("the bundled P/D example: the series add up to the report, and the digest does not change", async () => {
    const r = await replay("--format", "json", "--timeseries", path("ts.jsonl"));
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as { num_requests: number; completed_requests: number; handoffs: { payload_bytes: number }; digest: string };
    expect(report.digest).toBe("4a66dec626e852fd0e6ecac76192cc69ff582ac400311172604c144660208ebc");
    const rows = readFileSync(path("ts.jsonl"), "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { time_ms: number; deployment: Record<string, number>; workers: Record<string, unknown> });
    const sum = (k: string) => rows.reduce((a, x) => a + x.deployment[k]!, 0);
    expect(sum("arrivals")).toBe(report.num_requests);
    expect(sum("completions")).toBe(report.completed_requests);
    expect(sum("handoff_bytes")).toBe(report.handoffs.payload_bytes);
    expect(rows.at(-1)!.deployment.handoffs_in_flight).toBe(0);
    expect(Object.keys(rows[0]!.workers)).toEqual(["P0", "P1", "D0", "D1"]);
    // The default interval: 10 ms over a run of about 9.5 s.
    expect(rows[1]!.time_ms).toBe(10);
  });

  it("refuses a file name that names no format, and --sample-ms alone, before running (exit 2, nothing written)", async () => {
    const bad = await replay("--spec", path("spec.yaml"), "--timeseries", path("ts.txt"), "--report", path("r.json"));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/must end in \.csv or \.jsonl/);
    expect(existsSync(path("r.json"))).toBe(false);
    const alone = await replay("--spec", path("spec.yaml"), "--sample-ms", "5");
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/--sample-ms needs --timeseries/);
    const zero = await replay("--spec", path("spec.yaml"), "--timeseries", path("ts.csv"), "--sample-ms", "0");
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/--sample-ms must be at least 0.001/);
    expect(existsSync(path("ts.csv"))).toBe(false);
  });

  it("an existing file needs --force, checked before the run", async () => {
    writeFileSync(path("ts.csv"), "old");
    const r = await replay("--spec", path("spec.yaml"), "--timeseries", path("ts.csv"));
    expect(r.code).toBe(2);
    expect(readFileSync(path("ts.csv"), "utf8")).toBe("old");
    expect((await replay("--spec", path("spec.yaml"), "--timeseries", path("ts.csv"), "--force")).code).toBe(0);
    expect(readFileSync(path("ts.csv"), "utf8")).toMatch(/^time_ms,/);
  });
});

describe("kvsim replay --html", () => {
  it("writes one self-contained page with the report's digest; --sample-ms sets its series' interval", async () => {
    const r = await replay("--spec", path("spec.yaml"), "--html", path("r.html"), "--sample-ms", "5", "--format", "json");
    expect(r.code).toBe(0);
    const html = readFileSync(path("r.html"), "utf8");
    const report = JSON.parse(r.stdout) as { digest: string };
    expect(html).toContain(`<code id="digest">${report.digest}</code>`);
    expect(html).toContain("Sampled every 5 ms of virtual time");
    expect(html).not.toMatch(/<script[^>]+src=/);
  });

  it("an existing file needs --force, checked before the run; nothing else is written", async () => {
    writeFileSync(path("r.html"), "old");
    const r = await replay("--spec", path("spec.yaml"), "--html", path("r.html"), "--report", path("r.json"));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/r\.html already exists; pass --force/);
    expect(readFileSync(path("r.html"), "utf8")).toBe("old");
    expect(existsSync(path("r.json"))).toBe(false);
    expect((await replay("--spec", path("spec.yaml"), "--html", path("r.html"), "--force")).code).toBe(0);
    expect(readFileSync(path("r.html"), "utf8")).toMatch(/^<!DOCTYPE html>/);
  });
});
