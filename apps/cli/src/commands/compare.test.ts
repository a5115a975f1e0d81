import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

let dir = "";
const path = (name: string) => join(dir, name);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-compare-"));
  // Measured: a queued at 0 s, first token 0.1 s, last 0.3 s, 5 tokens (TTFT 100, E2E 300, TPOT 50);
  // b queued at 1 s, first 1.2 s, last 1.6 s, 3 tokens (TTFT 200, E2E 600, TPOT 200).
  const m = (id: string, q: number, f: number, l: number, out: number) =>
    JSON.stringify({ request_id: id, input_toks: 10, output_toks: out, arrival_time: 0, queued_ts: q, scheduled_ts: q, first_token_ts: f, last_token_ts: l });
  writeFileSync(path("measured.jsonl"), `${m("a", 0, 0.1, 0.3, 5)}\n${m("b", 1, 1.2, 1.6, 3)}\n`);
  // Simulated: a TTFT 110, E2E 310; b TTFT 180, E2E 580.
  const s = (id: string, arrival: number, ttft: number, e2e: number, out: number) =>
    JSON.stringify({ request_id: id, status: "completed", arrival_ms: arrival, ttft_ms: ttft, e2e_ms: e2e, input_tokens: 10, output_tokens: out });
  writeFileSync(path("sim.jsonl"), `${s("a", 0, 110, 310, 5)}\n${s("b", 1000, 180, 580, 3)}\n`);
  writeFileSync(
    path("bad.jsonl"),
    `${m("a", 0, 0.1, 0.3, 5)}\n${JSON.stringify({ request_id: "b", input_toks: 10, output_toks: 3, queued_ts: 1, scheduled_ts: 1, first_token_ts: 1.2 })}\n`,
  );
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("kvsim compare", () => {
  it("prints measured and simulated side by side with the signed error", async () => {
    const io = captureIo();
    expect(await runCli(["compare", "--measured", path("measured.jsonl"), "--requests", path("sim.jsonl")], io)).toBe(0);
    // TTFT mean: measured 150, simulated 145, -5.00, -3.3%.
    expect(io.stdout).toMatch(/TTFT\s+mean\s+150\.00\s+145\.00\s+-5\.00\s+-3\.3%/);
    expect(io.stdout).toContain("2 selected (every request), 2 compared");
  });

  it("--format json gives the comparison for scripts, restricted to the held-out part", async () => {
    const io = captureIo();
    expect(
      await runCli(["compare", "--measured", path("measured.jsonl"), "--requests", path("sim.jsonl"), "--from-request", "1", "--format", "json"], io),
    ).toBe(0);
    const c = JSON.parse(io.stdout) as { matched: number; latency: { metric: string; stat: string; error: number }[]; measured: { format: string } };
    expect(c.matched).toBe(1);
    expect(c.measured.format).toBe("vllm-requests");
    // Only b: TTFT 180 vs 200 -> -10%.
    expect(c.latency.find((l) => l.metric === "ttft" && l.stat === "mean")!.error).toBeCloseTo(-0.1, 12);
  });

  it("a bad measured file exits 2 naming the file, line and field", async () => {
    const io = captureIo();
    expect(await runCli(["compare", "--measured", path("bad.jsonl"), "--requests", path("sim.jsonl")], io)).toBe(2);
    expect(io.stderr).toContain(`${path("bad.jsonl")}:2: last_token_ts: is required`);
  });

  it("refuses the two files swapped, naming what each holds", async () => {
    const io = captureIo();
    expect(await runCli(["compare", "--measured", path("sim.jsonl"), "--requests", path("measured.jsonl")], io)).toBe(2);
    expect(io.stdout).toBe("");
    expect(io.stderr).toContain(`--requests ${path("measured.jsonl")} holds vLLM per-request stats (a measured run), but --requests takes the simulated side`);
    expect(io.stderr).toContain(`the two files look swapped, try --measured ${path("measured.jsonl")} --requests ${path("sim.jsonl")}`);
    // A measured file on both sides is refused too (no swap to suggest).
    const both = captureIo();
    expect(await runCli(["compare", "--measured", path("measured.jsonl"), "--requests", path("measured.jsonl")], both)).toBe(2);
    expect(both.stderr).toContain("but --requests takes the simulated side");
    expect(both.stderr).not.toContain("swapped");
  });

  it("refuses both selections at once and a missing --requests", async () => {
    const io = captureIo();
    expect(await runCli(["compare", "--measured", path("measured.jsonl"), "--requests", path("sim.jsonl"), "--from-request", "1", "--after-ms", "5"], io)).toBe(
      2,
    );
    expect(await runCli(["compare", "--measured", path("measured.jsonl")], io)).toBe(2);
    expect(io.stderr).toContain("--requests <file> is required");
  });

  it("--html writes the figures and measured-against-simulated CDFs on one page", async () => {
    const io = captureIo();
    expect(await runCli(["compare", "--measured", path("measured.jsonl"), "--requests", path("sim.jsonl"), "--html", path("c.html")], io)).toBe(0);
    const html = readFileSync(path("c.html"), "utf8");
    const m = /<script type="application\/json" id="kvsim-charts">(.*?)<\/script>/s.exec(html);
    const charts = JSON.parse(m![1]!) as { id: string; x: number[]; series: { label: string; values: (number | null)[] }[] }[];
    // No per-token times on either side: no ITL chart.
    expect(charts.map((c) => c.id)).toEqual(["cdf-ttft", "cdf-tpot", "cdf-e2e"]);
    // TTFT: measured 100, 200; simulated 110, 180. On x = 100, 110, 180, 200 the measured CDF is
    // 0.5, 0.5, 0.5, 1 and the simulated one 0, 0.5, 1, 1.
    const ttft = charts[0]!;
    expect(ttft.x).toEqual([100, 110, 180, 200]);
    expect(ttft.series.map((s) => [s.label, s.values])).toEqual([
      ["measured (2)", [0.5, 0.5, 0.5, 1]],
      ["simulated (2)", [0, 0.5, 1, 1]],
    ]);
    expect(html).toContain("<td>TTFT</td><td>mean</td>");
    // An existing file needs --force (checked before reading the runs).
    expect(await runCli(["compare", "--measured", path("measured.jsonl"), "--requests", path("sim.jsonl"), "--html", path("c.html")], io)).toBe(2);
    expect(existsSync(path("c.html"))).toBe(true);
  });
});
