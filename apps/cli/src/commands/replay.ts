import type { RegisterCommand } from "./index.js";
import { replayCommand, type ReplayOptions } from "../replay/run.js";
import { collectSet } from "../spec-input.js";

export const registerReplay: RegisterCommand = (program, ctx) => {
  program
    .command("replay")
    .description(
      "Replay a workload through modelled vLLM ranks and report TTFT, TPOT, ITL, E2E, throughput, prefix reuse, preemptions and handoffs. Without --spec: the bundled example (a 48-request Mooncake trace on GLM-5.3-Flash in P/D).",
    )
    .option("--spec <file>", "replay spec, YAML or JSON, or - for standard input (default: the bundled P/D example)")
    .option("--set <path=value>", "override a spec field, e.g. engine.max_num_seqs=128 (repeatable; the value is YAML, null removes the key)", collectSet)
    .option("--format <format>", "table or json (json prints one JSON object and nothing else)", "table")
    .option("--percentiles <list>", "the percentiles to report and show, e.g. 50,90,95,99 (default 50,90,99; vLLM's p<N>_ttft_ms names)")
    .option("--report <file>", "also write the report as JSON")
    .option("--requests <file>", "write per-request records as JSON lines")
    .option("--timeseries <file>", "write time series sampled on the virtual clock: .csv (one row per sample) or .jsonl (one object per sample)")
    .option("--html <file>", "write a self-contained HTML report: summary, latency CDFs, time series, per-worker table, handoffs, failures (opens offline)")
    .option(
      "--sample-ms <ms>",
      "time series interval in virtual ms, for --timeseries and --html (default: 10 ms, doubled as needed to keep 2,049 to 4,097 samples)",
    )
    .option("--force", "overwrite existing output files", false)
    .option("-q, --quiet", "no progress bar (it is drawn on stderr only when stderr is a terminal)", false)
    .action(ctx.run((opts: ReplayOptions) => replayCommand(ctx.io, opts)));
};
