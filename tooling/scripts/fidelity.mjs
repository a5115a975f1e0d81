#!/usr/bin/env node
// Fidelity of kvsim against real vLLM runs: for each run folder (requests.jsonl + meta.json), make
// the trace and the spec a user would write, calibrate on the first half, replay everything, and
// print the held-out half's errors next to LLMServingSim's published (in-sample) errors.
//
// Usage: node tooling/scripts/fidelity.mjs <runs-folder> [--markdown] [--keep <dir>]
//   (pnpm fidelity <runs-folder>; build first: the script runs apps/cli/dist/cli.js)
// A run folder holds requests.jsonl (vLLM per-request stats), meta.json (engine_kwargs,
// kv_cache, resolved_config) and optionally llmservingsim-accuracy.txt; the prompts' token ids are
// read from <runs-folder>/<basename of meta.dataset_path> when that file exists.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const cli = join(repo, "apps/cli/dist/cli.js");
// The spec of a run, as `kvsim spec from-vllm` writes it (built with the CLI).
const { deploymentFromMeta, specFromVllm } = await import(pathToFileURL(join(repo, "packages/calibrate/dist/index.js")).href);

const args = process.argv.slice(2);
const markdown = args.includes("--markdown");
const keepAt = args.indexOf("--keep");
const keep = keepAt >= 0 ? resolve(args[keepAt + 1]) : undefined;
const runsDir = args.find((a, i) => !a.startsWith("--") && (keepAt < 0 || i !== keepAt + 1));
if (runsDir === undefined) {
  console.error("usage: node tooling/scripts/fidelity.mjs <runs-folder> [--markdown] [--keep <dir>]");
  process.exit(2);
}
if (!existsSync(cli)) {
  console.error(`${cli} is missing: build first (pnpm build)`);
  process.exit(2);
}

// KV bytes per token of the models the shared runs serve (layers x KV heads x head dim x 2 x bf16),
// for a linear profile: the fitted timing prices steps, the profile only sizes the KV cache.
const KV_BYTES_PER_TOKEN = {
  "meta-llama/Llama-3.1-8B": 32 * 8 * 128 * 2 * 2,
  "Qwen/Qwen3-30B-A3B-Instruct-2507": 48 * 4 * 128 * 2 * 2,
};
// The routed experts of the MoE models among them (their Hugging Face config.json: num_experts,
// num_experts_per_tok): the spec's linear timing names them, so calibrate fits the expert-loading term.
const EXPERTS = {
  "Qwen/Qwen3-30B-A3B-Instruct-2507": { num_experts: 128, num_experts_per_tok: 8 },
};
// Runs whose meta.json does not record the pool: enough blocks that KV never binds (the Qwen run's
// timeseries shows it never near full), stated in the output.
const ASSUMED_BLOCKS = 30000;

const kvsim = (argv) => execFileSync(process.execPath, [cli, ...argv], { encoding: "utf8", maxBuffer: 64 << 20 });

/** LLMServingSim's published errors: "TTFT Mean  65456.6  65820.2  +0.6%" -> { ttft_mean: 0.006 }. */
function peerErrors(file) {
  if (!existsSync(file)) return {};
  const out = {};
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const m = /^(TTFT|TPOT|Latency)\s+(Mean|Median|P90|P95|P99)\s+\S+\s+\S+\s+([+-][\d.]+)%/.exec(line.trim());
    if (m === null) continue;
    const metric = m[1] === "Latency" ? "e2e" : m[1].toLowerCase();
    const stat = m[2].toLowerCase();
    out[`${metric}_${stat}`] = Number(m[3]) / 100;
  }
  return out;
}

/**
 * The spec a user gets from `kvsim spec from-vllm <meta.json> --profile profile.json --trace ...`
 * (the same package function), with a linear profile written here (the fitted timing prices steps,
 * the profile only sizes the KV cache) and a timing calibrate starts from.
 */
function specFor(meta, work, trace, metaFile) {
  const model = meta.model;
  const bytes = KV_BYTES_PER_TOKEN[model];
  if (bytes === undefined) throw new Error(`no KV size known for ${model}: add it to KV_BYTES_PER_TOKEN`);
  const d = deploymentFromMeta(meta, metaFile);
  writeFileSync(
    join(work, "profile.json"),
    JSON.stringify({ schema_version: 1, model, vllm_version: meta.vllm_version, tensor_parallel_size: d.tensorParallelSize, kv_bytes_per_token: bytes }),
  );
  const timing = EXPERTS[model] === undefined ? { type: "fixed", prefill_ms: 10, decode_ms: 10 } : { type: "linear", experts: EXPERTS[model] };
  const { spec } = specFromVllm(d, { profile: "./profile.json", trace: `./${basename(trace)}`, format: "kvsim", timing });
  // A run that does not record its pool gets an assumed one (stated in the output), not one sized
  // from the GPU's memory: the linear profile has no weights to subtract.
  const assumedBlocks = spec.engine.num_gpu_blocks === undefined;
  if (assumedBlocks) {
    const { gpu: _gpu, gpu_memory_utilization: _utilization, ...engine } = spec.engine;
    spec.engine = { num_gpu_blocks: ASSUMED_BLOCKS, ...engine };
  }
  const file = join(work, "spec.json");
  writeFileSync(file, `${JSON.stringify(spec, null, 2)}\n`);
  return { file, assumedBlocks };
}

/** Sorted numbers -> how many are <= x. */
function countAtMost(sorted, x) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Preempted requests waiting to be rescheduled, from once-a-second samples: at each sample,
 * waiting - (arrived - scheduled at least once) counts the requests that were running and went
 * back to the queue. Returns the sum over samples (request-seconds at 1 s samples) and the peak.
 */
function preemptedWaiting(samples, arrivals, firstScheduled) {
  const a = [...arrivals].sort((x, y) => x - y);
  const s = [...firstScheduled].sort((x, y) => x - y);
  let sum = 0;
  let peak = 0;
  for (const { t, waiting } of samples) {
    const back = waiting - (countAtMost(a, t) - countAtMost(s, t));
    if (back > 0) sum += back;
    peak = Math.max(peak, back);
  }
  return { sum, peak };
}

const csvRows = (text) => {
  const [head, ...rows] = text.trim().split("\n");
  const cols = head.split(",");
  return rows.map((r) => Object.fromEntries(r.split(",").map((v, i) => [cols[i], v])));
};

/**
 * The real run's preempted-waiting figure, from its timeseries.csv (t s, running, waiting) and the
 * requests' queued/scheduled timestamps. The two clocks differ by an offset: the one (to 50 ms,
 * within 5 s) at which arrived - finished best matches running + waiting.
 */
function measuredPreemption(dir, requestsFile) {
  const tsFile = join(dir, "timeseries.csv");
  if (!existsSync(tsFile)) return undefined;
  const reqs = readFileSync(requestsFile, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const queued = reqs.map((r) => r.queued_ts).sort((x, y) => x - y);
  const finished = reqs.map((r) => r.last_token_ts).sort((x, y) => x - y);
  const rows = csvRows(readFileSync(tsFile, "utf8")).map((r) => ({ t: Number(r.t), running: Number(r.running), waiting: Number(r.waiting) }));
  const t0 = queued[0];
  let best = { err: Infinity, offset: 0 };
  for (let k = -100; k <= 100; k++) {
    const offset = k * 0.05;
    let err = 0;
    for (const r of rows) err += Math.abs(countAtMost(queued, r.t + t0 + offset) - countAtMost(finished, r.t + t0 + offset) - (r.running + r.waiting));
    if (err < best.err) best = { err, offset };
  }
  const samples = rows.map((r) => ({ t: r.t + t0 + best.offset, waiting: r.waiting }));
  return preemptedWaiting(
    samples,
    queued,
    reqs.map((r) => r.scheduled_ts),
  );
}

/** The same figure for the calibrated replay, from its records and a 1 s time series. */
function simulatedPreemption(work) {
  const records = join(work, "replay-requests.jsonl");
  const series = join(work, "replay-timeseries.csv");
  kvsim([
    "replay",
    "--spec",
    join(work, "calibrated.yaml"),
    "--quiet",
    "--format",
    "json",
    "--requests",
    records,
    "--timeseries",
    series,
    "--sample-ms",
    "1000",
    "--force",
  ]);
  const recs = readFileSync(records, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const samples = csvRows(readFileSync(series, "utf8")).map((r) => ({
    t: Number(r.time_ms),
    waiting: Object.entries(r)
      .filter(([k]) => k.endsWith(".waiting"))
      .reduce((acc, [, v]) => acc + Number(v), 0),
  }));
  const admitted = recs.filter((r) => r.admitted_ms !== null).map((r) => r.admitted_ms);
  return {
    ...preemptedWaiting(
      samples,
      recs.map((r) => r.arrival_ms),
      admitted,
    ),
    events: recs.reduce((acc, r) => acc + r.preemptions, 0),
  };
}

const ROWS = [
  ["tpot", "mean"],
  ["tpot", "p90"],
  ["ttft", "mean"],
  ["ttft", "p90"],
  ["e2e", "mean"],
  ["e2e", "p90"],
];
const TARGET = { tpot_mean: 0.03, tpot_p90: 0.03, ttft_mean: 0.05, ttft_p90: 0.05, e2e_p90: 0.05 };
const pct = (v) => (v === null || v === undefined ? "-" : `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}%`);

const root = keep ?? mkdtempSync(join(tmpdir(), "kvsim-fidelity-"));
const results = [];
try {
  for (const name of readdirSync(runsDir).sort()) {
    const dir = join(runsDir, name);
    const requests = join(dir, "requests.jsonl");
    const metaFile = join(dir, "meta.json");
    if (!existsSync(requests) || !existsSync(metaFile)) continue;
    const meta = JSON.parse(readFileSync(metaFile, "utf8"));
    const work = join(root, name);
    execFileSync("mkdir", ["-p", work]);
    const prompts = meta.dataset_path ? join(runsDir, basename(meta.dataset_path)) : undefined;
    const trace = join(work, "trace.jsonl");
    kvsim(["trace", "from-measured", "--measured", requests, ...(prompts && existsSync(prompts) ? ["--prompts", prompts] : []), "--out", trace, "--force"]);
    const { file, assumedBlocks } = specFor(meta, work, trace, metaFile);
    const started = Date.now();
    const cal = JSON.parse(kvsim(["calibrate", "--spec", file, "--measured", requests, "--out", join(work, "calibrated.yaml"), "--force", "--format", "json"]));
    const wallS = (Date.now() - started) / 1000;
    // Preemptions are compared only where the run records its pool: with an assumed pool the
    // replay's KV pressure is not the real one's.
    const preemption = assumedBlocks ? undefined : { real: measuredPreemption(dir, requests), sim: simulatedPreemption(work) };
    results.push({
      name,
      meta,
      cal,
      wallS,
      peer: peerErrors(join(dir, "llmservingsim-accuracy.txt")),
      tokenIds: Boolean(prompts && existsSync(prompts)),
      assumedBlocks,
      preemption,
    });
  }
} finally {
  if (keep === undefined) rmSync(root, { recursive: true, force: true });
}

const find = (c, metric, stat) => c?.latency.find((l) => l.metric === metric && l.stat === stat)?.error ?? null;
const lines = [];
for (const r of results) {
  const k = r.meta.engine_kwargs;
  lines.push(
    markdown
      ? `**${r.name}** (${r.meta.model}, vLLM ${r.meta.vllm_version}, DP ${k.data_parallel_size ?? 1}${k.enable_expert_parallel ? " + EP" : ""}):`
      : `${r.name} (${r.meta.model}, vLLM ${r.meta.vllm_version}, DP ${k.data_parallel_size ?? 1}${k.enable_expert_parallel ? " + EP" : ""})`,
  );
  lines.push(
    `calibrated on ${r.cal.fit_requests} requests in ${r.wallS.toFixed(1)} s (${r.cal.evaluations} replays); held out: ${r.cal.held_out_requests}; ${r.tokenIds ? "prompts by token id" : "prompts by length"}${r.assumedBlocks ? `; GPU blocks not recorded, ${ASSUMED_BLOCKS} assumed` : ""}; simulated preemptions ${r.cal.simulated_preemptions}`,
  );
  if (r.preemption?.real !== undefined) {
    const { real, sim } = r.preemption;
    lines.push(
      `preempted requests waiting to resume, from 1 s samples (waiting minus never-scheduled arrivals): real ${real.sum} request-seconds (peak ${real.peak}), kvsim ${sim.sum} (peak ${sim.peak}; ${sim.events} preemptions)`,
    );
  }
  lines.push("");
  const rows = [["metric", "kvsim, held-out half", "kvsim, fit half", "target", "LLMServingSim (in-sample, published)"]];
  for (const [metric, stat] of ROWS) {
    const key = `${metric}_${stat}`;
    const held = find(r.cal.held_out, metric, stat);
    const t = TARGET[key];
    rows.push([
      `${metric.toUpperCase()} ${stat}`,
      `${pct(held)}${t !== undefined ? (Math.abs(held ?? Infinity) <= t ? " ✓" : " ✗") : ""}`,
      pct(find(r.cal.fit, metric, stat)),
      t === undefined ? "-" : `±${t * 100}%`,
      pct(r.peer[key]),
    ]);
  }
  if (markdown) {
    lines.push(`| ${rows[0].join(" | ")} |`, `|${rows[0].map(() => "---").join("|")}|`, ...rows.slice(1).map((row) => `| ${row.join(" | ")} |`));
  } else {
    const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
    lines.push(...rows.map((row) => row.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ")));
  }
  const flat = Object.entries(r.cal.coefficients).flatMap(([k2, v]) => (typeof v === "object" ? [[`${k2}.all_experts_ms`, v.all_experts_ms]] : [[k2, v]]));
  lines.push("", `fitted: ${flat.map(([k2, v]) => `${k2} ${v}`).join(", ")}`, "");
}
process.stdout.write(`${lines.join("\n")}\n`);
