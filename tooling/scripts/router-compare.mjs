#!/usr/bin/env node
// kv_aware against round_robin (and any other routers named) on the shared public traces: prefix
// reuse and TTFT p90 at 2, 4 and 8 aggregated workers of Llama 3.1 8B (the bundled profile, its
// forward-pass tables, 16,384 blocks of 16 tokens per worker), each trace replayed as published
// (speedup 1). Prints a Markdown table. Skips cleanly when ../shared/data/traces is absent.
//
// Usage: node tooling/scripts/router-compare.mjs [--routers round_robin,kv_aware] [--workers 2,4,8]
//   (build first: the script runs apps/cli/dist/cli.js)
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const cli = join(repo, "apps/cli/dist/cli.js");
const traces = resolve(repo, "../shared/data/traces");
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : process.argv[i + 1];
};
const routers = arg("--routers", "round_robin,kv_aware").split(",");
const workers = arg("--workers", "2,4,8").split(",").map(Number);

if (!existsSync(traces)) {
  console.log(`skipped: ${traces} is absent`);
  process.exit(0);
}
if (!existsSync(cli)) {
  console.error(`${cli} is missing: build first (pnpm build)`);
  process.exit(2);
}

const workloads = [
  { name: "Mooncake synthetic", file: "mooncake_synthetic_trace.jsonl", format: "mooncake" },
  { name: "Azure code", file: "AzureLLMInferenceTrace_code.csv", format: "azure" },
];
const dir = mkdtempSync(join(tmpdir(), "kvsim-router-"));
const rows = [];
try {
  for (const w of workloads) {
    const spec = join(dir, `${w.format}.yaml`);
    writeFileSync(
      spec,
      [
        "version: 1",
        `profile: ${join(repo, "apps/cli/examples/profiles/llama-3.1-8b-instruct-tp1-bf16-vllm-0.32.0.json")}`,
        "topology: { kind: aggregated, workers: 2 }",
        "engine: { num_gpu_blocks: 16384, block_size: 16, max_num_batched_tokens: 8192, max_num_seqs: 128, enable_prefix_caching: true }",
        "timing: { type: profile, outside_grid: clamp }",
        `workload: { trace: ${join(traces, w.file)}, format: ${w.format} }`,
        "",
      ].join("\n"),
    );
    for (const n of workers) {
      const cells = [];
      for (const r of routers) {
        const out = execFileSync(
          "node",
          [cli, "replay", "--spec", spec, "--set", `topology.workers=${n}`, "--set", `router=${r}`, "--format", "json", "--quiet"],
          {
            encoding: "utf8",
            maxBuffer: 1 << 28,
          },
        );
        const report = JSON.parse(out);
        const spread = Object.values(report.routing ?? {}).find((p) => typeof p === "object" && p !== null && "workers" in p);
        cells.push({ router: r, reuse: report.prefix_cache_reused_ratio, p90: report.p90_ttft_ms, share: spread?.max_request_share ?? 1 });
        console.error(
          `${w.name}, ${n} workers, ${r}: reuse ${(report.prefix_cache_reused_ratio * 100).toFixed(2)} %, TTFT p90 ${report.p90_ttft_ms.toFixed(1)} ms`,
        );
      }
      rows.push({ trace: w.name, n, cells });
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const head = ["trace", "workers", ...routers.flatMap((r) => [`${r} reuse`, `${r} TTFT p90 (ms)`, `${r} busiest share`])];
console.log(`| ${head.join(" | ")} |`);
console.log(`|${head.map(() => "---").join("|")}|`);
for (const row of rows) {
  const cells = row.cells.flatMap((c) => [
    `${(c.reuse * 100).toFixed(2)} %`,
    c.p90.toLocaleString("en-US", { maximumFractionDigits: 1, minimumFractionDigits: 1 }),
    `${(c.share * 100).toFixed(0)} %`,
  ]);
  console.log(`| ${row.trace} | ${row.n} | ${cells.join(" | ")} |`);
}
