// `pnpm bench` for @kvsim/replay-engine: replays the public Mooncake synthetic trace (when the
// shared data folder is present) through the built package and prints completed requests, token
// totals against the trace's own sums, simulated requests per wall second and peak RSS.
//
//   (a) aggregated, 4 workers, a linear profile with 16-token blocks, polynomial timing, prefix caching on
//   (b) P/D, 2 prefill + 2 decode workers, the GLM-5.3-Flash grouped profile
//
// Each scenario runs in its own child process so its peak RSS is its own. Figures are printed,
// never asserted: wall time depends on the machine.
/* global console, process, URL */
import { spawnSync } from "node:child_process";
import { createReadStream, existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { SpecSchema, readTrace, validateProfile } from "@kvsim/profile-schema";
import { runReplay } from "../dist/index.js";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
const TRACE = resolve(repoRoot, "../shared/data/traces/mooncake_synthetic_trace.jsonl");
const GLM_FILE = resolve(repoRoot, "apps/cli/examples/profiles/glm-5.3-flash-tp4-fp8-vllm-0.32.0.json");

/** The GLM-5.3-Flash TP4 fp8 geometry of grouped-pd.md, used if the bundled profile is absent. */
const GLM_FALLBACK = {
  schema_version: 1,
  model: "zai-org/GLM-5.3-Flash",
  vllm_version: "0.32.0",
  tensor_parallel_size: 4,
  kv_cache_dtype: "fp8",
  page_size_bytes: 13045120,
  kv_cache_groups: [
    { name: "full_attention", kind: "full_attention", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 13045120 },
    { name: "tail_ring", kind: "state", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: false, transfer_bytes_per_block: 22528 },
    { name: "kda_0", kind: "state", num_layers: 9, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 9768960, prefill_checkpoint_blocks: 1 },
    { name: "kda_1", kind: "state", num_layers: 9, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 9768960, prefill_checkpoint_blocks: 1 },
    { name: "kda_2", kind: "state", num_layers: 8, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 8683520, prefill_checkpoint_blocks: 1 },
    { name: "kda_3", kind: "state", num_layers: 8, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 8683520, prefill_checkpoint_blocks: 1 },
  ],
};

const SCENARIOS = {
  aggregated: () => ({
    label: "(a) aggregated, 4 workers, linear profile, 16-token blocks, polynomial timing, prefix caching on",
    spec: {
      version: 1,
      profile: { schema_version: 1, model: "bench/linear-dense", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 131072 },
      topology: { kind: "aggregated", workers: 4 },
      // 65,536 blocks of 16 tokens hold 1M tokens per rank; the longest prompt has 191,378.
      engine: { num_gpu_blocks: 65536, block_size: 16, max_num_batched_tokens: 8192, max_num_seqs: 256, enable_prefix_caching: true },
      timing: { type: "polynomial" },
      workload: { trace: TRACE, format: "mooncake", trace_block_size: 512 },
    },
  }),
  pd: () => ({
    label: "(b) P/D, 2 prefill + 2 decode workers, GLM-5.3-Flash grouped profile, polynomial timing",
    spec: {
      version: 1,
      profile: existsSync(GLM_FILE) ? JSON.parse(readFileSync(GLM_FILE, "utf8")) : GLM_FALLBACK,
      topology: { kind: "disaggregated", prefill: { workers: 2 }, decode: { workers: 2 } },
      // 4,096 pages of 2,176 tokens per rank.
      engine: { num_gpu_blocks: 4096, max_num_batched_tokens: 8192, max_num_seqs: 256, enable_prefix_caching: true },
      kv_transfer: { bandwidth_gbps: 50, mode: "destination_missing" },
      timing: { type: "polynomial" },
      workload: { trace: TRACE, format: "mooncake", trace_block_size: 512 },
    },
  }),
};

async function traceSums() {
  let requests = 0;
  let input = 0;
  let output = 0;
  const lines = createInterface({ input: createReadStream(TRACE, "utf8"), crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    const row = JSON.parse(line);
    requests++;
    input += row.input_length;
    output += row.output_length;
  }
  return { requests, input, output };
}

async function runScenario(name) {
  const { label, spec: raw } = SCENARIOS[name]();
  const spec = SpecSchema.parse({ ...raw, profile: validateProfile(raw.profile) });
  const sums = await traceSums();
  const lines = createInterface({ input: createReadStream(TRACE, "utf8"), crlfDelay: Infinity });
  const records = readTrace(lines, { format: "mooncake", file: TRACE, traceBlockSize: spec.workload.trace_block_size });
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const result = await runReplay({ spec, records, traceFile: TRACE });
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const rssMb = process.resourceUsage().maxRSS / 1024;
  console.log(label);
  if (!result.ok) {
    console.log(`  FAILED: ${result.reason}`);
    for (const s of result.stuck) console.log(`    ${s.request_id}: ${s.where} (${s.why})`);
    process.exitCode = 1;
    return;
  }
  const r = result.report;
  const check = (a, b) => (a === b ? "equal" : "DIFFERENT");
  console.log(`  completed requests     ${r.completed_requests} of ${sums.requests} (rejected ${r.rejected_requests}, failed ${r.failed_requests})`);
  console.log(`  input tokens           ${r.total_input_tokens} vs trace ${sums.input} (${check(r.total_input_tokens, sums.input)})`);
  console.log(`  output tokens          ${r.total_output_tokens} vs trace ${sums.output} (${check(r.total_output_tokens, sums.output)})`);
  console.log(`  virtual duration       ${(r.duration_ms / 1000).toFixed(1)} s; preemptions ${r.preemptions}; prefix reuse ${(r.prefix_cache_reused_ratio * 100).toFixed(1)} %`);
  if (r.handoffs.count > 0) console.log(`  handoffs               ${r.handoffs.count}, ${r.handoffs.payload_bytes} bytes, mean delay ${r.handoffs.mean_delay_ms.toFixed(3)} ms`);
  // CPU time shows what the replay costs when other processes share the cores.
  console.log(`  wall time              ${wallMs.toFixed(0)} ms (process CPU ${cpuMs.toFixed(0)} ms)`);
  console.log(`  simulated requests/s   ${(r.num_requests / (wallMs / 1000)).toFixed(0)} (wall)`);
  console.log(`  peak RSS               ${rssMb.toFixed(0)} MB`);
  // The digest pins the simulated outcome: a performance change must leave it unchanged.
  console.log(`  digest                 ${r.digest}`);
}

const which = process.argv[2];
if (which !== undefined) {
  await runScenario(which);
} else if (!existsSync(TRACE)) {
  console.log(`replay-engine bench: ${TRACE} is absent, skipping`);
} else {
  let failed = false;
  for (const name of Object.keys(SCENARIOS)) {
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), name], { stdio: "inherit" });
    if (child.status !== 0) failed = true;
  }
  if (failed) process.exitCode = 1;
}
