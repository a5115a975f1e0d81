import { z } from "zod";
import { parseBandwidth } from "./bandwidth.js";
import { nonBlank } from "./primitives.js";

/** One GiB (2^30 bytes): vLLM states memory in GiB. */
export const GIB = 2 ** 30;

/** How a GPU reaches its peers inside one node. */
export type GpuLinkKind = "nvlink" | "pcie";

/**
 * One GPU's datasheet: what a roofline needs to price a step, and what the KV-capacity path needs
 * to size the pool. Every figure names its source in `sources` (one entry per GPU_FIGURES key).
 */
export interface GpuDatasheet {
  /** Canonical name, e.g. "H100-SXM". */
  readonly name: string;
  /** Other names it answers to, e.g. ["H100-80GB"]. */
  readonly aliases: readonly string[];
  /** Total memory CUDA reports (`torch.cuda.mem_get_info()` total), in bytes: a little below the marketed size. */
  readonly memoryBytes: number;
  /** Dense BF16/FP16 tensor TFLOPS (no 2:4 sparsity), FP32 accumulate. */
  readonly bf16Tflops: number;
  /** Dense FP8 tensor TFLOPS, FP32 accumulate; undefined where the GPU has no FP8 tensor cores. */
  readonly fp8Tflops: number | undefined;
  /** Memory bandwidth in GB/s (10^9 bytes/s). */
  readonly hbmGBps: number;
  /** The intra-node link: bandwidth per GPU and direction in GB/s, and one message's latency in µs. */
  readonly link: { readonly kind: GpuLinkKind; readonly GBps: number; readonly latencyUs: number };
  /** Where each figure comes from, keyed by GPU_FIGURES. */
  readonly sources: Readonly<Record<string, string>>;
}

/** The figures of a datasheet that carry a source. */
export const GPU_FIGURES = ["memoryBytes", "bf16Tflops", "fp8Tflops", "hbmGBps", "link", "linkLatencyUs"] as const;
export type GpuFigure = (typeof GPU_FIGURES)[number];

// Documents cited more than once.
const H100_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet, https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet";
const A100_DATASHEET =
  "NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf";
const H200_PAGE = "NVIDIA H200 product page and datasheet, https://www.nvidia.com/en-us/data-center/h200/";
const HGX_PAGE = "NVIDIA HGX platform specifications (HGX B200, 8 GPUs), https://www.nvidia.com/en-us/data-center/hgx/";
const ADA_WHITEPAPER =
  "NVIDIA Ada GPU Architecture whitepaper v2.01, appendix table for GeForce RTX 4090, https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf";
const RTX5090_PAGE = "NVIDIA GeForce RTX 5090 product page, https://www.nvidia.com/en-us/geforce/graphics-cards/50-series/rtx-5090/";
const PRO6000_PAGE =
  "NVIDIA RTX PRO 6000 Blackwell Workstation Edition product page and datasheet, https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/";
const SPARSE_HALVED = "the datasheet's figure is 'with sparsity'; the dense figure is half of it";
const NVLINK_LATENCY =
  "estimate, not a datasheet figure: kvsim assumes 2 µs for one small NCCL message over NVLink (a few µs in practice); the roofline's fitted overheads absorb its error";
const PCIE_LATENCY =
  "estimate, not a datasheet figure: kvsim assumes 5 µs for one small NCCL message over PCIe (a few µs in practice); the roofline's fitted overheads absorb its error";
const PCIE4 = "PCIe Gen4 x16: 64 GB/s bidirectional on the datasheet = 32 GB/s per direction; no NVLink";
const PCIE5 = "PCIe Gen5 x16: 128 GB/s bidirectional = 64 GB/s per direction; no NVLink";
const GEFORCE_P2P = "GeForce cards have no PCIe peer-to-peer, so NCCL stages through host memory: an upper bound";

const gib = (g: number) => Math.round(g * GIB);

/**
 * The GPUs kvsim knows, each figure with its public source. Memory is what CUDA reports (a
 * recorded `cudaMemGetInfo` / deviceQuery total, or PyTorch's "total capacity" in an out-of-memory
 * message); where none was found the figure is derived and its source says how. TFLOPS are dense
 * (datasheets headline 2:4 sparsity, twice the dense rate). Links are per GPU and direction.
 */
export const GPU_DATASHEETS: readonly GpuDatasheet[] = [
  {
    name: "H100-SXM",
    aliases: ["H100-80GB"],
    memoryBytes: gib(79.18),
    bf16Tflops: 989.5,
    fp8Tflops: 1979,
    hbmGBps: 3350,
    link: { kind: "nvlink", GBps: 450, latencyUs: 2 },
    sources: {
      memoryBytes: "PyTorch's 'NVIDIA H100 80GB HBM3, total memory 79.18 GiB' (a public record of the CUDA total)",
      bf16Tflops: `${H100_DATASHEET}: H100 SXM BF16 1,979 TFLOPS; ${SPARSE_HALVED}`,
      fp8Tflops: `${H100_DATASHEET}: H100 SXM FP8 3,958 TFLOPS; ${SPARSE_HALVED}`,
      hbmGBps: `${H100_DATASHEET}: H100 SXM 3.35 TB/s`,
      link: `${H100_DATASHEET}: NVLink 900 GB/s (total, both directions) = 450 GB/s per direction`,
      linkLatencyUs: NVLINK_LATENCY,
    },
  },
  {
    name: "H100-PCIe",
    aliases: [],
    memoryBytes: gib(79.18),
    bf16Tflops: 756.5,
    fp8Tflops: 1513,
    hbmGBps: 2000,
    link: { kind: "pcie", GBps: 64, latencyUs: 5 },
    sources: {
      memoryBytes:
        "derived: no public record of the PCIe card's CUDA total was found; taken equal to H100-SXM's 79.18 GiB (the same 80 GB capacity; a public cudaGetDeviceProperties print of an H100 PCIe rounds it to 79 GiB)",
      bf16Tflops: `${H100_DATASHEET}: H100 PCIe BF16 1,513 TFLOPS; ${SPARSE_HALVED}`,
      fp8Tflops: `${H100_DATASHEET}: H100 PCIe FP8 3,026 TFLOPS; ${SPARSE_HALVED}`,
      hbmGBps: `${H100_DATASHEET}: H100 PCIe 2 TB/s (HBM2e)`,
      link: `${H100_DATASHEET}: ${PCIE5}; the optional NVLink bridge (600 GB/s) joins pairs of cards only and is not modelled`,
      linkLatencyUs: PCIE_LATENCY,
    },
  },
  {
    name: "H100-NVL",
    aliases: [],
    memoryBytes: gib(93.09),
    bf16Tflops: 835.5,
    fp8Tflops: 1670.5,
    hbmGBps: 3900,
    link: { kind: "nvlink", GBps: 300, latencyUs: 2 },
    sources: {
      memoryBytes:
        "PyTorch's out-of-memory message 'GPU 0 has a total capacity of 93.09 GiB' recorded on an H100 NVL in public run logs (others show 93.10 and 93.11 GiB)",
      bf16Tflops: `${H100_DATASHEET}: H100 NVL BF16 1,671 TFLOPS; ${SPARSE_HALVED}`,
      fp8Tflops: `${H100_DATASHEET}: H100 NVL FP8 3,341 TFLOPS; ${SPARSE_HALVED}`,
      hbmGBps: `${H100_DATASHEET}: H100 NVL 3.9 TB/s`,
      link: `${H100_DATASHEET}: NVLink bridge 600 GB/s (both directions) = 300 GB/s per direction; it joins pairs of cards, so TP beyond 2 crosses PCIe Gen5`,
      linkLatencyUs: NVLINK_LATENCY,
    },
  },
  {
    name: "H200",
    aliases: ["H200-SXM"],
    memoryBytes: gib(139.8),
    bf16Tflops: 989.5,
    fp8Tflops: 1979,
    hbmGBps: 4800,
    link: { kind: "nvlink", GBps: 450, latencyUs: 2 },
    sources: {
      memoryBytes:
        "PyTorch's out-of-memory message 'GPU 0 has a total capacity of 139.80 GiB' recorded on H200 SXM in several public run logs (some show 139.81 GiB)",
      bf16Tflops: `${H200_PAGE}: H200 SXM BF16 1,979 TFLOPS; ${SPARSE_HALVED}`,
      fp8Tflops: `${H200_PAGE}: H200 SXM FP8 3,958 TFLOPS; ${SPARSE_HALVED}`,
      hbmGBps: `${H200_PAGE}: 4.8 TB/s HBM3e`,
      link: `${H200_PAGE}: NVLink 900 GB/s (both directions) = 450 GB/s per direction`,
      linkLatencyUs: NVLINK_LATENCY,
    },
  },
  {
    name: "B200",
    aliases: ["B200-SXM"],
    memoryBytes: gib(178.35),
    bf16Tflops: 2250,
    fp8Tflops: 4500,
    hbmGBps: 7700,
    link: { kind: "nvlink", GBps: 900, latencyUs: 2 },
    sources: {
      memoryBytes:
        "PyTorch's out-of-memory message 'GPU 0 has a total capacity of 178.35 GiB' recorded on HGX B200 in several public run logs (one shows 178.36 GiB)",
      bf16Tflops: `${HGX_PAGE}: HGX B200 per GPU FP16/BF16 Tensor Core 4.5 PFLOPS (36 for 8 GPUs); ${SPARSE_HALVED}: 2,250 TFLOPS`,
      fp8Tflops: `${HGX_PAGE}: HGX B200 per GPU FP8 Tensor Core 9 PFLOPS (72 for 8 GPUs); ${SPARSE_HALVED}: 4,500 TFLOPS`,
      hbmGBps: `${HGX_PAGE}: HGX B200 per GPU 180 GB HBM3E at 7.7 TB/s (up to 62 TB/s for 8 GPUs; earlier NVIDIA material said 8 TB/s)`,
      link: `${HGX_PAGE}: fifth-generation NVLink 1.8 TB/s per GPU (both directions) = 900 GB/s per direction`,
      linkLatencyUs: NVLINK_LATENCY,
    },
  },
  {
    name: "A100-80GB",
    aliases: ["A100-SXM-80GB"],
    memoryBytes: gib(79.25),
    bf16Tflops: 312,
    fp8Tflops: undefined,
    hbmGBps: 2039,
    link: { kind: "nvlink", GBps: 300, latencyUs: 2 },
    sources: {
      memoryBytes: "PyTorch's '79.25 GiB total capacity' on an A100 80GB (e.g. https://github.com/HiDream-ai/VAREdit/issues/6)",
      bf16Tflops: `${A100_DATASHEET}: BF16 Tensor Core 312 TFLOPS dense (624 with sparsity)`,
      fp8Tflops: `none: Ampere has no FP8 tensor cores (${A100_DATASHEET} lists no FP8 rate)`,
      hbmGBps: `${A100_DATASHEET}: A100 80GB SXM 2,039 GB/s HBM2e`,
      link: `${A100_DATASHEET}: NVLink 600 GB/s (both directions) = 300 GB/s per direction`,
      linkLatencyUs: NVLINK_LATENCY,
    },
  },
  {
    name: "A100-40GB",
    aliases: ["A100-SXM-40GB"],
    memoryBytes: 42_298_834_944,
    bf16Tflops: 312,
    fp8Tflops: undefined,
    hbmGBps: 1555,
    link: { kind: "nvlink", GBps: 300, latencyUs: 2 },
    sources: {
      memoryBytes:
        "CUDA deviceQuery on an NVIDIA A100-SXM4-40GB: 'Total amount of global memory: 40339 MBytes (42298834944 bytes)', https://github.com/bottlerocket-os/bottlerocket/pull/3873",
      bf16Tflops: `${A100_DATASHEET}: BF16 Tensor Core 312 TFLOPS dense (624 with sparsity)`,
      fp8Tflops: `none: Ampere has no FP8 tensor cores (${A100_DATASHEET} lists no FP8 rate)`,
      hbmGBps: `${A100_DATASHEET}: A100 40GB SXM 1,555 GB/s HBM2`,
      link: `${A100_DATASHEET}: NVLink 600 GB/s (both directions) = 300 GB/s per direction`,
      linkLatencyUs: NVLINK_LATENCY,
    },
  },
  {
    name: "L40S",
    aliases: [],
    memoryBytes: gib(44.53),
    bf16Tflops: 362.05,
    fp8Tflops: 733,
    hbmGBps: 864,
    link: { kind: "pcie", GBps: 32, latencyUs: 5 },
    sources: {
      memoryBytes:
        "PyTorch's out-of-memory message 'GPU 0 has a total capacity of 44.53 GiB' on an L40S 48GB, https://github.com/Wan-Video/Wan2.1/issues/205 (another public L40S log shows 44.42 GiB)",
      bf16Tflops: "NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/: BF16 Tensor Core 362.05 TFLOPS dense (733 with sparsity)",
      fp8Tflops: "NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/: FP8 Tensor Core 733 TFLOPS dense (1,466 with sparsity)",
      hbmGBps: "NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/: 864 GB/s GDDR6",
      link: `NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/: ${PCIE4}`,
      linkLatencyUs: PCIE_LATENCY,
    },
  },
  {
    name: "L4",
    aliases: [],
    memoryBytes: 23_612_293_120,
    bf16Tflops: 121,
    fp8Tflops: 242.5,
    hbmGBps: 300,
    link: { kind: "pcie", GBps: 32, latencyUs: 5 },
    sources: {
      memoryBytes: "CUDA deviceQuery on an NVIDIA L4 in a public log: 'Total amount of global memory: 22518 MBytes (23612293120 bytes)'",
      bf16Tflops: `NVIDIA L4 datasheet, https://www.nvidia.com/en-us/data-center/l4/: BF16 Tensor Core 242 TFLOPS; ${SPARSE_HALVED}`,
      fp8Tflops: `NVIDIA L4 datasheet, https://www.nvidia.com/en-us/data-center/l4/: FP8 Tensor Core 485 TFLOPS; ${SPARSE_HALVED}`,
      hbmGBps: "NVIDIA L4 datasheet, https://www.nvidia.com/en-us/data-center/l4/: 300 GB/s GDDR6",
      link: `NVIDIA L4 datasheet, https://www.nvidia.com/en-us/data-center/l4/: ${PCIE4}`,
      linkLatencyUs: PCIE_LATENCY,
    },
  },
  {
    name: "A10",
    aliases: [],
    memoryBytes: 23_609_475_072,
    bf16Tflops: 125,
    fp8Tflops: undefined,
    hbmGBps: 600,
    link: { kind: "pcie", GBps: 32, latencyUs: 5 },
    sources: {
      memoryBytes:
        "CUDA deviceQuery on an NVIDIA A10 (driver CUDA 12.2) in a public log: 'Total amount of global memory: 22516 MBytes (23609475072 bytes)'; another with driver CUDA 12.8 shows 23,696,375,808 bytes",
      bf16Tflops: "NVIDIA A10 datasheet, https://www.nvidia.com/en-us/data-center/products/a10-gpu/: BF16 Tensor Core 125 TFLOPS dense (250 with sparsity)",
      fp8Tflops: "none: Ampere has no FP8 tensor cores (the A10 datasheet lists no FP8 rate)",
      hbmGBps: "NVIDIA A10 datasheet, https://www.nvidia.com/en-us/data-center/products/a10-gpu/: 600 GB/s GDDR6",
      link: `NVIDIA A10 datasheet, https://www.nvidia.com/en-us/data-center/products/a10-gpu/: ${PCIE4}`,
      linkLatencyUs: PCIE_LATENCY,
    },
  },
  {
    name: "RTX-4090",
    aliases: [],
    memoryBytes: 25_250_627_584,
    bf16Tflops: 165.2,
    fp8Tflops: 330.3,
    hbmGBps: 1008,
    link: { kind: "pcie", GBps: 32, latencyUs: 5 },
    sources: {
      memoryBytes:
        "a public vLLM 0.19.0 run's recorded device_total_memory_bytes (LLMServingSim benchmarks, casys-kaist/LLMServingSim bench/examples/RTX4090_Llama-3.1-8B)",
      bf16Tflops: `${ADA_WHITEPAPER}: Peak BF16 Tensor TFLOPS with FP32 Accumulate 165.2 dense (330.4 with sparsity); GeForce halves the FP32-accumulate rate`,
      fp8Tflops: `${ADA_WHITEPAPER}: Peak FP8 Tensor TFLOPS with FP32 Accumulate 330.3 dense (660.6 with sparsity; 660.6 dense with FP16 accumulate)`,
      hbmGBps: `${ADA_WHITEPAPER}: 1,008 GB/s GDDR6X`,
      link: `${ADA_WHITEPAPER}: ${PCIE4}; ${GEFORCE_P2P}`,
      linkLatencyUs: PCIE_LATENCY,
    },
  },
  {
    name: "RTX-5090",
    aliases: [],
    memoryBytes: gib(31.37),
    bf16Tflops: 209.5,
    fp8Tflops: 838,
    hbmGBps: 1792,
    link: { kind: "pcie", GBps: 64, latencyUs: 5 },
    sources: {
      memoryBytes: "PyTorch's 'total capacity of 31.37 GiB' on an RTX 5090, https://github.com/Wan-Video/Wan2.1/issues/465",
      bf16Tflops: `derived from ${RTX5090_PAGE}: 3,352 AI TOPS (FP4, with sparsity) = 1,676 dense FP4 = 838 FP8 = 419 FP16 with FP16 accumulate; GeForce halves the FP32-accumulate rate: 209.5 (an RTX 5060 Ti measures 47.0 of the 47.4 this rule gives it, https://github.com/QuantumDrizzy/BLACKWALL)`,
      fp8Tflops: `derived from ${RTX5090_PAGE}: 3,352 AI TOPS (FP4, with sparsity) = 1,676 dense FP4 = 838 dense FP8; FP8 with FP32 accumulate runs at this full rate on GeForce Blackwell (measured at 97% of it on an RTX 5060 Ti, https://github.com/QuantumDrizzy/BLACKWALL)`,
      hbmGBps: `${RTX5090_PAGE}: 1,792 GB/s GDDR7`,
      link: `${RTX5090_PAGE}: ${PCIE5}; ${GEFORCE_P2P}`,
      linkLatencyUs: PCIE_LATENCY,
    },
  },
  {
    name: "RTX-PRO-6000",
    aliases: ["RTX-PRO-6000-Blackwell"],
    memoryBytes: gib(94.97),
    bf16Tflops: 500,
    fp8Tflops: 1000,
    hbmGBps: 1792,
    link: { kind: "pcie", GBps: 64, latencyUs: 5 },
    sources: {
      memoryBytes:
        "PyTorch's out-of-memory message 'GPU 0 has a total capacity of 94.97 GiB' recorded on 96 GB RTX PRO 6000 Blackwell cards in several public run logs",
      bf16Tflops: `derived from ${PRO6000_PAGE}: 4,000 AI TOPS (FP4, with sparsity) = 2,000 dense FP4 = 1,000 FP8 = 500 BF16; assumes the full FP32-accumulate rate of NVIDIA's professional cards (L40S's is full), not confirmed by a measurement`,
      fp8Tflops: `derived from ${PRO6000_PAGE}: 4,000 AI TOPS (FP4, with sparsity) = 2,000 dense FP4 = 1,000 dense FP8`,
      hbmGBps: `${PRO6000_PAGE}: 1,792 GB/s GDDR7`,
      link: `${PRO6000_PAGE}: ${PCIE5}`,
      linkLatencyUs: PCIE_LATENCY,
    },
  },
];

/** Every name and alias `engine.gpu` and `--gpu` accept, canonical names first in table order. */
export const KNOWN_GPU_NAMES: readonly string[] = [...GPU_DATASHEETS.map((g) => g.name), ...GPU_DATASHEETS.flatMap((g) => g.aliases)];

const BY_NAME: ReadonlyMap<string, GpuDatasheet> = new Map(GPU_DATASHEETS.flatMap((g) => [g.name, ...g.aliases].map((n) => [n, g] as const)));

/** The datasheet of a GPU by canonical name or alias; exact, case-sensitive ("h100-sxm" is not found). */
export function gpuDatasheet(name: string): GpuDatasheet | undefined {
  return BY_NAME.get(name);
}

/** A bandwidth with its unit, kept as written (the engine's settings are parsed more than once). */
const bandwidthText = () =>
  z.string({ error: 'expected a bandwidth with its unit, e.g. "450 GB/s"' }).superRefine((text, ctx) => {
    const r = parseBandwidth(text);
    // The reason starts with the text itself; zodIssues appends it as "(got ...)".
    if (!r.ok) ctx.addIssue({ code: "custom", message: r.reason.replace(/^"(?:[^"\\]|\\.)*" /, "") });
  });

/** A finite number; a missing one keeps zod's own message, which zodIssues reports as "is required". */
const figure = () => z.number({ error: (issue) => (issue.input === undefined ? undefined : "expected a finite number") });

/** A positive throughput figure with a typo guard. */
const tflops = () => figure().gt(0, { error: "must be greater than 0", abort: true }).max(1e6, { error: "must be at most 1000000 TFLOPS", abort: true });

/**
 * A GPU described inline in a spec instead of named (snake_case, as written). Output equals input,
 * so `engine` settings can be parsed again after a role override is merged; GpuInlineSchema and
 * gpuFromInline turn it into a GpuDatasheet.
 */
export const GpuInlineFieldsSchema = z
  .strictObject({
    name: nonBlank().describe("What reports call this GPU."),
    memory_gib: figure()
      .gt(0, { error: "must be greater than 0", abort: true })
      .max(2 ** 20, { error: "must be at most 1048576 GiB", abort: true })
      .describe("Total memory in GiB as CUDA reports it (torch.cuda.mem_get_info()[1] / 2**30)."),
    bf16_tflops: tflops().describe("Dense BF16/FP16 tensor TFLOPS (no sparsity)."),
    fp8_tflops: tflops().optional().describe("Dense FP8 tensor TFLOPS (no sparsity); absent: no FP8 tensor cores."),
    hbm_bandwidth: bandwidthText().describe('Memory bandwidth with its unit, e.g. "3.35 TB/s".'),
    link_kind: z.enum(["nvlink", "pcie"]).optional().describe("The intra-node link (default pcie)."),
    link_bandwidth: bandwidthText().describe('Intra-node link bandwidth per GPU and direction, with its unit, e.g. "450 GB/s".'),
    link_latency_us: figure()
      .min(0, { error: "must not be negative", abort: true })
      .max(1e6, { error: "must be at most 1000000 µs", abort: true })
      .describe("One small message's latency over the link, µs."),
  })
  .superRefine((g, ctx) => {
    if (g.fp8_tflops !== undefined && g.fp8_tflops < g.bf16_tflops) {
      ctx.addIssue({
        code: "custom",
        path: ["fp8_tflops"],
        message: `must be at least bf16_tflops (${g.bf16_tflops}): FP8 tensor cores are never slower than BF16 ones`,
      });
    }
  })
  .describe("A GPU described by its datasheet figures instead of a known name.");
export type GpuInline = z.infer<typeof GpuInlineFieldsSchema>;

const GBPS = (text: string): number => {
  const r = parseBandwidth(text);
  // The fields schema has checked the text; this only guards a hand-built object.
  if (!r.ok) throw new Error(r.reason);
  return r.bytesPerSecond / 1e9;
};

/** The datasheet an inline description gives (every source: "given inline"). */
export function gpuFromInline(g: GpuInline): GpuDatasheet {
  const given = "given inline in the spec";
  return {
    name: g.name,
    aliases: [],
    memoryBytes: gib(g.memory_gib),
    bf16Tflops: g.bf16_tflops,
    fp8Tflops: g.fp8_tflops,
    hbmGBps: GBPS(g.hbm_bandwidth),
    link: { kind: g.link_kind ?? "pcie", GBps: GBPS(g.link_bandwidth), latencyUs: g.link_latency_us },
    sources: Object.fromEntries(GPU_FIGURES.map((f) => [f, given])),
  };
}

/** An inline GPU description parsed to its GpuDatasheet. */
export const GpuInlineSchema = GpuInlineFieldsSchema.transform(gpuFromInline);

/** What `engine.gpu` holds: a known name or alias, or an inline description. */
export type EngineGpu = string | GpuInline;

/**
 * The datasheet of `engine.gpu`: the table's entry for a name or alias, the inline description's
 * own, or undefined when the engine names no GPU (or a name the table does not have).
 */
export function resolveGpu(engine: { readonly gpu?: EngineGpu | undefined }): GpuDatasheet | undefined {
  const gpu = engine.gpu;
  if (gpu === undefined) return undefined;
  return typeof gpu === "string" ? gpuDatasheet(gpu) : gpuFromInline(gpu);
}
