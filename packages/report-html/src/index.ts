export { renderReplayHtml, replayWarnings, MAX_LISTED_FAILURES, type ReplayHtmlInput, type LatencyQuantiles } from "./replay-page.js";
export { binTimeSeries, samplesPerBin, rollingMean, rateWindowBins, MAX_HANDOFF_POINTS, MAX_TIME_BINS } from "./replay-charts.js";
export { chooseAxis, LOG_AXIS_SPREAD, MARK_REACH_SPANS, LOG_MARK_REACH, type AxisChoice } from "./axes.js";
export { CHART_LIBRARY, escapeHtml, scriptJson, formatNumber, type ChartAssets } from "./page.js";
export { downsampleIndices } from "./downsample.js";
export type { ChartSpec, SeriesSpec, AxisUnit } from "./client.js";
export { renderSweepHtml, MAX_SPLIT_SERIES, type SweepHtmlInput, type SearchSummary, type SlaBound } from "./sweep-page.js";
export { renderCompareHtml, twoCdfs, COMPARE_CDF_POINTS, type CompareHtmlInput, type CompareFigure, type CompareSamples } from "./compare-page.js";
export { renderPlanHtml, type PlanHtmlInput, type PlanPageRow } from "./plan-page.js";
