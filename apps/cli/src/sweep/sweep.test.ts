import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { meetsSla, parseSla, type SweepRow } from "@kvsim/sweep";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { examplesDir } from "../replay/examples.js";
import { captureIo } from "../test-io.js";

let dir: string;
const path = (name: string) => join(dir, name);
const write = (name: string, text: string) => {
  writeFileSync(path(name), text);
  return path(name);
};

// The golden seed S1: fixed prefill 10 ms and decode 2 ms; a 4 + 2 token request has TTFT
// 10 + 2 = 12 and E2E 12 + 2 = 14 on an idle rank.
const LINEAR = JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 });
const SPEC = `version: 1
profile: ./linear.json
topology: { kind: aggregated, workers: 1 }
engine: { num_gpu_blocks: 64, block_size: 4, max_num_seqs: 1, max_num_batched_tokens: 64 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ./trace.jsonl, format: kvsim }
`;
const request = (id: string, at: number) => `{"request_id":"${id}","arrival_ms":${at},"input_tokens":4,"output_tokens":2}\n`;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-sweep-"));
  write("linear.json", LINEAR);
  write("spec.yaml", SPEC);
  // Two requests 100 ms apart: each finds the rank idle at speedup 1.
  write("trace.jsonl", request("a", 0) + request("b", 100));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function run(...args: string[]) {
  const io = captureIo();
  const code = await runCli(args, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}
const readRows = (file: string): SweepRow[] =>
  readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as SweepRow);
const withoutWall = (rows: readonly SweepRow[]) => rows.map((r) => ({ ...r, wall_time_ms: 0 }));

describe("kvsim sweep over a grid", () => {
  it("runs every point; a bad point gets its reason and the others run", async () => {
    const grid = write("grid.yaml", "timing.prefill_ms: [10, 20]\nengine.max_num_seqs: [0, 1]\n");
    const r = await run("sweep", "--spec", path("spec.yaml"), "--grid", grid, "--jobs", "1", "--out", path("rows.jsonl"), "--csv", path("rows.csv"));
    expect(r.code).toBe(0);
    const rows = readRows(path("rows.jsonl"));
    expect(rows.map((x) => [x.point, x.settings, x.status])).toEqual([
      [0, { "timing.prefill_ms": 10, "engine.max_num_seqs": 0 }, "refused"],
      [1, { "timing.prefill_ms": 10, "engine.max_num_seqs": 1 }, "ok"],
      [2, { "timing.prefill_ms": 20, "engine.max_num_seqs": 0 }, "refused"],
      [3, { "timing.prefill_ms": 20, "engine.max_num_seqs": 1 }, "ok"],
    ]);
    // The reason names the grid line that set the bad value.
    expect(rows[0]!.reason).toBe(`${grid}:2: engine.max_num_seqs: must be at least 1 (got 0)`);
    // TTFT = prefill + one decode: 10 + 2 = 12 and 20 + 2 = 22.
    expect([rows[1]!.report?.mean_ttft_ms, rows[3]!.report?.mean_ttft_ms]).toEqual([12, 22]);
    // The digest is the one kvsim replay prints for the same settings.
    const replay = await run("replay", "--spec", path("spec.yaml"), "--set", "timing.prefill_ms=20", "--format", "json");
    expect(rows[3]!.digest).toBe((JSON.parse(replay.stdout) as { digest: string }).digest);
    expect(r.stdout).toMatch(/^kvsim sweep: 4 points: 2 ok, 2 refused, 0 failed in [\d.]+ s \(1 job\)\n/);
    expect(r.stdout).toContain(`point 0 refused: ${grid}:2: engine.max_num_seqs: must be at least 1 (got 0)`);
    const csv = readFileSync(path("rows.csv"), "utf8").split("\n");
    // Settings, status and reason first; then every report metric, in the report's order.
    expect(csv[0]!.startsWith("point,timing.prefill_ms,engine.max_num_seqs,status,reason,")).toBe(true);
    expect(csv[0]!.split(",")).toEqual(expect.arrayContaining(["num_requests", "p90_ttft_ms", "handoffs.count", "digest", "wall_time_ms"]));
    expect(csv).toHaveLength(6); // header, 4 rows, and the final newline
  });

  it("gives identical rows with --jobs 1 and --jobs 2 (worker threads)", { timeout: 120_000 }, async () => {
    const grid = write("grid.yaml", "engine.max_num_seqs: { from: 1, to: 3, step: 1 }\nworkload.speedup: [1, 8, 16]\n");
    const one = await run("sweep", "--spec", path("spec.yaml"), "--grid", grid, "--jobs", "1", "--out", path("one.jsonl"));
    const two = await run("sweep", "--spec", path("spec.yaml"), "--grid", grid, "--jobs", "2", "--out", path("two.jsonl"), "--format", "json");
    expect([one.code, two.code]).toEqual([0, 0]);
    const a = readRows(path("one.jsonl"));
    expect(a).toHaveLength(9);
    expect(withoutWall(readRows(path("two.jsonl")))).toEqual(withoutWall(a));
    const json = JSON.parse(two.stdout) as { points: number; ok: number; rows: SweepRow[] };
    expect([json.points, json.ok]).toEqual([9, 9]);
    // Speedup 16 brings b at 100 / 16 = 6.25 ms, during a's first pass (0 to 12): with one
    // sequence it waits for a's last token at 14, so its TTFT is 14 + 12 - 6.25 = 19.75; p99 of
    // {12, 19.75} is 19.75. With two sequences b joins at 12: a's decode and b's prefill share the
    // pass, 12 + 10 + 2 = 24, TTFT 24 - 6.25 = 17.75.
    expect(a.find((x) => x.settings["engine.max_num_seqs"] === 1 && x.settings["workload.speedup"] === 16)?.report?.p99_ttft_ms).toBe(19.75);
  });

  it("marks each row with the SLA verdict, asking the replay for the percentiles the SLA names", async () => {
    const grid = write("grid.yaml", "timing.prefill_ms: [10, 20]\n");
    // At speedup 1 both requests find the rank idle: TTFTs {12, 12} and {22, 22}, whose p95 is 12 and 22.
    const r = await run("sweep", "--spec", path("spec.yaml"), "--grid", grid, "--jobs", "1", "--sla", "p95_ttft_ms<=15", "--format", "json");
    expect(r.code).toBe(0);
    const rows = (JSON.parse(r.stdout) as { rows: SweepRow[] }).rows;
    expect(rows.map((x) => [(x.report as Record<string, unknown> | null)?.p95_ttft_ms, x.sla_met])).toEqual([
      [12, true],
      [22, false],
    ]);
  });

  it("draws one progress bar over points on a terminal", async () => {
    const io = captureIo({ stderrIsTTY: true });
    const code = await runCli(["sweep", "--spec", path("spec.yaml"), "--grid", write("grid.yaml", "engine.max_num_seqs: [1, 2]\n"), "--jobs", "1"], io);
    expect(code).toBe(0);
    expect(io.stderr).toContain("2/2 points | 0 refused or failed | elapsed ");
    const quiet = captureIo({ stderrIsTTY: true });
    expect(await runCli(["sweep", "--spec", path("spec.yaml"), "--grid", path("grid.yaml"), "--jobs", "1", "--quiet"], quiet)).toBe(0);
    expect(quiet.stderr).toBe("");
  });

  it("checks output files before running and writes nothing when one exists", async () => {
    const grid = write("grid.yaml", "engine.max_num_seqs: [1]\n");
    write("rows.jsonl", "keep\n");
    const r = await run("sweep", "--spec", path("spec.yaml"), "--grid", grid, "--out", path("rows.jsonl"), "--csv", path("rows.csv"));
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`error: ${path("rows.jsonl")} already exists; pass --force to overwrite it\n`);
    expect(readFileSync(path("rows.jsonl"), "utf8")).toBe("keep\n");
    expect(existsSync(path("rows.csv"))).toBe(false);
  });

  it("reads each profile once per sweep, yet refuses every point naming an unreadable one at its grid line", async () => {
    const grid = write("grid.yaml", "engine.max_num_seqs: [1, 2]\nprofile: [./linear.json, ./missing.json]\n");
    const r = await run("sweep", "--spec", path("spec.yaml"), "--grid", grid, "--jobs", "1", "--format", "json");
    expect(r.code).toBe(0);
    const rows = (JSON.parse(r.stdout) as { rows: SweepRow[] }).rows;
    // Settings show the paths resolved against the grid's folder.
    expect(rows.map((x) => [x.settings["engine.max_num_seqs"], x.settings.profile, x.status])).toEqual([
      [1, path("linear.json"), "ok"],
      [1, path("missing.json"), "refused"],
      [2, path("linear.json"), "ok"],
      [2, path("missing.json"), "refused"],
    ]);
    // The second refusal comes from the sweep's cache of profile outcomes, and is located as the first.
    expect(rows[1]!.reason).toMatch(new RegExp(`^${grid.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:2: profile: .*missing\\.json: `));
    expect(rows[3]!.reason).toBe(rows[1]!.reason);
  });

  it("refuses a grid path that is no spec field, and a bad grid, before running", async () => {
    const typo = await run("sweep", "--spec", path("spec.yaml"), "--grid", write("g1.yaml", "engine.max_num_seq: [1, 2]\n"));
    expect(typo.code).toBe(2);
    expect(typo.stderr).toBe(`error: invalid input\n${path("g1.yaml")}:1: engine.max_num_seq: is not a field of a spec (engine.max_num_seq: unknown key)\n`);
    const bad = await run("sweep", "--spec", path("spec.yaml"), "--grid", write("g2.yaml", "engine.max_num_seqs: 4\n"));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("engine.max_num_seqs: expected a list of values, {from, to, step} or {values, zip}");
    const noGrid = await run("sweep", "--spec", path("spec.yaml"));
    expect([noGrid.code, noGrid.stderr]).toEqual([2, "error: kvsim sweep needs --grid <file> (or --find max-rate|min-workers with --sla)\n"]);
  });
});

describe("kvsim sweep --cancel", () => {
  it("needs --sweep-id and --queue, and runs nothing else", async () => {
    const missing = await run("sweep", "--cancel", "--sweep-id", "abc");
    expect([missing.code, missing.stdout]).toEqual([2, ""]);
    expect(missing.stderr).toContain("--cancel needs --sweep-id <id> and --queue <url>");
    const extra = await run("sweep", "--cancel", "--sweep-id", "abc", "--queue", "redis://127.0.0.1:6379/0", "--grid", "g.yaml", "--max-workers", "3");
    expect([extra.code, extra.stderr]).toEqual([2, "error: --cancel runs nothing: drop --grid, --max-workers\n"]);
  });
});

describe("kvsim sweep --find", () => {
  it("max-rate brackets and bisects the speedup to the rate where b's TTFT stays within 12.5 ms", async () => {
    // b arrives at t = 100 / s ms. a's passes end at 12 and 14; with one sequence, b arriving
    // before 14 waits for 14, and its first token comes 12 ms later: TTFT = 26 - t; arriving
    // after 14 it finds the rank idle: TTFT 12. So p99_ttft_ms<=12.5 holds iff t >= 13.5, i.e.
    // s <= 100 / 13.5 = 7.4074 (the bound sits away from 12, where float sums land on
    // 12.000000000000002). From s = 1: 1, 2, 4 meet; 8 (t = 12.5, TTFT 13.5) misses. Bisect:
    // 6 met; 7 met; 7.5 (t = 13.33) missed; 7.25 (t = 13.79, TTFT 12.21) met; 7.375 (t = 13.56,
    // TTFT 12.44) met, bracket 0.125 / 7.375 = 1.7%; 7.4375 rounds to 7.438 (t = 13.44, TTFT
    // 12.56) missed: 0.063 / 7.375 = 0.85% <= 1%, done.
    const r = await run("sweep", "--spec", path("spec.yaml"), "--find", "max-rate", "--sla", "p99_ttft_ms<=12.5", "--jobs", "1", "--format", "json");
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as {
      searches: { variable: string; answer: number; failing: number; probes: { candidate: number; meets: boolean }[] }[];
      rows: SweepRow[];
    };
    const s = out.searches[0]!;
    expect(s.variable).toBe("workload.speedup");
    expect(s.probes.map((p) => [p.candidate, p.meets])).toEqual([
      [1, true],
      [2, true],
      [4, true],
      [8, false],
      [6, true],
      [7, true],
      [7.5, false],
      [7.25, true],
      [7.375, true],
      [7.438, false],
    ]);
    expect([s.answer, s.failing]).toEqual([7.375, 7.438]);
    // In requests per second: 2 requests 100 / s ms apart offer 1 / (100 / s) per ms = 10 s req/s:
    // 73.75 at 7.375, 74.38 at 7.438.
    const rates = out.searches[0] as unknown as { answer_rps: number; failing_rps: number };
    expect(rates.answer_rps).toBeCloseTo(73.75, 9);
    expect(rates.failing_rps).toBeCloseTo(74.38, 9);
    expect(out.rows.map((x) => x.settings["workload.speedup"])).toEqual(s.probes.map((p) => p.candidate));
    const table = await run("sweep", "--spec", path("spec.yaml"), "--find", "max-rate", "--sla", "p99_ttft_ms<=12.5", "--jobs", "1");
    expect(table.stdout).toContain("answer: 73.75 req/s (workload.speedup 7.375) meets the SLA; 74.38 req/s (speedup 7.438) does not (tolerance 1.0%)");
    // The rows show the offered rate beside the served one.
    expect(table.stdout).toMatch(/\npoint +workload\.speedup +status +offered req\/s +done +p99_ttft_ms +served req\/s +sla/);
  });

  it("min-workers finds the fewest aggregated workers: four requests at once need four", async () => {
    write("trace.jsonl", ["a", "b", "c", "d"].map((id) => request(id, 0)).join(""));
    // Round robin, one sequence per worker: a worker with k requests serves its k-th at
    // 14 (k - 1) + 12 ms. p99_ttft_ms<=12 needs one request per worker: 1, 2 miss, 4 meets,
    // then 3 (one worker holds two) misses: 4 workers, 4 GPUs at TP 1.
    const r = await run("sweep", "--spec", path("spec.yaml"), "--find", "min-workers", "--sla", "p99_ttft_ms<=12", "--jobs", "1");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("search over topology.workers: 1 workers missed, 2 workers missed, 4 workers met, 3 workers missed");
    expect(r.stdout).toContain("answer: 4 workers (4 GPUs)");
  });

  it("max-rate on the bundled aggregated example: the answer meets the SLA and 5% more does not", { timeout: 300_000 }, async () => {
    const spec = join(examplesDir(), "replay-aggregated.yaml");
    const sla = "p90_ttft_ms<=500,p99_itl_ms<=30";
    const r = await run("sweep", "--spec", spec, "--find", "max-rate", "--sla", sla, "--jobs", "1", "--format", "json");
    expect(r.code).toBe(0);
    const s = (JSON.parse(r.stdout) as { searches: { variable: string; answer: number; failing: number }[] }).searches[0]!;
    expect(s.variable).toBe("workload.synthetic.rate_per_s");
    expect((s.failing - s.answer) / s.answer).toBeLessThanOrEqual(0.01);
    const at = async (rate: number) => {
      const replay = await run("replay", "--spec", spec, "--set", `workload.synthetic.rate_per_s=${rate}`, "--format", "json");
      return meetsSla(JSON.parse(replay.stdout) as never, parseSla(sla));
    };
    expect(await at(s.answer)).toBe(true);
    expect(await at(s.answer * 1.05)).toBe(false);
  });

  it("refuses --find without --sla, and an SLA naming no report metric", async () => {
    const noSla = await run("sweep", "--spec", path("spec.yaml"), "--find", "max-rate");
    expect([noSla.code, noSla.stderr]).toEqual([2, "error: --find max-rate needs --sla, e.g. --sla p90_ttft_ms<=2000,p99_itl_ms<=50\n"]);
    const bad = await run("sweep", "--spec", path("spec.yaml"), "--find", "max-rate", "--sla", "p90_ttft<=1");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^error: --sla: "p90_ttft" is not a report metric; one of: /);
  });
});

describe("kvsim diff", () => {
  it("puts every metric side by side with its change", async () => {
    expect((await run("replay", "--spec", path("spec.yaml"), "--report", path("a.json"), "--format", "json")).code).toBe(0);
    expect((await run("replay", "--spec", path("spec.yaml"), "--set", "timing.prefill_ms=20", "--report", path("b.json"), "--format", "json")).code).toBe(0);
    const r = await run("diff", path("a.json"), path("b.json"));
    expect(r.code).toBe(0);
    // TTFT 12 -> 22: +10, 10 / 12 = +83.3%. Preemptions stay 0: +0, 0.0%.
    expect(r.stdout).toMatch(/\nmean_ttft_ms +12 +22 +\+10 +\+83\.3%\n/);
    expect(r.stdout).toMatch(/\npreemptions +0 +0 +0 +0\.0%\n/);
    // vLLM's names of the same figures are folded into one row each, and named once below the table.
    expect(r.stdout).not.toMatch(/\nmedian_ttft_ms |\nmean_e2el_ms /);
    expect(r.stdout).toContain("median_* = p50_*, *_e2el_ms = *_e2e_ms)\n");
    const json = JSON.parse((await run("diff", path("a.json"), path("b.json"), "--format", "json")).stdout) as {
      same_digest: boolean;
      metrics: { metric: string; change: number }[];
    };
    expect(json.same_digest).toBe(false);
    expect(json.metrics.find((m) => m.metric === "mean_e2e_ms")?.change).toBe(10);
  });

  it("refuses a file that is no report", async () => {
    const r = await run("diff", write("x.json", "[1]"), write("y.json", "{}"));
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `error: invalid input\n${path("x.json")}: is not a kvsim report (a JSON object with a digest, as written by kvsim replay --report)\n`,
    );
  });
});
