/**
 * Axis choices made before the page is drawn, so a chart reads at a glance: a log scale for data
 * spanning decades, marks (an SLA) kept on the axis only when they sit near the data.
 */

/** A latency axis turns logarithmic when its largest value is this many times its median (or more). */
const LOG_AXIS_SPREAD = 20;

/**
 * A mark stays on a linear axis when it lies within this many data spans of the data; further out,
 * stretching the axis to it would squash the data into a sliver, so the page names it at the edge.
 */
const MARK_REACH_SPANS = 1.5;

/** On a log axis, a mark within this factor of the data is kept on the axis. */
const LOG_MARK_REACH = 10;

/** An axis for one set of values and the marks drawn on it. */
export interface AxisChoice {
  readonly log: boolean;
  /** The scale's range (the data's, with the marks near it, and a little room). */
  readonly range: readonly [number, number];
}

/**
 * The axis of a sample (any order; the median is its middle value): logarithmic when every value
 * is positive and the largest is at least LOG_AXIS_SPREAD times the median; the range covers the
 * data and the marks near it. Null for an empty sample.
 */
export function chooseAxis(values: readonly number[], marks: readonly number[] = [], opts: { readonly allowLog?: boolean } = {}): AxisChoice | null {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return null;
  const sorted = [...finite].sort((a, b) => a - b);
  const lo = sorted[0]!;
  const hi = sorted[sorted.length - 1]!;
  const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
  const log = opts.allowLog !== false && lo > 0 && hi >= LOG_AXIS_SPREAD * median;
  if (log) {
    const near = marks.filter((m) => m > 0 && m >= lo / LOG_MARK_REACH && m <= hi * LOG_MARK_REACH);
    const a = Math.min(lo, ...near);
    const b = Math.max(hi, ...near);
    return { log, range: [a / 1.2, b * 1.2] };
  }
  const span = hi - lo || Math.abs(hi) * 0.1 || 1;
  const near = marks.filter((m) => m >= lo - MARK_REACH_SPANS * span && m <= hi + MARK_REACH_SPANS * span);
  const a = Math.min(lo, ...near);
  const b = Math.max(hi, ...near);
  const pad = (b - a) * 0.04 || Math.abs(b) * 0.1 || 1;
  return { log, range: [a >= 0 && a - pad < 0 ? 0 : a - pad, b + pad] };
}
