import { existsSync, mkdirSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { profileFromHfConfig, KV_CACHE_DTYPES, type KvCacheDtype } from "@kvsim/hf-profile";
import {
  InputError,
  KNOWN_GPU_NAMES,
  parseDocumentText,
  parseProfile,
  readTrace,
  resolveGpu,
  RouterPolicySchema,
  SpecSchema,
  TraceFormatSchema,
  validateValue,
  type Profile,
  type RouterPolicy,
  type Spec,
  type TraceFormat,
} from "@kvsim/profile-schema";
import {
  goodputSla,
  paretoFront,
  planWarnings,
  PlanSetupError,
  runnerUp,
  runPlan,
  specAtRate,
  syntheticStats,
  traceStats,
  whyLines,
  type ModelAt,
  type PlanGoal,
  type PlanResult,
  type PlanRow,
  type PlanTopology,
  type WorkloadStats,
} from "@kvsim/plan";
import { formatSla, parseSla, pointTask, slaPercentiles, slaStop, SlaSyntaxError, DEFAULT_RATE_TOLERANCE, type SlaTerm, type TraceRef } from "@kvsim/sweep";
import { stringify as yamlStringify } from "yaml";
import { checkOutputs, numberOption, readText, regularFileSize, UsageError, writeOutputs } from "../io.js";
import { openTrace } from "../lines.js";
import { loadCheckedSpec, printWarnings } from "../spec-check.js";
import type { StdinIo } from "../spec-input.js";
import { textTable } from "../text-table.js";
import { defaultJobs } from "../sweep/executor.js";
import { checkedHash } from "../sweep/host.js";
import { createSweepProgress } from "../sweep/progress.js";
import { openExecutor } from "../sweep/run.js";
import { planHtml } from "./html.js";

export interface PlanOptions {
  readonly model?: string;
  readonly gpu?: string;
  readonly gpus?: string;
  readonly trace?: string;
  readonly traceFormat?: string;
  readonly spec?: string;
  readonly set?: readonly string[];
  readonly sla?: string;
  readonly rate?: string;
  readonly find?: string;
  readonly tp?: string;
  readonly topology?: string;
  readonly maxNumSeqs?: string;
  readonly maxNumBatchedTokens?: string;
  readonly router?: string;
  readonly kvCacheDtype?: string;
  readonly pricePerGpuHour?: string;
  readonly tolerance?: string;
  readonly top?: string;
  readonly jobs?: string;
  readonly queue?: string;
  readonly sweepId?: string;
  readonly queueName?: string;
  readonly queuePrefix?: string;
  readonly out?: string;
  readonly html?: string;
  readonly writeSpecs?: string;
  readonly format: string;
  readonly force: boolean;
  readonly quiet?: boolean;
}

/** Default ladders: every TP of a node, both layouts, vLLM's max_num_seqs, a small and a large token budget. */
export const PLAN_DEFAULTS = { tp: "1,2,4,8", topology: "aggregated,disaggregated", maxNumSeqs: "256", maxNumBatchedTokens: "2048,8192" } as const;

/** The most candidates a plan enumerates (each costs at least one replay). */
const MAX_DEPLOYMENTS = 5000;

/** A comma-separated list of positive integers. */
function intList(flag: string, raw: string, max: number): number[] {
  const items = raw.split(",").map((s) => s.trim());
  if (items.some((s) => s === "")) throw new UsageError(`${flag} lists positive integers separated by commas, e.g. 1,2,4,8; got "${raw}"`);
  return [...new Set(items.map((s) => numberOption(flag, s, { integer: true, min: 1, max })))];
}

function parseOptions(opts: PlanOptions) {
  if (opts.format !== "table" && opts.format !== "json") throw new UsageError(`--format must be table or json, got "${opts.format}"`);
  if (opts.model === undefined)
    throw new UsageError(
      "kvsim plan needs --model <config.json|profile.json>: the model's Hugging Face config.json (every TP) or a kvsim profile (its TP only)",
    );
  if (opts.gpus === undefined) throw new UsageError("kvsim plan needs --gpus <N>: the GPU budget");
  if ((opts.trace === undefined) === (opts.spec === undefined))
    throw new UsageError("kvsim plan needs one workload: --trace <file> [--trace-format <format>] or --spec <spec>");
  if (opts.trace === undefined && opts.traceFormat !== undefined) throw new UsageError("--trace-format applies to --trace");
  if (opts.spec === undefined && opts.set !== undefined) throw new UsageError("--set applies to --spec");
  if (opts.sla === undefined) throw new UsageError("kvsim plan needs --sla, e.g. --sla p90_ttft_ms<=2000,p90_tpot_ms<=50");
  if (opts.rate !== undefined && opts.find !== undefined)
    throw new UsageError("give --rate <req/s> (the fewest GPUs serving it) or --find max-rate (the most req/s per GPU), not both");
  if (opts.find !== undefined && opts.find !== "max-rate") throw new UsageError(`--find must be max-rate, got "${opts.find}"`);
  if (opts.rate !== undefined && opts.tolerance !== undefined) throw new UsageError("--tolerance applies to --find max-rate");
  if (opts.queue === undefined && (opts.sweepId !== undefined || opts.queueName !== undefined || opts.queuePrefix !== undefined)) {
    throw new UsageError("--sweep-id, --queue-name and --queue-prefix apply to --queue");
  }
  if (opts.queue !== undefined && opts.jobs !== undefined)
    throw new UsageError("--jobs runs replays in this process's threads; with --queue the workers run them");
  let sla: SlaTerm[];
  try {
    sla = parseSla(opts.sla);
  } catch (e) {
    if (e instanceof SlaSyntaxError) throw new UsageError(`--sla: ${e.message}`);
    throw e;
  }
  const budget = numberOption("--gpus", opts.gpus, { integer: true, min: 1, max: 1024 });
  const tolerance = opts.tolerance === undefined ? DEFAULT_RATE_TOLERANCE : numberOption("--tolerance", opts.tolerance, { exclusiveMin: 0, max: 0.5 });
  const goal: PlanGoal =
    opts.rate === undefined ? { kind: "max-rate", tolerance } : { kind: "rate", rps: numberOption("--rate", opts.rate, { exclusiveMin: 0, max: 1e6 }) };
  const topologies = (opts.topology ?? PLAN_DEFAULTS.topology).split(",").map((s) => s.trim());
  for (const t of topologies)
    if (t !== "aggregated" && t !== "disaggregated") throw new UsageError(`--topology lists aggregated and/or disaggregated, got "${t}"`);
  const kvCacheDtype = opts.kvCacheDtype ?? "auto";
  if (!(KV_CACHE_DTYPES as readonly string[]).includes(kvCacheDtype))
    throw new UsageError(`--kv-cache-dtype must be one of ${KV_CACHE_DTYPES.join(", ")}, got "${kvCacheDtype}"`);
  let traceFormat: TraceFormat | undefined;
  if (opts.trace !== undefined) {
    const f = TraceFormatSchema.safeParse(opts.traceFormat ?? guessFormat(opts.trace));
    if (!f.success) throw new UsageError(`--trace-format must be mooncake, azure or kvsim, got "${opts.traceFormat}"`);
    traceFormat = f.data;
  }
  const routers: RouterPolicy[] = [];
  for (const r of (opts.router ?? "").split(",").map((x) => x.trim())) {
    if (opts.router === undefined) break;
    const p = RouterPolicySchema.safeParse(r);
    if (!p.success) throw new UsageError(`--router lists router policies (${RouterPolicySchema.options.join(", ")}), got "${r}"`);
    if (!routers.includes(p.data)) routers.push(p.data);
  }
  const price = opts.pricePerGpuHour === undefined ? undefined : numberOption("--price-per-gpu-hour", opts.pricePerGpuHour, { exclusiveMin: 0, max: 1e6 });
  return {
    sla,
    goal,
    budget,
    tps: intList("--tp", opts.tp ?? PLAN_DEFAULTS.tp, 1024),
    topologies: [...new Set(topologies)] as PlanTopology[],
    maxNumSeqs: intList("--max-num-seqs", opts.maxNumSeqs ?? PLAN_DEFAULTS.maxNumSeqs, 1 << 20),
    maxNumBatchedTokens: intList("--max-num-batched-tokens", opts.maxNumBatchedTokens ?? PLAN_DEFAULTS.maxNumBatchedTokens, 1 << 24),
    kvCacheDtype: kvCacheDtype as KvCacheDtype,
    routers,
    traceFormat,
    price,
    top: opts.top === undefined ? 3 : numberOption("--top", opts.top, { integer: true, min: 1, max: 1000 }),
    jobs: opts.jobs === undefined ? defaultJobs() : numberOption("--jobs", opts.jobs, { integer: true, min: 1 }),
  };
}

/** A trace's format from its name: `.csv` is Azure's, `.jsonl` with Mooncake's fields is Mooncake's; else kvsim's. */
function guessFormat(path: string): TraceFormat {
  if (path.endsWith(".csv")) return "azure";
  return /mooncake/i.test(basename(path)) ? "mooncake" : "kvsim";
}

/**
 * The model at each TP: a Hugging Face config.json derives a profile per TP (a TP whose heads do
 * not split is refused with the reason); a kvsim profile serves its own TP only.
 */
function loadModel(file: string, kvCacheDtype: KvCacheDtype): { at: ModelAt; name: string; engineBlockSize?: number } {
  const doc = parseDocumentText(readText(file), file, "json");
  const value = doc.value as Record<string, unknown> | null;
  if (value !== null && typeof value === "object" && Object.hasOwn(value, "architectures")) {
    const at: ModelAt = (tp) => {
      try {
        return { profile: profileFromHfConfig(value, { tensorParallelSize: tp, kvCacheDtype, file }).profile };
      } catch (e) {
        if (e instanceof InputError) return { refused: e.issues.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`)).join("; ") };
        throw e;
      }
    };
    // Derive once up front: a config kvsim cannot read at all is refused before anything runs.
    const first = profileFromHfConfig(value, { tensorParallelSize: 1, kvCacheDtype, file });
    return { at, name: first.profile.model, ...(first.engineBlockSize === undefined ? {} : { engineBlockSize: first.engineBlockSize }) };
  }
  const profile = parseProfile(readText(file), file);
  const tp = profile.tensor_parallel_size;
  return {
    at: (t) => (t === tp ? { profile } : { refused: `the profile ${basename(file)} describes TP ${tp} only (give the model's config.json to plan other TPs)` }),
    name: profile.model,
  };
}

/** The base spec of a plan over a trace: the roofline on the named GPU, round robin, defaults elsewhere. */
function traceBase(trace: string, format: TraceFormat, gpu: string, profile: Profile, blockSize: number | undefined): Spec {
  return validateValue(
    SpecSchema,
    {
      version: 1,
      profile,
      topology: { kind: "aggregated", workers: 1 },
      engine: { gpu, ...(blockSize === undefined ? {} : { block_size: blockSize }) },
      timing: { type: "roofline" },
      workload: { trace: resolve(trace), format },
    },
    "plan",
  );
}

/** The table of a plan: the ranked candidates (top first), then one line per kind of candidate not ranked. */
function formatPlan(result: PlanResult, goal: PlanGoal, top: number, price: number | undefined): string {
  const ranked = result.rows.filter((r) => r.rank !== null);
  const f = (v: number | null, digits = 3) => (v === null ? "-" : Number(v.toPrecision(digits)).toLocaleString("en-US"));
  const header = ["#", "deployment", "GPUs", goal.kind === "max-rate" ? "max req/s" : "req/s", "req/s/GPU", "TTFT p90 ms", "TPOT p90 ms", "out tok/s/GPU"];
  if (price !== undefined) header.push("$/M out tok");
  const lines = [header];
  for (const r of ranked.slice(0, top)) {
    const row = [
      String(r.rank),
      r.label,
      String(r.gpus),
      f(r.rate_rps, 4),
      f(r.rate_rps_per_gpu),
      f(r.p90_ttft_ms),
      f(r.p90_tpot_ms),
      f(r.output_tokens_per_s_per_gpu),
    ];
    if (price !== undefined) row.push(r.cost_per_million_output_tokens === null ? "-" : r.cost_per_million_output_tokens.toFixed(2));
    lines.push(row);
  }
  const out = [ranked.length === 0 ? "no candidate meets the SLA" : textTable(lines, 2)];
  if (ranked.length > top) out.push(`(${ranked.length - top} more candidates meet the SLA: --top ${ranked.length} or --out lists them)`);
  return out.join("\n");
}

/** The candidates not ranked, by status: how many, and an example of the most common reason. */
const countBy = (rows: readonly PlanRow[]) => {
  const m = new Map<string, { n: number; reasons: Map<string, number> }>();
  for (const r of rows) {
    if (r.rank !== null) continue;
    const e = m.get(r.status) ?? { n: 0, reasons: new Map<string, number>() };
    e.n++;
    // Reasons differ in their numbers only across TPs: count them by their words.
    if (r.reason !== null) {
      const key = r.reason.replace(/[\d.,]+/g, "#");
      e.reasons.set(key, (e.reasons.get(key) ?? 0) + 1);
    }
    m.set(r.status, e);
  }
  return [...m].map(([status, e]) => {
    const first = [...e.reasons].sort((a, b) => b[1] - a[1])[0];
    const row =
      first === undefined || !EXPLAINED.has(status) ? undefined : rows.find((r) => r.status === status && r.reason?.replace(/[\d.,]+/g, "#") === first[0]);
    // A candidate that failed at every rate: which one, and what broke at the lowest rate tried.
    // Otherwise the first problem: a P/D pair's two roles usually say the same thing.
    const shown =
      row === undefined ? undefined : status === "fails" ? `${row.label}: ${row.reason ?? ""}: ${row.limited_by.join(", ")}` : row.reason?.split("; ")[0];
    return `${e.n} ${STATUS_WORDS[status] ?? status}${shown === undefined ? "" : `; e.g. ${shown}`}`;
  });
};

/** The statuses whose line shows an example reason. */
const EXPLAINED = new Set(["does-not-fit", "refused", "infeasible", "fails"]);

const STATUS_WORDS: Readonly<Record<string, string>> = {
  pruned: "pruned (one replay showed they cannot come within 5% of the best)",
  skipped: "skipped (more GPUs than a deployment that meets the rate)",
  fails: "do not meet the SLA",
  searched: "searched",
  "does-not-fit": "do not fit the GPU (weights, or a KV cache too small for the longest request)",
  refused: "refused by kvsim's rules for a spec",
  infeasible: "cannot meet the SLA at any load (a lone decode step is over the TPOT limit)",
};

/** `<dir>/1.yaml` ... `<dir>/<top>.yaml` when `dir` exists (a path that is no folder is refused), to check before the run. */
function specPaths(dir: string | undefined, top: number): string[] {
  if (dir === undefined || !existsSync(dir)) return [];
  if (!statSync(dir).isDirectory()) throw new UsageError(`--write-specs ${dir} is not a folder`);
  return Array.from({ length: top }, (_, i) => join(dir, `${i + 1}.yaml`));
}

/** Writes `<rank>.yaml` per top candidate (its profiles beside it, under profiles/), each a spec kvsim replay runs as is at its rate. */
function specFiles(dir: string, result: PlanResult, stats: WorkloadStats, top: number): { path: string; text: string; flag: string }[] {
  const files: { path: string; text: string; flag: string }[] = [];
  const profiles = new Map<string, string>();
  const profileFile = (p: Profile) => {
    const name = `${p.model.replace(/[^A-Za-z0-9._-]+/g, "-")}-tp${p.tensor_parallel_size}.json`;
    if (!profiles.has(name)) {
      profiles.set(name, `${JSON.stringify(p, null, 2)}\n`);
      files.push({ path: join(dir, "profiles", name), text: profiles.get(name)!, flag: "--write-specs" });
    }
    return `./profiles/${name}`;
  };
  for (const r of result.rows.filter((x) => x.rank !== null).slice(0, top)) {
    const spec = specAtRate(result.specs.get(r.label)!, stats, r.rate_rps!);
    const ref = (p: Spec["profile"] | undefined) => (p === undefined ? undefined : typeof p === "string" ? p : profileFile(p));
    const out: Record<string, unknown> = { ...spec, profile: ref(spec.profile) };
    if (spec.prefill?.profile !== undefined) out.prefill = { ...spec.prefill, profile: ref(spec.prefill.profile) };
    if (spec.decode?.profile !== undefined) out.decode = { ...spec.decode, profile: ref(spec.decode.profile) };
    // The transfer's bandwidth as a spec writes it (bandwidth_gbps is the deprecated spelling the schema folds it into).
    const kv = { ...spec.kv_transfer } as Record<string, unknown>;
    if (typeof kv.bandwidth_gbps === "number") {
      kv.bandwidth = `${kv.bandwidth_gbps} GB/s`;
      delete kv.bandwidth_gbps;
    }
    out.kv_transfer = kv;
    const head = `# kvsim plan #${r.rank}: ${r.label}, ${r.gpus} GPUs, at ${r.rate_rps} req/s (${r.meets_sla ? "meets" : "misses"} the plan's SLA there)\n`;
    files.push({ path: join(dir, `${r.rank}.yaml`), text: head + yamlStringify(JSON.parse(JSON.stringify(out))), flag: "--write-specs" });
  }
  return files;
}

/**
 * `kvsim plan`: the cheapest deployment of a model on a GPU that meets an SLA on a workload,
 * searched over TP, data parallelism, aggregated and P/D splits and engine settings by replaying
 * the workload (see @kvsim/plan). Output files are checked before anything runs and written whole after it.
 */
export async function planCommand(io: StdinIo, opts: PlanOptions): Promise<number> {
  const o = parseOptions(opts);
  checkOutputs(
    [
      { flag: "--out", path: opts.out },
      { flag: "--html", path: opts.html },
      // The specs --write-specs would write, where the folder already exists (else it is made after the run).
      ...specPaths(opts.writeSpecs, o.top).map((path) => ({ flag: "--write-specs", path })),
    ],
    opts.force,
  );
  const started = performance.now();
  const model = loadModel(opts.model!, o.kvCacheDtype);
  const firstProfile = o.tps.map((tp) => model.at(tp)).find((m): m is { profile: Profile } => "profile" in m)?.profile;
  if (firstProfile === undefined)
    throw new UsageError(
      `the model runs at none of --tp ${o.tps.join(",")}: ${o.tps.map((tp) => `TP${tp}: ${(model.at(tp) as { refused: string }).refused}`).join("; ")}`,
    );

  let base: Spec;
  const notes: string[] = [];
  let calibratedTp: number | undefined;
  if (opts.trace !== undefined) {
    if (opts.gpu === undefined) throw new UsageError(`kvsim plan needs --gpu <name>: one of ${KNOWN_GPU_NAMES.join(", ")} (kvsim gpus lists them)`);
    if (resolveGpu({ gpu: opts.gpu }) === undefined)
      throw new UsageError(`--gpu must be one of ${KNOWN_GPU_NAMES.join(", ")} (kvsim gpus lists them), got "${opts.gpu}"`);
    regularFileSize(opts.trace, "the trace");
    base = traceBase(opts.trace, o.traceFormat!, opts.gpu, firstProfile, model.engineBlockSize);
  } else {
    const checked = await loadCheckedSpec(io, opts.spec!, opts.set);
    printWarnings(io, checked.warnings);
    base = checked.spec;
    const gpu = opts.gpu ?? (typeof base.engine.gpu === "string" ? base.engine.gpu : undefined);
    if (gpu === undefined && base.engine.gpu === undefined) throw new UsageError("kvsim plan needs --gpu <name> (the spec's engine names no GPU)");
    base = { ...base, engine: { ...base.engine, ...(opts.gpu === undefined ? {} : { gpu: opts.gpu }) } };
    if (base.timing.type !== "roofline") {
      // A measured timing holds for the TP it was measured at: the plan keeps to it.
      calibratedTp = typeof base.profile === "string" ? checked.profiles.get(base.profile)?.tensor_parallel_size : base.profile.tensor_parallel_size;
      notes.push(
        `timing: the spec's ${base.timing.type} timing, measured at TP ${calibratedTp ?? "?"} on its GPU: only that TP is planned (timing: { type: roofline } plans every TP)`,
      );
    }
  }
  const gpuName = resolveGpu(base.engine)?.name;
  if (gpuName === undefined) throw new UsageError(`--gpu must be one of ${KNOWN_GPU_NAMES.join(", ")} (kvsim gpus lists them), got "${opts.gpu}"`);
  if (base.sla === undefined) {
    const g = goodputSla(o.sla);
    if (g !== undefined) base = { ...base, sla: g };
  }
  if (o.topologies.includes("disaggregated") && base.kv_transfer.bandwidth_gbps === undefined && base.kv_transfer.network === undefined) {
    base = { ...base, kv_transfer: { ...base.kv_transfer, bandwidth_gbps: 50 } };
    notes.push("kv_transfer: P/D handoffs priced at 50 GB/s per transfer (one 400 Gbit/s NIC per rank; --spec with kv_transfer sets another)");
  }
  if (base.timing.type === "roofline")
    notes.push("timing: the roofline from the model's shape and the GPU's datasheet with the shipped efficiencies (no measurement of this model or GPU)");

  const modelAt: ModelAt = (tp) =>
    calibratedTp === undefined || tp === calibratedTp ? model.at(tp) : { refused: `the spec's ${base.timing.type} timing was measured at TP ${calibratedTp}` };

  // The workload's shape, read once: the plan replays the trace by reference.
  let stats: WorkloadStats;
  let trace: TraceRef | null = null;
  const tracePath = base.workload.trace;
  if (tracePath !== undefined) {
    const format = base.workload.format ?? "kvsim";
    const file = openTrace(tracePath, format);
    try {
      stats = await traceStats(readTrace(file.lines, { format, file: tracePath, traceBlockSize: base.workload.trace_block_size }));
    } finally {
      file.close();
    }
    trace = { path: tracePath, sha256: await checkedHash(tracePath) };
  } else stats = syntheticStats(base.workload.synthetic!);
  // A workload without a rate to scale is refused before anything runs.
  try {
    specAtRate(base, stats, 1);
  } catch (e) {
    if (e instanceof PlanSetupError) throw new UsageError(e.message);
    throw e;
  }

  const percentiles = slaPercentiles(o.sla);
  const stop = slaStop(o.sla, stats.requests);
  const { executor, describe } = await openExecutor(io, { ...opts, find: "max-rate" }, o.jobs);
  const progress = createSweepProgress(io, 0, `plan (${o.goal.kind === "rate" ? `${o.goal.rps} req/s` : "max-rate"})`, opts.quiet === true);
  let total = 0;
  let result: PlanResult;
  try {
    result = await runPlan({
      base,
      model: modelAt,
      space: {
        gpus: o.budget,
        tp: o.tps,
        topologies: o.topologies,
        maxNumSeqs: o.maxNumSeqs,
        routers: o.routers,
        maxNumBatchedTokens: o.maxNumBatchedTokens,
        sizes: o.goal.kind === "rate" ? "all" : "budget",
      },
      stats,
      sla: o.sla,
      goal: o.goal,
      executor,
      // Failing probes stop once their SLA is lost: half of a rate search's replays end early.
      task: (point, spec) => Promise.resolve(pointTask(point, {}, spec, new Map(), trace, percentiles, stop)),
      ...(o.price === undefined ? {} : { pricePerGpuHour: o.price }),
      maxDeployments: MAX_DEPLOYMENTS,
      onReplay: (row) => {
        progress.setTotal(++total);
        progress.done(row.status !== "ok");
      },
    });
  } catch (e) {
    if (e instanceof PlanSetupError) throw new UsageError(e.message);
    throw e;
  } finally {
    progress.stop();
    await executor.close();
  }
  const wallMs = performance.now() - started;

  const outputs: { path: string; text: string; flag: string }[] = [];
  if (opts.out !== undefined) outputs.push({ path: opts.out, text: result.rows.map((r) => `${JSON.stringify(r)}\n`).join(""), flag: "--out" });
  if (opts.html !== undefined)
    outputs.push({
      path: opts.html,
      text: planHtml(result, { title: `kvsim plan: ${model.name} on ${o.budget} x ${gpuName}`, sla: o.sla, goal: o.goal, notes, wallMs }),
      flag: "--html",
    });
  if (opts.writeSpecs !== undefined) {
    mkdirSync(join(opts.writeSpecs, "profiles"), { recursive: true });
    outputs.push(...specFiles(opts.writeSpecs, result, stats, o.top));
  }
  writeOutputs(outputs, opts.force);

  const c = result.counts;
  const summary = `${c.deployments} deployments of ${model.name} on up to ${o.budget} ${gpuName}: ${c.candidates} candidates, ${c.replays} replays (${describe}), ${c.pruned} pruned, in ${(wallMs / 1000).toFixed(1)} s`;
  if (opts.format === "json") {
    io.out(
      `${JSON.stringify({ summary, sla: formatSla(o.sla), goal: o.goal, counts: c, notes, warnings: planWarnings(result.rows), rows: result.rows }, null, 2)}\n`,
    );
    return 0;
  }
  const warnings = planWarnings(result.rows);
  const lines = [
    `SLA ${formatSla(o.sla)}; ${o.goal.kind === "rate" ? `the fewest GPUs serving ${o.goal.rps} req/s` : "the most req/s per GPU"}`,
    summary,
    "",
    formatPlan(result, o.goal, o.top, o.price),
  ];
  const why = whyLines(result.rows, o.goal, o.top);
  if (why.length > 0) lines.push("", ...why);
  const second = runnerUp(result.rows, o.goal);
  if (second !== undefined) lines.push(`runner-up within 5%: #${second.rank} ${second.label}`);
  const front = paretoFront(result.rows);
  if (front.length > 1) lines.push(`Pareto front (tokens/s per user vs per GPU): ${front.map((r) => `#${r.rank}`).join(", ")}`);
  const counts = countBy(result.rows);
  if (counts.length > 0) lines.push("", ...counts);
  if (notes.length > 0) lines.push("", ...notes.map((n) => `note: ${n}`));
  if (warnings.length > 0) lines.push("", ...warnings.map((w) => `warning: ${w}`));
  io.out(`${lines.join("\n")}\n`);
  return 0;
}
