import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

const SPEC = fileURLToPath(new URL("../../examples/replay-aggregated.yaml", import.meta.url));
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-sweep-html-"));
  writeFileSync(join(dir, "grid.yaml"), "engine.max_num_seqs: [4, 16]\n");
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function sweep(...args: string[]) {
  const io = captureIo();
  const code = await runCli(["sweep", "--spec", SPEC, "--set", "workload.synthetic.requests=20", "--grid", join(dir, "grid.yaml"), "--jobs", "1", ...args], io);
  return { code, ...io };
}

/** The charts a page asks its script to draw. */
function charts(html: string): { id: string; x: number[]; series: { label: string }[] }[] {
  const m = /<script type="application\/json" id="kvsim-charts">(.*?)<\/script>/s.exec(html);
  return JSON.parse(m![1]!) as { id: string; x: number[]; series: { label: string }[] }[];
}

describe("kvsim sweep --html", () => {
  it("writes the grid's page: latency against the swept variable, goodput against GPUs (workers x TP)", async () => {
    const r = await sweep("--html", join(dir, "s.html"), "--sla", "p90_ttft_ms<=300");
    expect([r.code, r.stderr]).toEqual([0, ""]);
    const html = readFileSync(join(dir, "s.html"), "utf8");
    expect(html).toContain('data-ok="2" data-refused="0" data-failed="0"');
    const c = charts(html);
    // One swept variable: p50, p90 and p99 at its two values.
    const ttft = c.find((x) => x.id === "axis-0-ttft")!;
    expect(ttft.x).toEqual([4, 16]);
    expect(ttft.series.map((s) => s.label)).toEqual(["p50 TTFT", "p90 TTFT", "p99 TTFT"]);
    // The bundled aggregated spec: 2 workers of TP 1 at both points.
    expect(c.find((x) => x.id === "gpus")!.x).toEqual([2, 2]);
  });

  it("an existing file needs --force, checked before any point runs", async () => {
    writeFileSync(join(dir, "s.html"), "old");
    const r = await sweep("--html", join(dir, "s.html"), "--out", join(dir, "rows.jsonl"));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/s\.html already exists; pass --force/);
    expect(readFileSync(join(dir, "s.html"), "utf8")).toBe("old");
    expect(existsSync(join(dir, "rows.jsonl"))).toBe(false);
  });
});
