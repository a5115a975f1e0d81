// The HTML reports in a real browser: Debian's chromium driven by playwright-core. Skips with one
// line where /usr/bin/chromium is missing (.ci/run installs it).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

const CHROMIUM = "/usr/bin/chromium";
const missing = !existsSync(CHROMIUM);
if (missing) console.warn(`SKIPPED the browser test of the HTML reports: ${CHROMIUM} is missing (apt-get install -y chromium)`);

/** Screenshots go to the repository's ignored reports/ folder, for a person to look at. */
const SHOTS = fileURLToPath(new URL("../../../../reports/browser/", import.meta.url));
const EXAMPLES = fileURLToPath(new URL("../../examples/", import.meta.url));

let dir: string;
let context: BrowserContext;

beforeAll(async () => {
  if (missing) return;
  dir = mkdtempSync(join(tmpdir(), "kvsim-browser-"));
  context = await chromium.launchPersistentContext(join(dir, "profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
    viewport: { width: 1280, height: 900 },
    offline: true,
  });
}, 60_000);
afterAll(async () => {
  if (missing) return;
  await context.close();
  rmSync(dir, { recursive: true, force: true });
});

interface TextBox {
  text: string;
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

interface DrawnChart {
  id: string;
  title: string;
  xLabel: string;
  yLabel: string;
  axisLabels: string[];
  colored: number;
  width: number;
  /** Every text the chart's canvas drew (tick values, axis titles, marks), as boxes in canvas pixels. */
  texts: TextBox[];
  canvas: { width: number; height: number };
}

/**
 * Page code run before the report's: records the box of every text drawn on a canvas (from the
 * context's transform and the text's measured extent), and forgets a canvas's texts when it is
 * cleared whole (uPlot clears before each redraw).
 */
const RECORD_TEXTS = `(() => {
  const P = CanvasRenderingContext2D.prototype;
  const fillText = P.fillText;
  const clearRect = P.clearRect;
  P.clearRect = function (x, y, w, h) {
    if (x <= 0 && y <= 0 && x + w >= this.canvas.width && y + h >= this.canvas.height) this.canvas.__texts = [];
    return clearRect.call(this, x, y, w, h);
  };
  P.fillText = function (text, x, y, maxWidth) {
    const m = this.measureText(String(text));
    const t = this.getTransform();
    const xs = [x - m.actualBoundingBoxLeft, x + m.actualBoundingBoxRight];
    const ys = [y - m.actualBoundingBoxAscent, y + m.actualBoundingBoxDescent];
    const px = [], py = [];
    for (const a of xs) for (const b of ys) { px.push(t.a * a + t.c * b + t.e); py.push(t.b * a + t.d * b + t.f); }
    (this.canvas.__texts ??= []).push({ text: String(text), x0: Math.min(...px), y0: Math.min(...py), x1: Math.max(...px), y1: Math.max(...py) });
    return fillText.call(this, text, x, y, maxWidth);
  };
})();`;

/** Pairs of texts on one chart whose boxes overlap (by more than a pixel each way). */
function overlaps(texts: readonly TextBox[]): string[] {
  const out: string[] = [];
  const blank = (t: TextBox) => t.text.trim() === "" || t.x1 - t.x0 < 0.5;
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i]!;
      const b = texts[j]!;
      if (blank(a) || blank(b)) continue;
      const w = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0);
      const h = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
      if (w > 1 && h > 1) out.push(`"${a.text}" overlaps "${b.text}"`);
    }
  }
  return out;
}

/** Texts that run off their canvas (a label cut off at the plot's edge). */
function clipped(c: DrawnChart): string[] {
  return c.texts.filter((t) => t.x0 < -1 || t.y0 < -1 || t.x1 > c.canvas.width + 1 || t.y1 > c.canvas.height + 1).map((t) => `"${t.text}" runs off the canvas`);
}

/** Opens a report at a window width; returns its page, the console errors and every chart as drawn. */
async function open(file: string, width = 1280): Promise<{ page: Page; errors: string[]; charts: DrawnChart[]; placeholders: number; overflow: number }> {
  const page = await context.newPage();
  await page.setViewportSize({ width, height: 900 });
  await page.addInitScript({ content: RECORD_TEXTS });
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  // Offline: a report that fetched anything would fail to load it (and log an error).
  await page.goto(`file://${file}`);
  // (Page code: the browser's globals, described here since the CLI compiles without the DOM library.)
  await page.waitForFunction(
    () => (globalThis as unknown as { document: { body: { dataset: Record<string, string | undefined> } } }).document.body.dataset.chartsDrawn !== undefined,
    undefined,
    { timeout: 20_000 },
  );
  const charts = await page.evaluate(() => {
    interface Axis {
      label?: string;
    }
    interface Drawn {
      id: string;
      title: string;
      xLabel: string;
      yLabel: string;
      plot: {
        axes: Axis[];
        ctx: {
          canvas: { width: number; height: number; __texts?: TextBox[] };
          getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray };
        };
        bbox: { left: number; top: number; width: number; height: number };
      };
    }
    const drawn = (globalThis as unknown as { kvsimCharts: Drawn[] }).kvsimCharts;
    return drawn.map((c) => {
      // Saturated pixels inside the plotting area: the series (axes and grid are grey).
      const { left, top, width, height } = c.plot.bbox;
      const img = c.plot.ctx.getImageData(left, top, Math.max(1, width), Math.max(1, height)).data;
      let colored = 0;
      for (let i = 0; i < img.length; i += 4) {
        const r = img[i]!;
        const g = img[i + 1]!;
        const b = img[i + 2]!;
        if (img[i + 3]! > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 60) colored++;
      }
      const canvas = c.plot.ctx.canvas;
      return {
        id: c.id,
        title: c.title,
        xLabel: c.xLabel,
        yLabel: c.yLabel,
        axisLabels: c.plot.axes.map((a) => a.label ?? ""),
        colored,
        width,
        texts: canvas.__texts ?? [],
        canvas: { width: canvas.width, height: canvas.height },
      };
    });
  });
  const placeholders = await page.locator(".chart").count();
  // How far the page runs past the window's right edge (a phone must not scroll sideways).
  const overflow = await page.evaluate(() => {
    const d = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document.documentElement;
    return d.scrollWidth - d.clientWidth;
  });
  return { page, errors, charts, placeholders, overflow };
}

/** Every chart has data drawn, its axis titles, and no text over another or off its canvas. */
function expectReadable(charts: readonly DrawnChart[], minColored = 20): void {
  for (const c of charts) {
    expect([c.id, ...c.axisLabels]).toEqual([c.id, c.xLabel, c.yLabel]);
    expect([c.id, c.colored > minColored]).toEqual([c.id, true]);
    // At least the two axis titles and a tick value on each axis.
    expect([c.id, c.texts.length >= 4]).toEqual([c.id, true]);
    expect([c.id, ...overlaps(c.texts), ...clipped(c)]).toEqual([c.id]);
  }
}

/** A report at the desktop and the phone width: readable at both; a screenshot of each for a person. */
async function checkWidths(file: string, name: string, minColored = 20): Promise<void> {
  for (const width of [1400, 390]) {
    const { page, errors, charts, placeholders, overflow } = await open(file, width);
    expect([width, errors]).toEqual([width, []]);
    expect([width, charts.length]).toEqual([width, placeholders]);
    expectReadable(charts, minColored);
    expect([width, overflow <= 0]).toEqual([width, true]);
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
    await page.close();
  }
}

function valueAt(report: unknown, key: string): unknown {
  let v: unknown = report;
  for (const k of key.split(".")) v = typeof v === "object" && v !== null ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

describe.skipIf(missing)("HTML reports in headless Chromium", () => {
  it("kvsim replay --html: the bundled example's report (P/D) draws every chart, shows the JSON report's numbers, the spec as written and the timing model", async () => {
    const html = join(dir, "replay.html");
    const json = join(dir, "replay.json");
    const io = captureIo();
    expect(await runCli(["replay", "--html", html, "--report", json, "--set", "kv_transfer.bandwidth=400 Gbit/s"], io)).toBe(0);
    const report = JSON.parse(readFileSync(json, "utf8")) as Record<string, unknown>;
    const { page, errors, charts, placeholders } = await open(html, 1400);
    expect(errors).toEqual([]);
    // Every placeholder got a chart: 4 CDFs, 8 time series, per-group pages, 2 handoff series, 2 handoff scatter charts.
    expect(charts.length).toBe(placeholders);
    expect(charts.map((c) => c.id)).toEqual(
      expect.arrayContaining(["cdf-ttft", "cdf-tpot", "cdf-itl", "cdf-e2e", "ts-running", "ts-kv-used", "ts-kv-groups", "ts-handoffs", "handoff-delay"]),
    );
    // Every chart has data, its axis titles, and no label over another or cut off.
    expectReadable(charts);
    expect(charts.find((c) => c.id === "cdf-ttft")!.axisLabels).toEqual(["TTFT (ms)", "fraction of requests"]);
    expect(charts.find((c) => c.id === "ts-running")!.axisLabels).toEqual(["virtual time (s)", "requests"]);
    // The TPOT CDF sits near 7 ms, the ITL SLA at 50: the SLA is named at the plot's edge, not drawn 7x off.
    expect(charts.find((c) => c.id === "cdf-tpot")!.texts.map((t) => t.text)).toContain("SLA ITL 50 ms \u2192");
    // Byte axes in decimal units (tick values like "1 GB/s"), not 10-digit numbers.
    expect(charts.find((c) => c.id === "ts-handoff-bytes")!.texts.some((t) => / [kMG]B\/s$/.test(t.text))).toBe(true);
    // The summary's numbers are the report's, exactly (data-value), and shown rounded.
    interface Td {
      getAttribute(name: string): string | null;
      textContent: string | null;
    }
    const cells = await page
      .locator("td[data-key]")
      .evaluateAll((tds: Td[]) => tds.map((td) => ({ key: td.getAttribute("data-key")!, value: td.getAttribute("data-value")!, text: td.textContent })));
    expect(cells.length).toBeGreaterThanOrEqual(30);
    for (const c of cells) expect([c.key, Number(c.value)]).toEqual([c.key, valueAt(report, c.key)]);
    const p90 = cells.find((c) => c.key === "p90_ttft_ms")!;
    expect(p90.text).toBe((report.p90_ttft_ms as number).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }));
    expect(await page.locator("#digest").textContent()).toBe(report.digest);
    // P/D: the workers table lists the 2 prefill and 2 decode workers; no request failed.
    expect(await page.locator("#workers tbody tr").count()).toBe(4);
    expect(await page.locator("#failures-none").count()).toBe(1);
    // The header names the timing model and its caveat; the bundled run does not saturate.
    expect(await page.locator("#timing").textContent()).toMatch(/^timing: the profile's forward-pass tables .*Illustrative, not measured/);
    expect(await page.locator("#warnings").count()).toBe(0);
    // The spec as the user wrote it, in its units, with the --set flag; the resolved one (bandwidth_gbps) is folded away.
    expect(await page.locator("#spec-text").textContent()).toContain("kv_transfer: { bandwidth: 50 GB/s, mode: destination_missing }");
    expect(await page.locator("#settings").textContent()).toContain("kv_transfer.bandwidth=400 Gbit/s");
    expect(await page.locator("#settings-json").isVisible()).toBe(false);
    // Folded, the resolved spec has the bandwidth with its units too, not the legacy key.
    const resolved = await page.locator("#settings-json").textContent();
    expect([resolved?.includes('"bandwidth": "50 GB/s (400 Gbit/s)"'), resolved?.includes("bandwidth_gbps")]).toEqual([true, false]);
    mkdirSync(SHOTS, { recursive: true });
    // The README's screenshot (docs/replay-report.png) is this one: 1100 px wide, the page's top 1650 px.
    await page.setViewportSize({ width: 1100, height: 900 });
    await page.waitForTimeout(300);
    await page.screenshot({ path: join(SHOTS, "replay-report.png"), fullPage: true, clip: { x: 0, y: 0, width: 1100, height: 1650 } });
    await page.close();
    await checkWidths(html, "replay-pd");
  }, 120_000);

  it("kvsim replay --html, aggregated and saturated: no handoff rows or charts, the saturation warning in the header, a long ITL tail on a log axis", async () => {
    const html = join(dir, "aggregated.html");
    const io = captureIo();
    const saturate = ["--set", "topology.workers=1", "--set", "workload.synthetic.rate_per_s=40", "--set", "workload.synthetic.requests=400"];
    expect(await runCli(["replay", "--spec", join(EXAMPLES, "replay-aggregated.yaml"), ...saturate, "--html", html, "--quiet"], io)).toBe(0);
    expect(io.stdout).toContain("warning: saturated");
    const { page, charts } = await open(html, 1400);
    expect(await page.locator("#warnings li").first().textContent()).toMatch(/^warning: Saturated: requests arrive at 40\.\d\d req\/s but are served at/);
    expect(await page.locator('td[data-key^="handoffs."]').count()).toBe(0);
    expect(charts.some((c) => c.id.includes("handoff"))).toBe(false);
    // ITL runs from about 10 ms to seconds (preemptions): a log axis.
    expect(charts.find((c) => c.id === "cdf-itl")!.xLabel).toBe("ITL (ms, log scale)");
    await page.close();
    await checkWidths(html, "replay-aggregated");
  }, 120_000);

  it("kvsim replay --html with a CPU offload tier: the tiers' table shows the JSON report's numbers, the occupancy chart draws", async () => {
    // The aggregated example with 600 GPU blocks a worker (about four requests' worth): evicted
    // prefixes come back from a 2 GiB CPU tier per worker.
    const spec = join(dir, "offload.yaml");
    writeFileSync(
      spec,
      [
        "version: 1",
        `profile: ${JSON.stringify(join(EXAMPLES, "profiles/llama-3.1-8b-instruct-tp1-bf16-vllm-0.32.0.json"))}`,
        "topology: { kind: aggregated, workers: 2 }",
        "engine: { num_gpu_blocks: 600, block_size: 16, max_num_batched_tokens: 8192, max_num_seqs: 128, enable_prefix_caching: true }",
        "timing: { type: profile, outside_grid: clamp }",
        "workload:",
        "  synthetic: { requests: 200, input_tokens: 2048, output_tokens: 128, rate_per_s: 20, seed: 7, shared_prefix_ratio: 0.5 }",
        "router: kv_aware",
        "kv_offload: { tiers: [{ name: cpu, capacity: 2 GiB, read_bandwidth: 25 GB/s, write_bandwidth: 25 GB/s, latency_ms: 0.05 }] }",
        "",
      ].join("\n"),
    );
    const html = join(dir, "offload.html");
    const json = join(dir, "offload.json");
    expect(await runCli(["replay", "--spec", spec, "--html", html, "--report", json, "--quiet"], captureIo())).toBe(0);
    const report = JSON.parse(readFileSync(json, "utf8")) as { kv_offload: { loads: number } };
    expect(report.kv_offload.loads).toBeGreaterThan(0);
    const { page, errors, charts } = await open(html, 1400);
    expect(errors).toEqual([]);
    const occupancy = charts.find((c) => c.id === "ts-offload")!;
    expect(occupancy.axisLabels).toEqual(["virtual time (s)", "bytes held (mean)"]);
    // A byte axis in decimal units (ticks like "2 GB"); the tier fills to its 2 GiB.
    expect(occupancy.texts.some((t) => / [kMG]B$/.test(t.text))).toBe(true);
    expectReadable([occupancy]);
    // The tiers' table: one tier (both workers' instances summed), every number the report's.
    interface Td {
      getAttribute(name: string): string | null;
    }
    expect(await page.locator("#kv-offload tbody tr").count()).toBe(1);
    const cells = await page
      .locator("#kv-offload-tiers td[data-key]")
      .evaluateAll((tds: Td[]) => tds.map((td) => ({ key: td.getAttribute("data-key")!, value: td.getAttribute("data-value")! })));
    expect(cells.length).toBe(12);
    for (const c of cells) expect([c.key, c.value === "" ? null : Number(c.value)]).toEqual([c.key, valueAt(report, c.key)]);
    await page.close();
    await checkWidths(html, "replay-offload");
  }, 120_000);

  it("kvsim replay --html with every request rejected: no empty plot, the reason in the header", async () => {
    const html = join(dir, "rejected.html");
    const io = captureIo();
    expect(await runCli(["replay", "--set", "engine.max_model_len=512", "--html", html, "--quiet"], io)).toBe(0);
    const { page, charts } = await open(html, 1400);
    expect(await page.locator("#warnings").textContent()).toContain("No request completed");
    expect(await page.locator("#cdfs-none").count()).toBe(1);
    // Only the requests chart has something to show; the idle ones are named instead.
    expect(charts.map((c) => c.id)).toEqual(["ts-requests"]);
    expect(await page.locator("#timeseries-idle").count()).toBe(1);
    await page.close();
    await checkWidths(html, "replay-rejected");
  }, 120_000);

  it("kvsim sweep --html: a search's SLA frontier, latency against the swept variable, goodput against GPUs", async () => {
    const html = join(dir, "sweep.html");
    const grid = join(dir, "grid.yaml");
    writeFileSync(grid, "topology.workers: [1, 2]\n");
    const io = captureIo();
    const code = await runCli(
      [
        "sweep",
        "--spec",
        join(EXAMPLES, "replay-aggregated.yaml"),
        "--set",
        "workload.synthetic.requests=40",
        "--grid",
        grid,
        "--find",
        "max-rate",
        "--sla",
        "p90_ttft_ms<=300",
        "--jobs",
        "1",
        "--html",
        html,
      ],
      io,
    );
    expect([code, io.stderr]).toEqual([0, ""]);
    const { page, charts } = await open(html, 1400);
    expect(charts.map((c) => c.id)).toEqual(expect.arrayContaining(["search-0-p90_ttft_ms", "search-1-p90_ttft_ms", "gpus"]));
    // The bound and the answer are labelled on each frontier (expectReadable: neither over the other).
    for (const c of charts.filter((x) => x.id.startsWith("search-"))) {
      expect(c.texts.map((t) => t.text)).toEqual(expect.arrayContaining(["SLA p90_ttft_ms <= 300", expect.stringMatching(/^answer /)]));
    }
    await page.close();
    await checkWidths(html, "sweep-find", 5);
  }, 180_000);

  it("kvsim sweep --html over the bundled grid: latency against both swept variables", async () => {
    const html = join(dir, "sweep-grid.html");
    const io = captureIo();
    const code = await runCli(
      ["sweep", "--spec", join(EXAMPLES, "replay-pd.yaml"), "--grid", join(EXAMPLES, "sweep-pd-grid.yaml"), "--jobs", "1", "--html", html],
      io,
    );
    expect([code, io.stderr]).toEqual([0, ""]);
    await checkWidths(html, "sweep-grid");
  }, 180_000);

  it("kvsim plan --html: the Pareto front and the ranked candidates", async () => {
    const config = join(dir, "llama-8b.json");
    writeFileSync(config, readFileSync(join(EXAMPLES, "models", "llama-3.1-8b-instruct.config.json")));
    const trace = join(dir, "plan-trace.jsonl");
    // 60 requests with prompts of 256 to 4,096 tokens, 100 ms apart.
    writeFileSync(
      trace,
      Array.from({ length: 60 }, (_, i) => `{"request_id":"r${i}","arrival_ms":${i * 100},"input_tokens":${256 << (i % 5)},"output_tokens":64}\n`).join(""),
    );
    const html = join(dir, "plan.html");
    const io = captureIo();
    const args = ["plan", "--model", config, "--gpu", "H100-SXM", "--gpus", "4", "--tp", "1,2", "--trace", trace, "--sla", "p90_ttft_ms<=500,p90_tpot_ms<=25"];
    const code = await runCli([...args, "--max-num-seqs", "16,256", "--max-num-batched-tokens", "2048", "--jobs", "1", "--html", html], io);
    expect([code, io.stderr]).toEqual([0, ""]);
    const { page, charts } = await open(html, 1400);
    expect(charts.map((c) => c.id)).toEqual(["pareto"]);
    expect(await page.locator("#ranked-table tbody tr").count()).toBeGreaterThan(1);
    await page.close();
    await checkWidths(html, "plan", 5);
  }, 180_000);

  it("kvsim compare --html: measured against simulated CDFs", async () => {
    // The bundled example's records against the same run with decode workers halved.
    const io = captureIo();
    expect(await runCli(["replay", "--requests", join(dir, "a.jsonl"), "--quiet"], io)).toBe(0);
    expect(await runCli(["replay", "--set", "topology.decode.workers=1", "--requests", join(dir, "b.jsonl"), "--quiet"], io)).toBe(0);
    expect(await runCli(["compare", "--measured", join(dir, "a.jsonl"), "--requests", join(dir, "b.jsonl"), "--html", join(dir, "compare.html")], io)).toBe(0);
    const { page, charts } = await open(join(dir, "compare.html"), 1400);
    expect(charts.map((c) => c.id)).toEqual(["cdf-ttft", "cdf-tpot", "cdf-e2e"]);
    await page.close();
    await checkWidths(join(dir, "compare.html"), "compare");
  }, 120_000);
});
