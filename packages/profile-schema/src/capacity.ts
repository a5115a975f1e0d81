import { engineSettings, MAX_PAGES_PER_RANK, DEFAULT_LINEAR_BLOCK_SIZE, type EngineOverrides, type EngineSettings } from "./engine.js";
import type { InputIssue } from "./errors.js";
import { GIB, KNOWN_GPU_NAMES, resolveGpu } from "./gpus.js";
import { isGroupedProfile, type Profile } from "./profile.js";

/** vLLM's default `gpu_memory_utilization`. */
export const DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;

const MIB = 2 ** 20;

/**
 * Estimated non-torch memory of one rank (cuBLAS and attention workspaces, compiled kernels),
 * which vLLM measures as the growth of memory outside PyTorch's allocator. Public vLLM v1 start-up
 * logs of single-GPU runs show 0.04 to 0.35 GiB; kvsim takes 128 MiB.
 */
export const NON_TORCH_ESTIMATE_BYTES = 128 * MIB;
/** Added to the non-torch estimate when TP > 1: NCCL and custom all-reduce buffers. */
export const NON_TORCH_TP_ESTIMATE_BYTES = 512 * MIB;
/**
 * Estimated CUDA graph memory that vLLM reserves before sizing the KV cache. Since vLLM 0.21.0
 * (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` on by default) the worker captures sample graphs at
 * start-up and subtracts the extrapolated pool; public logs with the default capture sizes (51
 * piecewise + 35 full graphs) report 0.64 and 0.78 GiB. kvsim takes 0.75 GiB.
 */
export const CUDA_GRAPH_ESTIMATE_BYTES = 0.75 * GIB;
/** The first vLLM release that subtracts the CUDA graph estimate by default. */
export const CUDA_GRAPH_ESTIMATE_SINCE = "0.21.0";

/** How num_gpu_blocks followed from GPU memory, term by term (bytes). */
export interface KvCapacity {
  /** The GPU named (as written) or described inline (its name), if any. */
  readonly gpu?: string;
  readonly gpu_memory_bytes: number;
  readonly gpu_memory_utilization: number;
  /** ceil(gpu_memory_bytes x utilization): what the rank may use. */
  readonly requested_bytes: number;
  readonly weights_bytes: number;
  /** Torch activation peak of the profile run (forward over max_num_batched_tokens, then the sampler). */
  readonly activation_bytes: number;
  readonly non_torch_bytes: number;
  readonly cuda_graph_bytes: number;
  /** requested - weights - activation - non-torch - CUDA graphs. */
  readonly kv_cache_bytes: number;
  /** One pool page: page_size_bytes (grouped) or kv_bytes_per_token x block_size (linear). */
  readonly page_bytes: number;
  /** floor(kv_cache_bytes / page_bytes), the null page included, as vLLM counts it. */
  readonly num_gpu_blocks: number;
  /** vLLM's logged "GPU KV cache size": floor(num_gpu_blocks / groups) x the smallest block size. */
  readonly kv_cache_tokens: number;
  /** Which terms are kvsim's estimates rather than given values. */
  readonly estimated: readonly ("weights" | "activation" | "non_torch" | "cuda_graph")[];
}

export type KvCapacityResult = { readonly ok: true; readonly capacity: KvCapacity } | { readonly ok: false; readonly issues: readonly InputIssue[] };

export type EngineResolution =
  { readonly ok: true; readonly settings: EngineSettings; readonly capacity?: KvCapacity } | { readonly ok: false; readonly issues: readonly InputIssue[] };

/** True when the engine sizes its pool from GPU memory (it names a GPU or its memory). */
const sizesFromGpuMemory = (engine: EngineOverrides): boolean => engine.gpu !== undefined || engine.gpu_memory_gib !== undefined;

/** `0.21.0` -> [0, 21, 0]; anything after the three numbers is ignored. */
function versionNumbers(v: string): number[] {
  return v.split(/[.+-]/, 3).map((x) => Number.parseInt(x, 10) || 0);
}

/** a >= b for literal versions such as 0.32.0. */
export function versionAtLeast(a: string, b: string): boolean {
  const [x, y] = [versionNumbers(a), versionNumbers(b)];
  for (let i = 0; i < 3; i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d > 0;
  }
  return true;
}

const gibText = (b: number) => `${(b / GIB).toFixed(2)} GiB`;

/**
 * vLLM's KV capacity of one rank from GPU memory (gpu_worker `determine_available_memory`, then
 * kv_cache_utils `get_num_blocks`): the usable memory (total x gpu_memory_utilization) less the
 * weights, the profile run's activation peak and non-torch growth and, from vLLM 0.21.0, the CUDA
 * graph estimate, divided by one pool page. Terms vLLM measures at run time are kvsim's estimates
 * unless the engine gives them. Issues name engine fields (or `memory` for the profile's).
 */
export function kvCapacity(profile: Profile, engine: EngineSettings): KvCapacityResult {
  const issues: InputIssue[] = [];
  const add = (path: string, message: string) => issues.push({ path, message });
  if (engine.gpu !== undefined && engine.gpu_memory_gib !== undefined) add("gpu_memory_gib", "give gpu or gpu_memory_gib, not both");
  let total: number | undefined;
  if (engine.gpu !== undefined) {
    total = resolveGpu(engine)?.memoryBytes;
    if (total === undefined) add("gpu", `must be a known GPU: ${KNOWN_GPU_NAMES.join(", ")} (kvsim gpus lists them), or a GPU described inline`);
  } else if (engine.gpu_memory_gib !== undefined) total = Math.round(engine.gpu_memory_gib * GIB);
  else add("gpu", "sizing the KV cache from GPU memory needs gpu or gpu_memory_gib (or give num_gpu_blocks)");

  const estimated: KvCapacity["estimated"][number][] = [];
  const memory = profile.memory;
  let weights: number | undefined;
  if (engine.weights_gib !== undefined) weights = Math.round(engine.weights_gib * GIB);
  else if (memory?.weights_bytes !== undefined) {
    weights = memory.weights_bytes;
    estimated.push("weights");
  } else add("weights_gib", `is needed: profile ${profile.model} has no memory.weights_bytes (kvsim profile from-hf writes it)`);

  let activation: number | undefined;
  let nonTorch = 0;
  if (engine.activation_peak_gib !== undefined) activation = Math.round(engine.activation_peak_gib * GIB);
  else if (memory !== undefined) {
    // vLLM's profile run: one forward pass over max_num_batched_tokens tokens, then the sampler on
    // one row per request (min(max_num_seqs, max_num_batched_tokens) dummy requests).
    const rows = Math.min(engine.max_num_seqs, engine.max_num_batched_tokens);
    activation = engine.max_num_batched_tokens * memory.activation_bytes_per_token + rows * memory.sampler_bytes_per_sequence;
    nonTorch = NON_TORCH_ESTIMATE_BYTES + (profile.tensor_parallel_size > 1 ? NON_TORCH_TP_ESTIMATE_BYTES : 0);
    estimated.push("activation", "non_torch");
  } else
    add(
      "activation_peak_gib",
      `is needed: profile ${profile.model} has no memory section to estimate the activation peak from (kvsim profile from-hf writes it)`,
    );

  let cudaGraph: number;
  if (engine.cuda_graph_memory_gib !== undefined) cudaGraph = Math.round(engine.cuda_graph_memory_gib * GIB);
  else if (versionAtLeast(profile.vllm_version, CUDA_GRAPH_ESTIMATE_SINCE)) {
    cudaGraph = CUDA_GRAPH_ESTIMATE_BYTES;
    estimated.push("cuda_graph");
  } else cudaGraph = 0;

  let page: number;
  let groups = 1;
  let minBlock: number;
  if (isGroupedProfile(profile)) {
    page = profile.page_size_bytes;
    groups = profile.kv_cache_groups.length;
    minBlock = Math.min(...profile.kv_cache_groups.map((g) => g.block_size_tokens));
  } else {
    minBlock = engine.block_size ?? DEFAULT_LINEAR_BLOCK_SIZE;
    page = (profile.kv_bytes_per_token ?? 0) * minBlock;
  }
  if (issues.length > 0 || total === undefined || weights === undefined || activation === undefined) return { ok: false, issues };

  const utilization = engine.gpu_memory_utilization ?? DEFAULT_GPU_MEMORY_UTILIZATION;
  const requested = Math.ceil(total * utilization);
  const kvBytes = requested - weights - activation - nonTorch - cudaGraph;
  const blocks = kvBytes > 0 ? Math.floor(kvBytes / page) : 0;
  if (blocks < 2) {
    const terms = `${gibText(requested)} usable (${gibText(total)} x ${utilization}) - ${gibText(weights)} weights - ${gibText(activation + nonTorch)} activations - ${gibText(cudaGraph)} CUDA graphs = ${gibText(kvBytes)}`;
    return {
      ok: false,
      issues: [
        { path: engine.gpu !== undefined ? "gpu" : "gpu_memory_gib", message: `leaves no room for the KV cache: ${terms}, less than 2 pages of ${page} bytes` },
      ],
    };
  }
  if (blocks > MAX_PAGES_PER_RANK) {
    return {
      ok: false,
      issues: [{ path: "gpu_memory_gib", message: `gives ${blocks} pages of ${page} bytes, more than the ${MAX_PAGES_PER_RANK} (2^24) a rank may have` }],
    };
  }
  return {
    ok: true,
    capacity: {
      ...(engine.gpu === undefined ? {} : { gpu: typeof engine.gpu === "string" ? engine.gpu : engine.gpu.name }),
      gpu_memory_bytes: total,
      gpu_memory_utilization: utilization,
      requested_bytes: requested,
      weights_bytes: weights,
      activation_bytes: activation,
      non_torch_bytes: nonTorch,
      cuda_graph_bytes: cudaGraph,
      kv_cache_bytes: kvBytes,
      page_bytes: page,
      num_gpu_blocks: blocks,
      kv_cache_tokens: Math.floor(blocks / groups) * minBlock,
      estimated,
    },
  };
}

const MEMORY_ONLY_FIELDS = ["gpu_memory_utilization", "weights_gib", "activation_peak_gib", "cuda_graph_memory_gib"] as const;

/**
 * Fills an engine's defaults for `profile` and, when it gives GPU memory (`gpu` or
 * `gpu_memory_gib`) instead of `num_gpu_blocks`, derives num_gpu_blocks as vLLM does (see
 * kvCapacity). An explicit `num_gpu_blocks` always wins. Issues name engine fields.
 */
export function resolveEngine(profile: Profile, overrides: EngineOverrides = {}): EngineResolution {
  const settings = engineSettings(overrides);
  if (overrides.num_gpu_blocks !== undefined) return { ok: true, settings };
  if (!sizesFromGpuMemory(overrides)) {
    const stray = MEMORY_ONLY_FIELDS.filter((f) => overrides[f] !== undefined);
    if (stray.length === 0) return { ok: true, settings };
    return {
      ok: false,
      issues: stray.map((f) => ({ path: f, message: "sizes the KV cache from GPU memory, which needs gpu or gpu_memory_gib (or give num_gpu_blocks)" })),
    };
  }
  const result = kvCapacity(profile, settings);
  if (!result.ok) return result;
  return { ok: true, settings: { ...settings, num_gpu_blocks: result.capacity.num_gpu_blocks }, capacity: result.capacity };
}
