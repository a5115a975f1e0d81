import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { ChartAssets } from "@kvsim/report-html";
import { RunError } from "./io.js";

let cached: ChartAssets | undefined;

/** uPlot's browser files, inlined into every HTML report (read once, from the installed package). */
export function chartAssets(): ChartAssets {
  if (cached !== undefined) return cached;
  let dist: string;
  try {
    dist = dirname(createRequire(import.meta.url).resolve("uplot"));
    cached = { js: readFileSync(join(dist, "uPlot.iife.min.js"), "utf8"), css: readFileSync(join(dist, "uPlot.min.css"), "utf8") };
  } catch (e) {
    throw new RunError(`the charting library uplot is not installed where kvsim can read it (${e instanceof Error ? e.message : String(e)}): reinstall kvsim`);
  }
  return cached;
}
