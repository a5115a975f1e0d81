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

interface DrawnChart {
  id: string;
  title: string;
  xLabel: string;
  yLabel: string;
  axisLabels: string[];
  colored: number;
  width: number;
}

/** Opens a report; returns its page, the console errors and every chart as drawn. */
async function open(file: string): Promise<{ page: Page; errors: string[]; charts: DrawnChart[]; placeholders: number }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  // Offline: a report that fetched anything would fail to load it (and log an error).
  await page.goto(`file://${file}`);
  // (Page code: the browser's globals, described here since the CLI compiles without the DOM library.)
  await page.waitForFunction(() => (globalThis as unknown as { document: { body: { dataset: Record<string, string | undefined> } } }).document.body.dataset.chartsDrawn !== undefined, undefined, { timeout: 20_000 });
  const charts = await page.evaluate(() => {
    interface Axis {
      label?: string;
    }
    interface Drawn {
      id: string;
      title: string;
      xLabel: string;
      yLabel: string;
      plot: { axes: Axis[]; ctx: { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } }; bbox: { left: number; top: number; width: number; height: number } };
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
      return { id: c.id, title: c.title, xLabel: c.xLabel, yLabel: c.yLabel, axisLabels: c.plot.axes.map((a) => a.label ?? ""), colored, width };
    });
  });
  const placeholders = await page.locator(".chart").count();
  return { page, errors, charts, placeholders };
}

function valueAt(report: unknown, key: string): unknown {
  let v: unknown = report;
  for (const k of key.split(".")) v = typeof v === "object" && v !== null ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

describe.skipIf(missing)("HTML reports in headless Chromium", () => {
  it("kvsim replay --html: the bundled example's report draws every chart and shows the JSON report's numbers", async () => {
    const html = join(dir, "replay.html");
    const json = join(dir, "replay.json");
    const io = captureIo();
    expect(await runCli(["replay", "--html", html, "--report", json], io)).toBe(0);
    const report = JSON.parse(readFileSync(json, "utf8")) as Record<string, unknown>;
    const { page, errors, charts, placeholders } = await open(html);
    expect(errors).toEqual([]);
    // Every placeholder got a chart: 4 CDFs, 8 time series, per-group pages, 2 handoff series, 2 handoff scatter charts.
    expect(charts.length).toBe(placeholders);
    expect(charts.map((c) => c.id)).toEqual(expect.arrayContaining(["cdf-ttft", "cdf-tpot", "cdf-itl", "cdf-e2e", "ts-running", "ts-kv-used", "ts-kv-groups", "ts-handoffs", "handoff-delay"]));
    for (const c of charts) {
      // Its axis labels are the ones asked for, and its series put colour in the plot.
      expect([c.id, ...c.axisLabels]).toEqual([c.id, c.xLabel, c.yLabel]);
      expect([c.id, c.colored > 20]).toEqual([c.id, true]);
    }
    expect(charts.find((c) => c.id === "cdf-ttft")!.axisLabels).toEqual(["TTFT (ms)", "fraction of requests"]);
    expect(charts.find((c) => c.id === "ts-running")!.axisLabels).toEqual(["virtual time (s)", "requests"]);
    // The summary's numbers are the report's, exactly (data-value), and shown rounded.
    interface Td {
      getAttribute(name: string): string | null;
      textContent: string | null;
    }
    const cells = await page.locator("td[data-key]").evaluateAll((tds: Td[]) => tds.map((td) => ({ key: td.getAttribute("data-key")!, value: td.getAttribute("data-value")!, text: td.textContent })));
    expect(cells.length).toBeGreaterThanOrEqual(30);
    for (const c of cells) expect([c.key, Number(c.value)]).toEqual([c.key, valueAt(report, c.key)]);
    const p90 = cells.find((c) => c.key === "p90_ttft_ms")!;
    expect(p90.text).toBe((report.p90_ttft_ms as number).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }));
    expect(await page.locator("#digest").textContent()).toBe(report.digest);
    // P/D: the workers table lists the 2 prefill and 2 decode workers; no request failed.
    expect(await page.locator("#workers tbody tr").count()).toBe(4);
    expect(await page.locator("#failures-none").count()).toBe(1);
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, "replay-report.png"), fullPage: true });
    await page.close();
  }, 120_000);

  it("kvsim sweep --html: a search's SLA frontier, latency against the swept variable, goodput against GPUs", async () => {
    const html = join(dir, "sweep.html");
    const grid = join(dir, "grid.yaml");
    writeFileSync(grid, "topology.workers: [1, 2]\n");
    const io = captureIo();
    const code = await runCli(
      ["sweep", "--spec", join(EXAMPLES, "replay-aggregated.yaml"), "--set", "workload.synthetic.requests=40", "--grid", grid, "--find", "max-rate", "--sla", "p90_ttft_ms<=300", "--jobs", "1", "--html", html],
      io,
    );
    expect([code, io.stderr]).toEqual([0, ""]);
    const { page, errors, charts, placeholders } = await open(html);
    expect(errors).toEqual([]);
    expect(charts.length).toBe(placeholders);
    expect(charts.map((c) => c.id)).toEqual(expect.arrayContaining(["search-0-p90_ttft_ms", "search-1-p90_ttft_ms", "gpus"]));
    for (const c of charts) {
      expect([c.id, ...c.axisLabels]).toEqual([c.id, c.xLabel, c.yLabel]);
      expect([c.id, c.colored > 5]).toEqual([c.id, true]);
    }
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, "sweep-report.png"), fullPage: true });
    await page.close();
  }, 180_000);

  it("kvsim compare --html: measured against simulated CDFs", async () => {
    // The bundled example's records against the same run with decode workers halved.
    const io = captureIo();
    expect(await runCli(["replay", "--requests", join(dir, "a.jsonl"), "--quiet"], io)).toBe(0);
    expect(await runCli(["replay", "--set", "topology.decode.workers=1", "--requests", join(dir, "b.jsonl"), "--quiet"], io)).toBe(0);
    expect(await runCli(["compare", "--measured", join(dir, "a.jsonl"), "--requests", join(dir, "b.jsonl"), "--html", join(dir, "compare.html")], io)).toBe(0);
    const { page, errors, charts, placeholders } = await open(join(dir, "compare.html"));
    expect(errors).toEqual([]);
    expect(charts.length).toBe(placeholders);
    expect(charts.map((c) => c.id)).toEqual(["cdf-ttft", "cdf-tpot", "cdf-e2e"]);
    for (const c of charts) {
      expect([c.id, ...c.axisLabels]).toEqual([c.id, c.xLabel, c.yLabel]);
      expect([c.id, c.colored > 20]).toEqual([c.id, true]);
    }
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, "compare-report.png"), fullPage: true });
    await page.close();
  }, 120_000);
});
