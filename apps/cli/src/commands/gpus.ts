import { GIB, GPU_DATASHEETS, type GpuDatasheet } from "@kvsim/profile-schema";
import { Option } from "commander";
import { thousands } from "../profile-table.js";
import type { RegisterCommand } from "./index.js";
import { tableLines } from "../text-table.js";

/** The JSON keys of a datasheet's figures, and of their sources. */
const SOURCE_KEYS: Readonly<Record<string, string>> = {
  memoryBytes: "memory_bytes",
  bf16Tflops: "bf16_tflops",
  fp8Tflops: "fp8_tflops",
  hbmGBps: "hbm_gbps",
  link: "link",
  linkLatencyUs: "link_latency_us",
};

/** One GPU as `kvsim gpus --format json` prints it (snake_case, as the other JSON outputs). */
export function gpuJson(g: GpuDatasheet) {
  return {
    name: g.name,
    aliases: g.aliases,
    memory_bytes: g.memoryBytes,
    memory_gib: Math.round((g.memoryBytes / GIB) * 100) / 100,
    bf16_tflops: g.bf16Tflops,
    fp8_tflops: g.fp8Tflops ?? null,
    hbm_gbps: g.hbmGBps,
    link: { kind: g.link.kind, gbps: g.link.GBps, latency_us: g.link.latencyUs },
    sources: Object.fromEntries(Object.entries(g.sources).map(([k, v]) => [SOURCE_KEYS[k] ?? k, v])),
  };
}

/** 1670.5 -> "1,670.5": thousands grouped, the fraction as given. */
const figure = (n: number): string => {
  const [whole, fraction] = String(n).split(".");
  return `${thousands(Number(whole))}${fraction === undefined ? "" : `.${fraction}`}`;
};

/** The table `kvsim gpus` prints. */
export function formatGpus(gpus: readonly GpuDatasheet[]): string {
  const rows = [
    ["name", "aliases", "memory", "BF16", "FP8", "HBM", "link", "", "latency"],
    ["", "", "GiB", "TFLOPS", "TFLOPS", "GB/s", "", "GB/s", "µs"],
    ...gpus.map((g) => [
      g.name,
      g.aliases.length === 0 ? "-" : g.aliases.join(", "),
      (g.memoryBytes / GIB).toFixed(2),
      figure(g.bf16Tflops),
      g.fp8Tflops === undefined ? "-" : figure(g.fp8Tflops),
      figure(g.hbmGBps),
      g.link.kind,
      figure(g.link.GBps),
      figure(g.link.latencyUs),
    ]),
  ];
  const notes = [
    "",
    "Memory as CUDA reports it (what vLLM multiplies by gpu_memory_utilization); TFLOPS dense (no sparsity);",
    "link bandwidth per GPU and direction; link latencies are kvsim's estimates. Sources: --format json.",
  ];
  return `${[...tableLines(rows, "llrrrrlrr"), ...notes].join("\n")}\n`;
}

export const registerGpus: RegisterCommand = (program, ctx) => {
  program
    .command("gpus")
    .description(
      "List the GPUs kvsim knows (the names engine.gpu and --gpu accept): memory as CUDA reports it, dense BF16 and FP8 TFLOPS, memory bandwidth and the intra-node link; --format json adds each figure's source.",
    )
    .addOption(new Option("--format <format>", "output format").choices(["table", "json"]).default("table"))
    .action(
      ctx.run((flags: { format: "table" | "json" }) => {
        if (flags.format === "json") ctx.io.out(`${JSON.stringify({ gpus: GPU_DATASHEETS.map(gpuJson) }, null, 2)}\n`);
        else ctx.io.out(formatGpus(GPU_DATASHEETS));
        return undefined;
      }),
    );
};
