import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

const capture = (stderrIsTTY = false) => captureIo({ stderrIsTTY });

let dir: string;
const path = (name: string) => join(dir, name);
const write = (name: string, text: string) => {
  writeFileSync(path(name), text);
  return path(name);
};

// The golden seed S1 (docs/rules/replay.md §6.2): fixed 10 / 2 ms, one request of 4 + 2 tokens.
const LINEAR = JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 });
const specYaml = (extra = "") => `version: 1
profile: ./linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ./trace.jsonl, format: kvsim }
${extra}`;
const ONE_REQUEST = '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}\n';

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-replay-"));
  write("linear.json", LINEAR);
  write("spec.yaml", specYaml());
  write("trace.jsonl", ONE_REQUEST);
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  dir = "";
});

async function replay(...args: string[]) {
  return replayWith(capture(), ...args);
}
async function replayWith(io: ReturnType<typeof capture>, ...args: string[]) {
  const code = await runCli(["replay", ...args], io);
  return { code, ...io };
}

describe("kvsim replay: runs", () => {
  it("with no arguments replays the bundled P/D example and prints the report table", async () => {
    const r = await replay();
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("disaggregated, 2 prefill + 2 decode workers");
    expect(r.stdout).toContain("zai-org/GLM-5.3-Flash (vLLM 0.32.0, TP 4)");
    // The bundled trace has 48 lines, one request each.
    expect(r.stdout).toContain("requests: 48 arrived, 48 completed, 0 rejected, 0 failed");
    expect(r.stdout).toMatch(/handoffs +48, /);
  });

  it("the bundled MTP example speculates on the decode workers and prints a speculative decoding row", async () => {
    const example = new URL("../../examples/replay-pd-mtp.yaml", import.meta.url).pathname;
    const r = await replay("--spec", example);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("requests: 48 arrived, 48 completed, 0 rejected, 0 failed");
    // k = 3 with per-position rates 0.85 / 0.64 / 0.45: about 1 + 0.85 + 0.64 + 0.45 = 2.94 tokens per step.
    expect(r.stdout).toMatch(/speculative decoding +mtp, 3 draft tokens: mean acceptance length 2\.9\d\d, per position 0\.8\d\d \/ 0\.6\d\d \/ 0\.4\d\d;/);
    // The default example prints no such row.
    expect((await replay()).stdout).not.toContain("speculative decoding");
  });

  it("the bundled offload example serves evicted system prompts from its CPU tier: more reuse and a lower TTFT than without the tier", async () => {
    const example = new URL("../../examples/replay-offload.yaml", import.meta.url).pathname;
    const withTier = await replay("--spec", example, "--format", "json");
    const without = await replay("--spec", example, "--set", "kv_offload=null", "--format", "json");
    expect([withTier.code, without.code]).toEqual([0, 0]);
    const a = JSON.parse(withTier.stdout) as {
      prefix_cache_reused_ratio: number;
      p90_ttft_ms: number;
      completed_requests: number;
      kv_offload: { loads: number; tiers: { name: string; loads: number }[] };
    };
    const b = JSON.parse(without.stdout) as { prefix_cache_reused_ratio: number; p90_ttft_ms: number; kv_offload?: unknown };
    expect(a.completed_requests).toBe(48);
    expect(a.kv_offload.tiers.map((t) => t.name)).toEqual(["cpu"]);
    expect(a.kv_offload.loads).toBeGreaterThan(0);
    expect(b.kv_offload).toBeUndefined();
    expect(a.prefix_cache_reused_ratio).toBeGreaterThan(b.prefix_cache_reused_ratio);
    expect(a.p90_ttft_ms).toBeLessThan(b.p90_ttft_ms);
    const table = await replay("--spec", example);
    expect(table.stdout).toMatch(/offload cpu +\d+ loads, [\d,]+ tokens served/);
    expect(table.stdout).toMatch(/offload loads +\d+ loads/);
  });

  it("--format json prints one JSON object (the report) and nothing else: TTFT 12, E2E 14", async () => {
    const r = await replay("--spec", path("spec.yaml"), "--format", "json");
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    const report = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(r.stdout.trimStart().startsWith("{")).toBe(true);
    expect([report.num_requests, report.completed_requests, report.mean_ttft_ms, report.mean_e2e_ms, report.duration_ms]).toEqual([1, 1, 12, 14, 14]);
    expect(typeof report.wall_time_ms).toBe("number");
    expect(report.digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it("--report and --requests write the report and one record per line; the digest does not depend on wall time", async () => {
    const r = await replay("--spec", path("spec.yaml"), "--format", "json", "--report", path("report.json"), "--requests", path("requests.jsonl"));
    expect(r.code).toBe(0);
    const file = JSON.parse(readFileSync(path("report.json"), "utf8")) as Record<string, unknown>;
    const printed = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(file).toEqual(printed);
    const lines = readFileSync(path("requests.jsonl"), "utf8").trim().split("\n");
    expect(lines).toHaveLength(1);
    const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect([rec.request_id, rec.status, rec.ttft_ms, rec.e2e_ms, rec.tpot_ms]).toEqual(["a", "completed", 12, 14, 2]);
    const again = await replay("--spec", path("spec.yaml"), "--format", "json");
    expect((JSON.parse(again.stdout) as Record<string, unknown>).digest).toBe(file.digest);
  });

  it("draws a progress bar on stderr only when stderr is a terminal; stdout keeps only the JSON", async () => {
    const tty = await replayWith(capture(true), "--spec", path("spec.yaml"), "--format", "json");
    expect(tty.code).toBe(0);
    expect(tty.stderr).toContain("replay [");
    expect((JSON.parse(tty.stdout) as Record<string, unknown>).completed_requests).toBe(1);
    const pipe = await replay("--spec", path("spec.yaml"), "--format", "json");
    expect(pipe.stderr).toBe("");
  });

  it("--quiet (-q) silences the progress bar on a terminal too", async () => {
    for (const flag of ["--quiet", "-q"]) {
      const tty = await replayWith(capture(true), "--spec", path("spec.yaml"), "--format", "json", flag);
      expect(tty.code).toBe(0);
      expect(tty.stderr).toBe("");
      expect((JSON.parse(tty.stdout) as Record<string, unknown>).completed_requests).toBe(1);
    }
  });

  it("--force overwrites an existing report", async () => {
    write("report.json", "old");
    const r = await replay("--spec", path("spec.yaml"), "--report", path("report.json"), "--force");
    expect(r.code).toBe(0);
    expect((JSON.parse(readFileSync(path("report.json"), "utf8")) as Record<string, unknown>).completed_requests).toBe(1);
  });
});

describe("kvsim replay: data-parallel workers", () => {
  it("shows the layout in the title and a data parallel row; records name the rank", async () => {
    // Two 4-token requests at 0 on 1 worker of 2 lockstep ranks: a (waiting on rank 0, scoring 4)
    // sends b to rank 1. One step of 10 + 2 ms gives both first tokens at 12, the second tokens at
    // 14; then 30 dummy steps of 2 ms until vLLM's 32-step check: 32 steps, 30 idle, 1 wave.
    write("trace.jsonl", ONE_REQUEST + '{"request_id":"b","arrival_ms":0,"input_tokens":4,"output_tokens":2}\n');
    write("dp.yaml", specYaml().replace("max_num_batched_tokens: 64 }", "max_num_batched_tokens: 64, data_parallel_size: 2, enable_expert_parallel: true }"));
    const r = await replay("--spec", path("dp.yaml"), "--requests", path("records.jsonl"));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("kvsim replay: aggregated, 1 worker x 2 DP ranks (expert parallel);");
    expect(r.stdout).toMatch(/data parallel +2 ranks per worker, expert parallel; requests per rank 1 \/ 1; 32 lockstep steps \(30 idle\), 1 wave$/m);
    const records = readFileSync(path("records.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { dp_ranks: unknown; first_token_ms: number });
    expect(records.map((x) => [x.dp_ranks, x.first_token_ms])).toEqual([
      [{ aggregated: 0 }, 12],
      [{ aggregated: 1 }, 12],
    ]);
  });
});

describe("kvsim replay: bad input exits 2, names the file, line or key, and writes nothing", () => {
  const refused = async (args: string[], named: RegExp) => {
    const r = await replay(...args, "--report", path("report.json"), "--requests", path("requests.jsonl"));
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(named);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    expect(existsSync(path("report.json"))).toBe(false);
    expect(existsSync(path("requests.jsonl"))).toBe(false);
    return r;
  };

  it("a trace line that is not JSON", async () => {
    write("trace.jsonl", `${ONE_REQUEST}{"request_id": "b", arrival_ms\n`);
    await refused(["--spec", path("spec.yaml")], /trace\.jsonl:2(:\d+)?: malformed JSON/);
  });

  it("a trace line missing a field", async () => {
    write("trace.jsonl", '{"request_id":"a","arrival_ms":0,"input_tokens":4}\n');
    await refused(["--spec", path("spec.yaml")], /trace\.jsonl:1(:\d+)?: output_tokens/);
  });

  it("a negative length", async () => {
    write("trace.jsonl", '{"request_id":"a","arrival_ms":0,"input_tokens":-4,"output_tokens":2}\n');
    await refused(["--spec", path("spec.yaml")], /trace\.jsonl:1(:\d+)?: input_tokens/);
  });

  it("an unknown spec key", async () => {
    write("spec.yaml", specYaml("bogus_key: 1"));
    await refused(["--spec", path("spec.yaml")], /spec\.yaml:7(:\d+)?: .*bogus_key/);
  });

  it("a spec that points at a missing profile file", async () => {
    write("spec.yaml", specYaml().replace("./linear.json", "./missing-profile.json"));
    await refused(["--spec", path("spec.yaml")], /missing-profile\.json.*no such file/);
  });

  it("a spec that points at a missing trace file", async () => {
    write("spec.yaml", specYaml().replace("./trace.jsonl", "./missing-trace.jsonl"));
    await refused(["--spec", path("spec.yaml")], /missing-trace\.jsonl.*no such file/);
  });

  it("a missing --spec file", async () => {
    await refused(["--spec", path("nope.yaml")], /nope\.yaml.*no such file/);
  });

  it("an existing --report file without --force is refused before the run and left untouched", async () => {
    write("report.json", "keep me");
    const r = await replay("--spec", path("spec.yaml"), "--report", path("report.json"));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path("report.json")} already exists; pass --force`);
    expect(r.stdout).toBe("");
    expect(readFileSync(path("report.json"), "utf8")).toBe("keep me");
  });

  it("an unknown --format", async () => {
    await refused(["--spec", path("spec.yaml"), "--format", "xml"], /--format must be table or json/);
  });
});

describe("kvsim replay: a run that cannot finish exits 1 and says why", () => {
  it("names the stuck request and where it waits; no output file is written", async () => {
    // GLM-5.3-Flash 0.31.0, N = 2,177: the decode pool's 6 usable pages hold the reservation
    // (1 full-attention + 1 ring + 4 KDA) but not the second full-attention block that the
    // one-token row needs ((N - 1) = 2,176 is a multiple of the 2,176-token block).
    const glm = readFileSync(new URL("../../examples/profiles/glm-5.3-flash-tp4-fp8-vllm-0.31.0.json", import.meta.url), "utf8");
    write("glm.json", glm);
    write(
      "stuck.yaml",
      `version: 1
profile: ./glm.json
topology: { kind: disaggregated, prefill: { workers: 1 }, decode: { workers: 1 } }
engine: { num_gpu_blocks: 64 }
decode: { engine: { num_gpu_blocks: 7 } }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ./stuck.jsonl, format: kvsim }
`,
    );
    write("stuck.jsonl", '{"request_id":"s1","arrival_ms":0,"input_tokens":2177,"output_tokens":2}\n');
    const r = await replay("--spec", path("stuck.yaml"), "--report", path("report.json"));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("the replay can make no progress at 10 ms");
    expect(r.stderr).toContain("request s1: on decode worker 0, waiting to decode");
    expect(existsSync(path("report.json"))).toBe(false);
  });
});
