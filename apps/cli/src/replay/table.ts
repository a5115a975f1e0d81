import { GIB } from "@kvsim/profile-schema";
import type { ReplayReport } from "@kvsim/replay-engine";
import { textTable } from "../text-table.js";

/** A short description of what ran, for the table's title. */
export interface RunSummary {
  readonly topology: string;
  readonly profile: string;
  readonly router: string;
  readonly workload: string;
  /** What the step times rest on, when the user may not know it (an uncalibrated roofline). */
  readonly timingNote?: string;
}

const num = (v: number, digits = 2): string => v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const int = (v: number): string => v.toLocaleString("en-US", { maximumFractionDigits: 0 });

/** The percentile columns shown: p50, p90, p99 unless `--percentiles` asked for others. */
const percentileKey = (p: number, key: string) => `p${p}_${key}_ms`;

/** The report as a plain-text table (fixed column alignment, no colours). */
export function formatReportTable(report: ReplayReport, run: RunSummary, percentiles: readonly number[] = [50, 90, 99]): string {
  const lines: string[] = [];
  lines.push(`kvsim replay: ${run.topology}; ${run.profile}; router ${run.router}`);
  lines.push(`workload: ${run.workload}`);
  if (run.timingNote !== undefined) lines.push(`timing: ${run.timingNote}`);
  lines.push("");
  const inFlight = report.in_flight_requests > 0 ? `, ${int(report.in_flight_requests)} in flight at the cutoff` : "";
  lines.push(
    `requests: ${int(report.num_requests)} arrived, ${int(report.completed_requests)} completed, ${int(report.rejected_requests)} rejected, ${int(report.failed_requests)} failed${inFlight}`,
  );
  const c = report.cutoff;
  if (c !== undefined && (c.in_flight_requests > 0 || c.not_arrived_requests > 0)) {
    lines.push(
      `cut off at ${num(c.at_ms, 0)} ms (max_virtual_time_ms): ${int(c.not_arrived_requests)} request${c.not_arrived_requests === 1 ? "" : "s"} not arrived, ${int(c.in_flight_requests)} in flight; throughputs are over the ${num(c.at_ms, 0)} ms that ran`,
    );
  }
  for (const [label, groups] of [
    ["rejected", report.rejection_reasons],
    ["failed", report.failure_reasons],
  ] as const) {
    for (const g of groups ?? []) lines.push(`${label}: ${int(g.count)} x ${g.count === 1 ? g.example : `${g.reason} (e.g. ${g.example})`}`);
  }
  if (report.completed_requests === 0 && report.num_requests > 0) {
    lines.push("no request completed: the latencies below have no sample (- here, null in the JSON report)");
  }
  const sat = report.saturation;
  if (sat?.saturated === true) {
    const rate = (v: number | null) => (v === null ? "?" : num(v));
    // "Served" is the completion rate while requests arrive; the table's request throughput is over the whole run.
    lines.push(
      `warning: saturated: requests arrive at ${rate(sat.offered_rps)} req/s but complete at ${rate(sat.served_rps)} req/s while they arrive (request throughput over the whole run: ${num(report.request_throughput_rps)} req/s), and the mean TTFT grew from ${rate(sat.ttft_first_quarter_ms)} ms (first quarter of arrivals) to ${rate(sat.ttft_last_quarter_ms)} ms (last quarter): the queue does not drain`,
    );
  }
  for (const role of ["aggregated", "prefill", "decode"] as const) {
    const warning = report.routing?.[role]?.imbalance;
    if (warning !== undefined) lines.push(`warning: imbalance: ${warning}`);
  }
  lines.push("");
  const all = report as unknown as Record<string, number | null | undefined>;
  // A latency without a sample (no request completed) is "-", never a 0 that reads as instant.
  const cell = (v: number | null | undefined) => (typeof v === "number" ? num(v) : "-");
  const metric = (label: string, key: "ttft" | "tpot" | "itl" | "e2e") => [
    label,
    cell(all[`mean_${key}_ms`]),
    ...percentiles.map((p) => cell(all[percentileKey(p, key)])),
  ];
  lines.push(
    textTable([
      ["latency (ms)", "mean", ...percentiles.map((p) => `p${p}`)],
      metric("TTFT", "ttft"),
      metric("TPOT", "tpot"),
      metric("ITL", "itl"),
      metric("E2E", "e2e"),
    ]),
  );
  lines.push("");
  const rows: [string, string][] = [
    [
      "TTFT and E2E clock",
      report.ttft_clock === "client"
        ? "client (from the request's arrival, spec.frontend's overhead included)"
        : "engine (from the engine's arrival; spec.frontend puts them on the client's clock)",
    ],
    ["duration (virtual)", `${num(report.duration_ms)} ms`],
    ["request throughput", `${num(report.request_throughput_rps)} req/s`],
    ["output throughput", `${num(report.output_throughput_tok_s)} tok/s`],
    ["input / output tokens", `${int(report.total_input_tokens)} / ${int(report.total_output_tokens)}`],
    ["prefix cache reuse", `${num(report.prefix_cache_reused_ratio * 100)} %`],
    ["preemptions", int(report.preemptions)],
  ];
  if (report.handoffs.count > 0) {
    rows.push([
      "handoffs",
      `${int(report.handoffs.count)}, ${int(report.handoffs.payload_bytes)} bytes, mean delay ${num(report.handoffs.mean_delay_ms, 3)} ms`,
    ]);
  }
  const h = report.handoffs;
  if (report.network !== undefined && h.p50_delay_ms !== undefined) {
    rows.push([
      "handoff delay",
      `p50 ${num(h.p50_delay_ms, 3)}, p90 ${num(h.p90_delay_ms ?? 0, 3)}, p99 ${num(h.p99_delay_ms ?? 0, 3)} ms (mean queue ${num(h.mean_queue_ms ?? 0, 3)}, setup ${num(h.mean_setup_ms ?? 0, 3)}, transfer ${num(h.mean_transfer_ms ?? 0, 3)} ms)`,
    ]);
    const load = report.network.workers.map((w) => `${w.role[0]!.toUpperCase()}${w.worker} ${num(w.nic_utilization * 100, 1)} %`);
    rows.push(["NIC utilization", load.join(", ")]);
  }
  for (const role of ["aggregated", "prefill", "decode"] as const) {
    const pool = report.routing?.[role];
    if (pool === undefined || pool.workers.length < 2) continue;
    const spread = pool.workers.map(
      (w, i) =>
        `${role === "aggregated" ? "W" : role === "prefill" ? "P" : "D"}${i} ${int(w.requests)}${role === "decode" ? "" : ` (${int(w.prefill_tokens)} tok)`}`,
    );
    rows.push([
      role === "aggregated" ? "routing" : `routing (${role})`,
      `requests${role === "decode" ? "" : " (prefill tokens)"} per worker: ${spread.join(", ")}`,
    ]);
  }
  for (const role of ["aggregated", "prefill", "decode"] as const) {
    const c = report.kv_capacity?.[role];
    if (c === undefined) continue;
    const g = (b: number) => (b / GIB).toFixed(2);
    rows.push([
      role === "aggregated" ? "KV pool" : `KV pool (${role})`,
      `${int(c.num_gpu_blocks)} pages (${int(c.kv_cache_tokens)} tokens) = (${g(c.gpu_memory_bytes)} GiB x ${c.gpu_memory_utilization} - ${g(c.weights_bytes)} weights - ${g(c.activation_bytes + c.non_torch_bytes)} activations - ${g(c.cuda_graph_bytes)} CUDA graphs) / ${int(c.page_bytes)} B`,
    ]);
  }
  for (const role of ["aggregated", "prefill", "decode"] as const) {
    const pool = report.data_parallel?.[role];
    if (pool === undefined) continue;
    const placed = pool.workers.map((w) => w.placed.map(int).join(" / ")).join(", ");
    let lockstep = "";
    if (pool.expert_parallel) {
      const sum = (k: "steps" | "idle_steps" | "waves") => pool.workers.reduce((n, w) => n + (w[k] ?? 0), 0);
      const waves = sum("waves");
      lockstep = `; ${int(sum("steps"))} lockstep steps (${int(sum("idle_steps"))} idle), ${int(waves)} wave${waves === 1 ? "" : "s"}`;
    }
    rows.push([
      role === "aggregated" ? "data parallel" : `data parallel (${role})`,
      `${pool.data_parallel_size} ranks per worker, ${pool.expert_parallel ? "expert parallel" : "independent"}; requests per rank ${placed}${lockstep}`,
    ]);
  }
  const sd = report.speculative_decoding;
  if (sd !== undefined) {
    rows.push([
      "speculative decoding",
      `${sd.method}, ${sd.num_speculative_tokens} draft tokens: mean acceptance length ${num(sd.mean_acceptance_length, 3)}, per position ${sd.acceptance_per_position.map((a) => num(a, 3)).join(" / ")}; ${int(sd.num_accepted_tokens)} of ${int(sd.num_draft_tokens)} draft tokens accepted`,
    ]);
  }
  const off = report.kv_offload;
  if (off !== undefined) {
    const gib = (b: number) => `${(b / GIB).toFixed(2)} GiB`;
    for (const t of off.tiers) {
      const notes: string[] = [];
      if (t.blocks_dropped > 0)
        notes.push(`${int(t.blocks_dropped)} blocks dropped: every block it held was being read or still being stored (write bandwidth too low?)`);
      if (t.loads === 0) notes.push("never read");
      rows.push([
        `offload ${t.name}${t.role === undefined ? "" : ` (${t.role})`}`,
        `${int(t.loads)} loads, ${int(t.tokens_served)} tokens served, ${gib(t.bytes_loaded)} loaded, ${gib(t.bytes_stored)} stored (${t.store}), ${int(t.blocks_evicted)} blocks evicted; peak ${gib(t.peak_bytes)} of ${gib(t.capacity_bytes)} x ${int(t.instances)} ${t.shared === "node" ? "node" : "rank"}${t.instances === 1 ? "" : "s"}${notes.length === 0 ? "" : `; ${notes.join("; ")}`}`,
      ]);
    }
    rows.push([
      "offload loads",
      off.loads === 0
        ? "none: no prompt continued past its GPU hit into a tier"
        : `${int(off.loads)} loads, ${int(off.tokens_served)} tokens (${num((off.tokens_served / Math.max(1, report.total_input_tokens)) * 100, 1)} % of completed input), delay mean ${num(off.mean_load_ms ?? 0, 3)} ms, p90 ${num(off.p90_load_ms ?? 0, 3)} ms`,
    ]);
  }
  if (report.goodput_rps !== undefined && report.goodput_requests !== undefined) {
    rows.push(["goodput (SLA)", `${num(report.goodput_rps)} req/s (${int(report.goodput_requests)} requests met it)`]);
  }
  if (report.wall_time_ms !== undefined) {
    rows.push(["wall time", `${num(report.wall_time_ms, 0)} ms (${num(report.simulated_requests_per_wall_s ?? 0, 0)} simulated req/s)`]);
  }
  rows.push(["digest", report.digest]);
  const keyWidth = Math.max(...rows.map(([k]) => k.length)) + 2;
  for (const [k, v] of rows) lines.push(`${k.padEnd(keyWidth)}${v}`);
  return lines.join("\n") + "\n";
}
