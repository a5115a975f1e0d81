/** One GiB (2^30 bytes): vLLM states memory in GiB. */
export const GIB = 2 ** 30;

/** A GPU kvsim knows by name, with the total memory CUDA reports for it (what vLLM multiplies). */
export interface KnownGpu {
  readonly name: string;
  /** `torch.cuda.mem_get_info()` total, in bytes: a little below the marketed size. */
  readonly memoryBytes: number;
  /** Where the figure comes from. */
  readonly source: string;
}

/**
 * GPUs with a public record of the total memory CUDA reports. Only sourced figures are listed; for
 * any other GPU give `gpu_memory_gib` (the total vLLM logs at start-up, or
 * `torch.cuda.mem_get_info()[1] / 2**30`).
 */
export const KNOWN_GPUS: readonly KnownGpu[] = [
  { name: "RTX-4090", memoryBytes: 25_250_627_584, source: "a public vLLM 0.19.0 run's recorded device_total_memory_bytes (LLMServingSim benchmarks)" },
  { name: "RTX-5090", memoryBytes: Math.round(31.37 * GIB), source: "PyTorch's 'total capacity of 31.37 GiB' on an RTX 5090" },
  { name: "A100-80GB", memoryBytes: Math.round(79.25 * GIB), source: "PyTorch's '79.25 GiB total capacity' on an A100 80GB" },
  { name: "H100-80GB", memoryBytes: Math.round(79.18 * GIB), source: "PyTorch's 'NVIDIA H100 80GB HBM3, total memory 79.18 GiB'" },
];

/** The names `engine.gpu` accepts. */
export const KNOWN_GPU_NAMES = ["RTX-4090", "RTX-5090", "A100-80GB", "H100-80GB"] as const;
export type KnownGpuName = (typeof KNOWN_GPU_NAMES)[number];

/** The known GPU of that name, or undefined. */
export function knownGpu(name: string): KnownGpu | undefined {
  return KNOWN_GPUS.find((g) => g.name === name);
}
