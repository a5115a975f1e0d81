#!/usr/bin/env node
// Prefix reuse and TTFT against the size of a CPU offload tier (kv_offload), on a Mooncake trace:
// the README's table. After a build:
//   node tooling/scripts/offload-curve.mjs <mooncake_trace.jsonl> [sizes in GiB, comma-separated]
// Llama-3.1-8B (the bundled config.json, profile from-hf for TP 1 on an H100-SXM), 4 aggregated
// workers, round robin, 12,288 GPU blocks of 16 tokens per worker (196,608 tokens, 24 GiB of KV),
// roofline timing; the tier is write-through at 25 GB/s each way with 0.05 ms latency. The last
// row replays a GPU pool too large to evict (2^20 blocks): the reuse a tier that holds
// everything should reach. The trace is not in the repository (../shared/data/traces/).
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dirname, "../..");
const cli = join(root, "apps/cli/dist/cli.js");
const trace = process.argv[2];
if (trace === undefined) {
  console.error("usage: node tooling/scripts/offload-curve.mjs <mooncake_trace.jsonl> [GiB,GiB,...]");
  process.exit(2);
}
const sizes = (process.argv[3] ?? "0,32,64,128,256,512,1024,2048").split(",").map(Number);
const dir = mkdtempSync(join(tmpdir(), "kvsim-offload-"));
const profile = join(dir, "llama-3.1-8b.json");
execFileSync(
  process.execPath,
  [cli, "profile", "from-hf", join(root, "apps/cli/examples/models/llama-3.1-8b-instruct.config.json"), "--tp", "1", "--out", profile],
  {
    stdio: ["ignore", "ignore", "ignore"],
  },
);

function spec(numGpuBlocks, tierGiB) {
  const lines = [
    "version: 1",
    `profile: ${profile}`,
    "topology: { kind: aggregated, workers: 4 }",
    `engine: { gpu: H100-SXM, num_gpu_blocks: ${numGpuBlocks}, block_size: 16, max_num_batched_tokens: 8192, max_num_seqs: 128, enable_prefix_caching: true }`,
    "timing: { type: roofline }",
    `workload: { trace: ${resolve(trace)}, format: mooncake, trace_block_size: 512 }`,
    "router: round_robin",
  ];
  if (tierGiB > 0) {
    lines.push(`kv_offload: { tiers: [ { name: cpu, capacity: ${tierGiB} GiB, read_bandwidth: 25 GB/s, write_bandwidth: 25 GB/s, latency_ms: 0.05 } ] }`);
  }
  const file = join(dir, `spec-${numGpuBlocks}-${tierGiB}.yaml`);
  writeFileSync(file, lines.join("\n") + "\n");
  return file;
}

function replay(file) {
  const t0 = performance.now();
  const out = execFileSync(process.execPath, [cli, "replay", "--spec", file, "--format", "json"], { maxBuffer: 1 << 28 });
  const wall = performance.now() - t0;
  const r = JSON.parse(out.toString());
  return { r, wall };
}

const pct = (x) => `${(100 * x).toFixed(1)} %`;
const ms = (x) => (x === null ? "-" : `${Math.round(x).toLocaleString("en-US")}`);
console.log("| CPU tier per worker | prefix reuse | tokens from the tier | TTFT mean ms | TTFT p90 ms | load delay mean / p90 ms | replay wall s |");
console.log("|---|---|---|---|---|---|---|");
for (const gib of sizes) {
  const { r, wall } = replay(spec(12288, gib));
  const off = r.kv_offload;
  const fromTier = off === undefined ? "-" : pct(off.tokens_served / r.total_input_tokens);
  const delay = off === undefined || off.loads === 0 ? "-" : `${off.mean_load_ms.toFixed(1)} / ${off.p90_load_ms.toFixed(1)}`;
  console.log(
    `| ${gib === 0 ? "none (GPU only)" : `${gib} GiB`} | ${pct(r.prefix_cache_reused_ratio)} | ${fromTier} | ${ms(r.mean_ttft_ms)} | ${ms(r.p90_ttft_ms)} | ${delay} | ${(wall / 1000).toFixed(1)} |`,
  );
}
const { r, wall } = replay(spec(2 ** 20, 0));
console.log(
  `| GPU pool of 2^20 blocks, no tier | ${pct(r.prefix_cache_reused_ratio)} | - | ${ms(r.mean_ttft_ms)} | ${ms(r.p90_ttft_ms)} | - | ${(wall / 1000).toFixed(1)} |`,
);
