export { renderReplayHtml, type ReplayHtmlInput, type LatencyQuantiles } from "./replay-page.js";
export { CHART_LIBRARY, type ChartAssets } from "./page.js";
export { renderSweepHtml, type SweepHtmlInput, type SearchSummary, type SlaBound } from "./sweep-page.js";
export { renderCompareHtml, type CompareHtmlInput, type CompareFigure, type CompareSamples } from "./compare-page.js";
export { renderPlanHtml, type PlanHtmlInput, type PlanPageRow } from "./plan-page.js";
