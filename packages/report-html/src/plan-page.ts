import type { ChartSpec } from "./client.js";
import { round } from "./downsample.js";
import { chartGrid, escapeHtml, page, table, type Cell, type ChartAssets, type Section } from "./page.js";

/** One candidate of a plan as the page shows it (the fields of a `kvsim plan --out` row it reads). */
export interface PlanPageRow {
  readonly rank: number | null;
  readonly label: string;
  readonly gpus: number;
  readonly status: string;
  readonly rate_rps: number | null;
  readonly rate_rps_per_gpu: number | null;
  readonly p90_ttft_ms: number | null;
  readonly p90_tpot_ms: number | null;
  readonly output_tokens_per_s_per_gpu: number | null;
  readonly cost_per_million_output_tokens: number | null;
  readonly limited_by: readonly string[];
  readonly reason: string | null;
}

export interface PlanHtmlInput {
  readonly assets: ChartAssets;
  readonly title: string;
  readonly subtitle: readonly string[];
  /** What the timings rest on, shown in the header. */
  readonly timing?: string;
  readonly warnings?: readonly string[];
  /** Best first. */
  readonly rows: readonly PlanPageRow[];
  /** Labels of the rows on the Pareto front. */
  readonly front: readonly string[];
  readonly notes?: readonly string[];
}

/**
 * `kvsim plan`'s result as one self-contained page: the Pareto front of output tokens per second
 * per GPU against tokens per second per user (1000 / p90 TPOT), every ranked candidate a point,
 * then the ranked table and the candidates not ranked with the reason.
 */
export function renderPlanHtml(input: PlanHtmlInput): string {
  const ranked = input.rows.filter((r) => r.rank !== null && r.p90_tpot_ms !== null && r.p90_tpot_ms > 0 && r.output_tokens_per_s_per_gpu !== null);
  const pts = ranked
    .map((r) => ({ x: round(1000 / r.p90_tpot_ms!) ?? 0, y: round(r.output_tokens_per_s_per_gpu) ?? 0, front: input.front.includes(r.label) }))
    .sort((a, b) => a.x - b.x);
  const charts: ChartSpec[] =
    pts.length === 0
      ? []
      : [
          {
            id: "pareto",
            title: "Throughput per GPU against speed per user",
            xLabel: "output tokens/s per user (1000 / p90 TPOT)",
            yLabel: "output tokens/s per GPU",
            x: pts.map((p) => p.x),
            series: [
              { label: "candidates meeting the SLA", values: pts.map((p) => p.y), points: true },
              { label: "Pareto front", values: pts.map((p) => (p.front ? p.y : null)), spanGaps: true },
            ],
          },
        ];
  const head = ["#", "deployment", "GPUs", "req/s", "req/s per GPU", "TTFT p90 ms", "TPOT p90 ms", "out tok/s per GPU", "$ per M out tok", "limited by"];
  const cells = input.rows
    .filter((r) => r.rank !== null)
    .map((r): Cell[] => [
      String(r.rank),
      r.label,
      r.gpus,
      { value: r.rate_rps, digits: 3 },
      { value: r.rate_rps_per_gpu, digits: 3 },
      { value: r.p90_ttft_ms, digits: 1 },
      { value: r.p90_tpot_ms, digits: 2 },
      { value: r.output_tokens_per_s_per_gpu, digits: 1 },
      { value: r.cost_per_million_output_tokens, digits: 2 },
      r.limited_by.join(", "),
    ]);
  const rest = input.rows.filter((r) => r.rank === null).map((r): Cell[] => [r.label, r.gpus, r.status, r.reason ?? r.limited_by.join(", ")]);
  const sections: Section[] = [
    ...(charts.length === 0
      ? []
      : [
          {
            id: "front",
            title: "Pareto front",
            html: `<p class="note">Each point is one candidate at the highest rate meeting the SLA (or the given rate); the line joins those no other candidate beats on both axes.</p>${chartGrid(charts, 1)}`,
          },
        ]),
    {
      id: "ranked",
      title: "Ranked",
      html: cells.length === 0 ? "<p>No candidate meets the SLA.</p>" : `<div class="scroll">${table(head, cells, "ranked-table")}</div>`,
    },
    ...(rest.length === 0
      ? []
      : [{ id: "others", title: "Not ranked", html: `<div class="scroll">${table(["deployment", "GPUs", "status", "why"], rest, "others-table")}</div>` }]),
    ...(input.notes === undefined || input.notes.length === 0
      ? []
      : [{ id: "notes", title: "Notes", html: input.notes.map((n) => `<p class="note">${escapeHtml(n)}</p>`).join("") }]),
  ];
  return page({
    title: input.title,
    subtitle: input.subtitle,
    ...(input.timing === undefined ? {} : { timing: input.timing }),
    ...(input.warnings === undefined ? {} : { warnings: input.warnings }),
    sections,
    charts,
    assets: input.assets,
  });
}
