import type { RegisterCommand } from "./index.js";
import { collectSet } from "../spec-input.js";
import { planCommand, PLAN_DEFAULTS, type PlanOptions } from "../plan/run.js";

export const registerPlan: RegisterCommand = (program, ctx) => {
  program
    .command("plan")
    .description(
      "Find the cheapest deployment of a model on a GPU that meets an SLA on a workload: every TP that fits, data-parallel replicas, aggregated and every P/D split within a GPU budget, and a ladder of engine settings, each replayed (pruning what cannot win). Ranks them by req/s per GPU (--find max-rate, the default) or by fewest GPUs at --rate.",
    )
    .option("--model <file>", "the model: its Hugging Face config.json (profiles derived per TP) or a kvsim profile (its TP only)")
    .option("--gpu <name>", "the GPU (kvsim gpus lists them); with --spec, default: the spec's engine.gpu")
    .option("--gpus <N>", "the GPU budget: no deployment uses more")
    .option("--trace <file>", "the workload: a trace file (priced by the roofline, round robin routing)")
    .option("--trace-format <format>", "mooncake, azure or kvsim (default: azure for .csv, mooncake when the name says so, else kvsim)")
    .option(
      "--spec <file>",
      "the workload and settings as a spec (its workload, router, kv_transfer, timing and engine settings are kept; topology and profile are the plan's)",
    )
    .option("--set <path=value>", "with --spec: override a spec field (repeatable)", collectSet)
    .option("--sla <terms>", "SLA over report metrics, e.g. p90_ttft_ms<=2000,p90_tpot_ms<=50")
    .option("--rate <req/s>", "plan for this arrival rate: the fewest GPUs meeting the SLA at it")
    .option("--find <search>", "max-rate (the default): the most req/s per GPU meeting the SLA")
    .option("--tp <list>", `tensor-parallel sizes tried (default ${PLAN_DEFAULTS.tp})`)
    .option("--topology <list>", `aggregated and/or disaggregated (default ${PLAN_DEFAULTS.topology})`)
    .option("--max-num-seqs <list>", `max_num_seqs ladder (default ${PLAN_DEFAULTS.maxNumSeqs})`)
    .option("--max-num-batched-tokens <list>", `max_num_batched_tokens ladder (default ${PLAN_DEFAULTS.maxNumBatchedTokens})`)
    .option("--router <list>", "router policies tried, e.g. round_robin,kv_aware (default: the spec's router, round_robin with --trace)")
    .option("--kv-cache-dtype <dtype>", "vLLM's --kv-cache-dtype for profiles derived from a config.json (default auto)")
    .option("--price-per-gpu-hour <$>", "price of one GPU-hour: adds the cost per million output tokens")
    .option("--tolerance <fraction>", "max-rate: the rate ladder's step (default 0.01: answers within 1%)")
    .option("--top <n>", "candidates listed and written by --write-specs (default 3)")
    .option("--jobs <n>", "replays run at once, in worker threads (default: every core)")
    .option("--queue <url>", "run the replays on a BullMQ queue in Redis (kvsim worker runs them), e.g. redis://127.0.0.1:6379/0")
    .option("--sweep-id <id>", "with --queue: the id of this plan's replays (restarting it reuses the finished ones)")
    .option("--queue-name <name>", "with --queue: the queue's name (default kvsim-sweep)")
    .option("--queue-prefix <prefix>", "with --queue: the Redis key prefix (default kvsim)")
    .option("--out <file>", "write one JSON line per candidate, best first")
    .option("--html <file>", "write a self-contained HTML page: the Pareto front and the ranked candidates")
    .option("--write-specs <dir>", "write <rank>.yaml for the top candidates: specs kvsim replay runs as they are, at the plan's rate")
    .option("--format <format>", "table or json", "table")
    .option("--force", "overwrite existing output files", false)
    .option("-q, --quiet", "no progress bar (it is drawn on stderr only when stderr is a terminal)", false)
    .action(ctx.run((opts: PlanOptions) => planCommand(ctx.io, opts)));
};
