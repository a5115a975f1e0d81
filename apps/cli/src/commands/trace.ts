import { measuredToTrace, parsePromptTokens } from "@kvsim/calibrate";
import { checkOutputs, readText, UsageError, writeOutputs, type CliIo } from "../io.js";
import { readMeasured } from "./compare.js";
import type { RegisterCommand } from "./index.js";

export interface TraceFromMeasuredOptions {
  readonly measured?: string;
  readonly prompts?: string;
  readonly out?: string;
  readonly force: boolean;
}

/** `kvsim trace from-measured`: the kvsim trace of a measured run's requests. */
export function traceFromMeasuredCommand(io: CliIo, opts: TraceFromMeasuredOptions): number {
  if (opts.measured === undefined) throw new UsageError("--measured <file> is required: the measured run whose requests the trace replays");
  if (opts.out === undefined) throw new UsageError("--out <file> is required: where to write the trace (kvsim JSONL)");
  checkOutputs([{ flag: "--out", path: opts.out }], opts.force);
  const run = readMeasured(opts.measured);
  const prompts = opts.prompts === undefined ? undefined : parsePromptTokens(readText(opts.prompts), opts.prompts);
  const text = measuredToTrace(run, prompts, opts.prompts);
  writeOutputs([{ flag: "--out", path: opts.out, text }], opts.force);
  const withIds = prompts === undefined ? 0 : run.requests.filter((r) => prompts.has(r.requestId)).length;
  io.out(`wrote ${opts.out}: ${run.requests.length} requests from ${opts.measured} (${run.format}), ${withIds} with their prompt token ids\n`);
  return 0;
}

export const registerTrace: RegisterCommand = (program, ctx) => {
  const trace = program.command("trace").description("Make traces kvsim replays.");
  trace
    .command("from-measured")
    .description(
      "Write a kvsim trace (JSONL) of a measured run's requests: the same ids, arrival times (from the first) and lengths, and the prompts' token ids when --prompts gives them (prefix caching is then replayed exactly). Point a spec's workload at it (format: kvsim) to replay, compare or calibrate against the run.",
    )
    .option("--measured <file>", "the measured run: vLLM per-request stats (requests.jsonl), vllm bench JSON with start_times, or kvsim records")
    .option(
      "--prompts <file>",
      "JSONL of the prompts as sent, one a line (line N is request bench-N unless it has a request_id), with input_tok_ids or input_token_ids",
    )
    .option("--out <file>", "the trace to write")
    .option("--force", "overwrite an existing --out file", false)
    .action(ctx.run((opts: TraceFromMeasuredOptions) => traceFromMeasuredCommand(ctx.io, opts)));
};
