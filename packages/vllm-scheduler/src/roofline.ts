/**
 * The roofline step-time model (issue #35): a step priced from the model's compute shape, the GPU's
 * datasheet and what the scheduler knows of the step's rows, with a handful of efficiencies and
 * overheads fitted once on real runs (see {@link ROOFLINE_DEFAULTS} and the package README).
 *
 * Each operator class costs the larger of its compute time (FLOPs over peak x an efficiency) and
 * its memory time (bytes over HBM bandwidth x an efficiency); the classes run one after another,
 * so their times add. The classes: dense GEMMs (attention projections, dense MLPs, shared experts,
 * mixer projections), routed experts (the experts a step's tokens touch), attention over prompt
 * rows and over decode rows, recurrent state, the LM head; then TP all-reduces (and expert-parallel
 * token exchanges) over the intra-node link, and per-step, per-row and per-layer overheads.
 */
import {
  isGroupedProfile,
  resolveGpu,
  shapePerRank,
  type EngineSettings,
  type ModelShape,
  type Profile,
  type RankShape,
  type Timing,
} from "@kvsim/profile-schema";
import { paddedBatchSize } from "./padding.js";
import { decodePairsOf, decodeTokensOf } from "./batch-sums.js";
import type { StepBatch, StepTiming, TimingModel } from "./timing-model.js";

/** The datasheet figures the roofline reads (profile-schema's GPU table provides them). */
export interface RooflineGpu {
  readonly name: string;
  /** Dense BF16/FP16 tensor TFLOPS. */
  readonly bf16Tflops: number;
  /** Dense FP8 tensor TFLOPS; undefined without FP8 tensor cores. */
  readonly fp8Tflops: number | undefined;
  /** HBM bandwidth, GB/s (10^9 B/s). */
  readonly hbmGBps: number;
  /** The intra-node link per GPU and direction (`kind` absent: NVLink-like, no PCIe collective cap). */
  readonly link: { readonly kind?: "nvlink" | "pcie"; readonly GBps: number; readonly latencyUs: number };
}

/** The roofline's efficiencies and overheads. */
export interface RooflineParams {
  /** Share of peak tensor FLOPs dense GEMMs reach. */
  readonly compute_efficiency: number;
  /** Share of peak FLOPs attention kernels reach on prompt rows. */
  readonly attention_efficiency: number;
  /** Share of HBM bandwidth reached reading weights, KV and state. */
  readonly memory_efficiency: number;
  /** Fused-MoE kernels relative to dense GEMMs (divides both their compute and memory time). */
  readonly moe_efficiency: number;
  /** Share of the link's bandwidth all-reduces reach. */
  readonly link_efficiency: number;
  /**
   * The bus bandwidth NCCL's collectives reach over a PCIe link, GB/s (10^9 B/s): a cap on the
   * link's bandwidth x link_efficiency. NCCL's PCIe transport, not the link's rate, limits it.
   */
  readonly pcie_collective_gbps: number;
  /** Per step, ms. */
  readonly step_overhead_ms: number;
  /** Per decoder layer of a step with prompt rows, µs. */
  readonly layer_overhead_us: number;
  /** Per scheduled row, µs. */
  readonly per_sequence_us: number;
}

export const ROOFLINE_PARAM_NAMES: readonly (keyof RooflineParams)[] = [
  "compute_efficiency",
  "attention_efficiency",
  "memory_efficiency",
  "moe_efficiency",
  "link_efficiency",
  "pcie_collective_gbps",
  "step_overhead_ms",
  "layer_overhead_us",
  "per_sequence_us",
];

/**
 * The shipped defaults. Provenance: see {@link ROOFLINE_DEFAULTS_PROVENANCE}; refit with
 * `kvsim calibrate` on a run of your own.
 */
export const ROOFLINE_DEFAULTS: RooflineParams = {
  compute_efficiency: 1,
  attention_efficiency: 0.5,
  memory_efficiency: 0.808,
  moe_efficiency: 1,
  link_efficiency: 0.7,
  pcie_collective_gbps: 10,
  step_overhead_ms: 2.79,
  layer_overhead_us: 20,
  per_sequence_us: 8,
};

export const ROOFLINE_DEFAULTS_PROVENANCE =
  "fitted 2026-12-06 by tooling/scripts/roofline-fit.mjs (Nelder-Mead over compute, memory and MoE efficiency, the step overhead and the client front end) on ten real vLLM runs: " +
  "Llama-3.1-8B on an RTX 4090 and Qwen3-30B-A3B on 2 x RTX PRO 6000 (per-request, engine clock), Llama-2-7B (TP 1) and Mixtral-8x7B (TP 2) on H100 SXM (stage summaries, client clock); " +
  "attention, link, per-layer and per-row terms held at physical guesses the runs cannot tell apart. compute_efficiency and moe_efficiency reached their bound of 1 (see the README's fidelity table). " +
  "pcie_collective_gbps is held, not fitted, at what public nccl-tests runs on PCIe GPUs measure for 0.5-4 MiB collectives: bus bandwidths of 8-12 GB/s on RTX 4090s with peer-to-peer over Gen4 " +
  "(tinygrad/open-gpu-kernel-modules pull request 22: all_reduce_perf 8.4 GB/s at 512 KiB, 10.3 at 1 MiB, 12.3 at 4 MiB) and 9-16 GB/s on another PCIe node (gardenlinux/gardenlinux issue 4556); " +
  "the Qwen3-30B-A3B run, the one run it moves, is matched best (TPOT and TTFT) near 9 GB/s with the other terms at their defaults";

/** vLLM's default CUDA graph capture sizes: 1, 2, 4, every 8 from 8 to 248, every 16 from 256 to 512. */
const DEFAULT_CAPTURE_SIZES: readonly number[] = [
  1,
  2,
  4,
  ...Array.from({ length: 31 }, (_, i) => 8 * (i + 1)),
  ...Array.from({ length: 17 }, (_, i) => 256 + 16 * i),
];

/** The model- and deployment-dependent figures of one rank, computed once. */
export interface RooflineRank {
  readonly shape: ModelShape;
  readonly rank: RankShape;
  readonly tp: number;
  /** Data-parallel ranks whose tokens reach this rank's experts (1 without expert parallelism). */
  readonly tokenScale: number;
  /** Expert-parallel ranks (1 without expert parallelism). */
  readonly ep: number;
  /** KV bytes per token on this rank over all full-attention layers. */
  readonly kvFullBytesPerToken: number;
  /** KV bytes per token on this rank over all sliding-window layers, and their window. */
  readonly kvWindowBytesPerToken: number;
  readonly window: number;
  /** Full-attention and sliding-window layer counts. */
  readonly fullLayers: number;
  readonly windowLayers: number;
  /** Capture sizes a step's token count is padded up to (none above the largest). */
  readonly captureSizes: readonly number[];
}

/** KV bytes per token of a group: its block's payload over its tokens. */
function groupBytesPerToken(profile: Profile, i: number): number {
  const g = profile.kv_cache_groups![i]!;
  return (g.transfer_bytes_per_block ?? profile.page_size_bytes!) / g.block_size_tokens;
}

/**
 * The per-rank figures of a deployment. KV bytes come from the profile (its groups, or its linear
 * rate), so the roofline reads the same KV the pool holds; FLOPs and weights from model_shape.
 */
export function rooflineRank(profile: Profile, engine: EngineSettings): RooflineRank {
  const shape = profile.model_shape;
  if (shape === undefined) throw new RangeError("roofline timing: the profile has no model_shape (kvsim profile from-hf writes it)");
  const tp = profile.tensor_parallel_size;
  const dp = engine.data_parallel_size;
  const ep = engine.enable_expert_parallel && dp > 1 ? tp * dp : 1;
  const a = shape.attention;
  const windowLayers = a?.sliding_layers ?? 0;
  const fullLayers = (a?.layers ?? 0) - windowLayers;
  let kvFull = 0;
  let kvWindow = 0;
  let window = a?.sliding_window ?? 0;
  if (isGroupedProfile(profile)) {
    profile.kv_cache_groups.forEach((g, i) => {
      if (g.kind === "full_attention") kvFull += groupBytesPerToken(profile, i);
      else if (g.kind === "sliding_window") {
        kvWindow += groupBytesPerToken(profile, i);
        window = Math.max(window, g.window_tokens ?? 0);
      }
    });
  } else {
    kvFull = profile.kv_bytes_per_token ?? 0;
  }
  return {
    shape,
    rank: shapePerRank(shape, { tp, ep }),
    tp,
    tokenScale: ep > 1 ? dp : 1,
    ep,
    kvFullBytesPerToken: kvFull,
    kvWindowBytesPerToken: kvWindow,
    window,
    fullLayers,
    windowLayers,
    captureSizes: engine.cudagraph_capture_sizes ?? DEFAULT_CAPTURE_SIZES,
  };
}

/** A step's load as the roofline reads it. */
export interface RooflineLoad {
  /** Tokens computed (prompt tokens of prompt rows + one per decode row). */
  readonly tokens: number;
  /** Rows that sample a token (the LM head's rows). */
  readonly sampled: number;
  readonly promptRows: number;
  readonly promptTokens: number;
  /** Σ over prompt rows of the tokens they held before the step. */
  readonly promptContextTokens: number;
  /** Σ over prompt rows of the causal (query, key) pairs: n x (context + (n + 1) / 2). */
  readonly promptPairs: number;
  readonly decodeRows: number;
  readonly decodeKvTokens: number;
  /**
   * Σ over decode rows of the causal (query, key) pairs: the KV tokens for a one-token row; a row
   * verifying 1 + d tokens after c held attends (1 + d) x c + (1 + d)(2 + d) / 2 (speculative
   * decoding). Absent: decodeKvTokens.
   */
  readonly decodePairs?: number;
}

/** One step's time by class, ms (for reports and tests). */
export interface RooflineBreakdown {
  readonly dense: number;
  readonly experts: number;
  readonly attentionPrefill: number;
  readonly attentionDecode: number;
  readonly state: number;
  readonly lmHead: number;
  readonly communication: number;
  readonly overhead: number;
  readonly total: number;
}

const max = (a: number, b: number) => (a > b ? a : b);

/**
 * The bytes per ms a collective moves over the intra-node link: its bandwidth x link_efficiency,
 * and over PCIe at most `pcie_collective_gbps`. Why the cap: vLLM's expert-parallel all-gathers
 * and reduce-scatters are NCCL's (its custom all-reduce serves only TP all-reduces, and over PCIe
 * only two GPUs with peer-to-peer), and NCCL's PCIe transport (a few channels copying through a
 * staging buffer, via host memory without peer-to-peer) reaches a bus bandwidth of about 8-16 GB/s
 * on the 0.5-4 MiB messages of a step's exchange, whether the link is Gen4 (32 GB/s per direction)
 * or Gen5 (64 GB/s): public nccl-tests runs (see ROOFLINE_DEFAULTS_PROVENANCE). It matters for
 * expert parallelism over PCIe, where every MoE layer all-gathers the tokens of every data-parallel
 * rank and reduce-scatters the experts' output (vLLM's default all2all backend). TP all-reduces
 * over PCIe take the same cap (an approximation for two GPUs with peer-to-peer).
 */
function linkBytesPerMs(gpu: RooflineGpu, p: RooflineParams): number {
  const share = gpu.link.GBps * p.link_efficiency;
  return (gpu.link.kind === "pcie" ? Math.min(share, p.pcie_collective_gbps) : share) * 1e6;
}

/** The per-layer launch overhead a step with prompt rows pays (piecewise CUDA graphs), ms. */
const layerOverheadMs = (shape: ModelShape, p: RooflineParams): number => (p.layer_overhead_us * shape.num_layers) / 1000;

/** Prices one step; every term is non-decreasing in tokens, rows and context. */
export function rooflineBreakdown(r: RooflineRank, gpu: RooflineGpu, p: RooflineParams, load: RooflineLoad): RooflineBreakdown {
  const rows = load.promptRows + load.decodeRows;
  if (rows === 0) return { dense: 0, experts: 0, attentionPrefill: 0, attentionDecode: 0, state: 0, lmHead: 0, communication: 0, overhead: 0, total: 0 };
  const s = r.shape;
  const k = r.rank;
  const bf16 = gpu.bf16Tflops * 1e9; // FLOPs per ms
  const gemmPeak = s.fp8_compute && gpu.fp8Tflops !== undefined ? gpu.fp8Tflops * 1e9 : bf16;
  const hbm = gpu.hbmGBps * 1e6 * p.memory_efficiency; // bytes per ms
  const wb = s.weight_bytes;
  // vLLM pads a step's tokens up to the next CUDA graph size (piecewise graphs for mixed steps).
  const t = paddedBatchSize(load.tokens, r.captureSizes);

  const dense = max((2 * k.denseParams * t) / (gemmPeak * p.compute_efficiency), (k.denseParams * wb) / hbm);

  let experts = 0;
  const moe = s.moe;
  if (moe !== undefined && moe.layers > 0) {
    const tAll = t * r.tokenScale;
    const pairs = (tAll * moe.num_experts_per_tok) / r.ep;
    const touched = 1 - Math.pow(1 - moe.num_experts_per_tok / moe.num_experts, tAll);
    const flops = 2 * moe.layers * pairs * k.expertMacsPerPair;
    const bytes = moe.layers * touched * k.expertParamsPerLayer * (s.expert_weight_bytes ?? wb);
    experts = max(flops / (gemmPeak * p.compute_efficiency), bytes / hbm) / p.moe_efficiency;
  }

  const attnPeak = bf16 * p.attention_efficiency;
  let attentionPrefill = 0;
  if (load.promptRows > 0) {
    const windowed = Math.min(load.promptPairs, load.promptTokens * r.window);
    const flops = 2 * k.attentionMacsPerPairPrefill * (r.fullLayers * load.promptPairs + r.windowLayers * windowed);
    const read = load.promptContextTokens + load.promptTokens;
    const bytes = r.kvFullBytesPerToken * read + r.kvWindowBytesPerToken * Math.min(read, load.promptRows * r.window + load.promptTokens);
    attentionPrefill = max(flops / attnPeak, bytes / hbm);
  }
  let attentionDecode = 0;
  if (load.decodeRows > 0) {
    const windowed = Math.min(load.decodeKvTokens, load.decodeRows * r.window);
    const pairs = load.decodePairs ?? load.decodeKvTokens;
    const windowedPairs = pairs === load.decodeKvTokens ? windowed : Math.min(pairs, (pairs / load.decodeKvTokens) * load.decodeRows * r.window);
    const flops = 2 * k.attentionMacsPerPairDecode * (r.fullLayers * pairs + r.windowLayers * windowedPairs);
    const bytes = r.kvFullBytesPerToken * load.decodeKvTokens + r.kvWindowBytesPerToken * windowed;
    attentionDecode = max(flops / attnPeak, bytes / hbm);
  }

  // A recurrent state is read and written once per row and step.
  const state = (2 * k.stateBytesPerSequence * rows) / hbm;
  // The LM head runs on the rows that sample; its weights are in the model dtype (2 bytes).
  const lmHead = load.sampled === 0 ? 0 : max((2 * k.lmHeadParams * load.sampled) / (bf16 * p.compute_efficiency), (k.lmHeadParams * 2) / hbm);

  // TP: two all-reduces of the step's hidden states per layer (after the mixer and after the MLP).
  // EP: the tokens of every data-parallel rank are gathered to the experts and scattered back.
  const link = linkBytesPerMs(gpu, p);
  const latencyMs = gpu.link.latencyUs / 1000;
  let communication = 0;
  const hiddenBytes = 2 * s.hidden_size;
  if (r.tp > 1) communication += 2 * s.num_layers * (latencyMs + (((2 * (r.tp - 1)) / r.tp) * t * hiddenBytes) / link);
  if (r.ep > 1 && moe !== undefined) communication += 2 * moe.layers * (latencyMs + (((r.ep - 1) / r.ep) * t * r.tokenScale * hiddenBytes) / link);

  const overhead = p.step_overhead_ms + (p.per_sequence_us * rows) / 1000 + (load.promptRows > 0 ? layerOverheadMs(s, p) : 0);
  const total = dense + experts + attentionPrefill + attentionDecode + state + lmHead + communication + overhead;
  return { dense, experts, attentionPrefill, attentionDecode, state, lmHead, communication, overhead, total };
}

/** The roofline as a rank's timing model. */
export class RooflineTiming implements TimingModel {
  readonly type = "roofline";
  private readonly load = {
    tokens: 0,
    sampled: 0,
    promptRows: 0,
    promptTokens: 0,
    promptContextTokens: 0,
    promptPairs: 0,
    decodeRows: 0,
    decodeKvTokens: 0,
    decodePairs: 0,
  };
  constructor(
    readonly rank: RooflineRank,
    readonly gpu: RooflineGpu,
    readonly params: RooflineParams,
  ) {}

  /** A decode-only step: the same price `step` gives that batch. */
  readonly decodeOnlyMs = (rows: number, kvTokens: number): number => {
    const l = this.load;
    l.tokens = rows;
    l.sampled = rows;
    l.promptRows = 0;
    l.promptTokens = 0;
    l.promptContextTokens = 0;
    l.promptPairs = 0;
    l.decodeRows = rows;
    l.decodeKvTokens = kvTokens;
    l.decodePairs = kvTokens;
    return rooflineBreakdown(this.rank, this.gpu, this.params, l).total;
  };

  /**
   * One pass of a speculative draft head (MTP or EAGLE) over `rows` decoding rows attending
   * `kvTokens` tokens: `layers` average decoder layers of the target's shape (its dense, expert,
   * attention, state and all-reduce time per layer of a one-token decode step) and the LM head
   * (each pass samples a draft per row). No step overhead: the drafter runs inside the step.
   */
  readonly draftHeadPassMs = (rows: number, kvTokens: number, layers: number): number => {
    if (rows === 0) return 0;
    this.decodeOnlyMs(rows, kvTokens);
    const b = rooflineBreakdown(this.rank, this.gpu, this.params, this.load);
    const perLayer = (b.dense + b.experts + b.attentionDecode + b.state + b.communication) / this.rank.shape.num_layers;
    return layers * perLayer + b.lmHead;
  };

  step(batch: StepBatch): StepTiming {
    const l = this.load;
    const decodeTokens = decodeTokensOf(batch);
    l.tokens = batch.promptTokens + decodeTokens;
    // Verification computes logits at every position of a decode row (its drafts' too).
    l.sampled = batch.decode.count + decodeTokens - batch.decodeRows;
    l.promptRows = batch.promptRows;
    l.promptTokens = batch.promptTokens;
    l.promptContextTokens = batch.promptContextTokens;
    l.promptPairs = batch.promptAttentionPairs ?? promptPairsEstimate(batch);
    l.decodeRows = batch.decodeRows;
    l.decodeKvTokens = batch.decodeKvTokens;
    l.decodePairs = decodePairsOf(batch);
    const b = rooflineBreakdown(this.rank, this.gpu, this.params, l);
    // Reported split: attention over prompt rows and the mixed-step layer overhead are prompt work.
    const prefillMs = batch.promptRows === 0 ? 0 : b.attentionPrefill + layerOverheadMs(this.rank.shape, this.params);
    return { prefillMs, decodeMs: b.total - prefillMs, clamped: 0 };
  }
}

/** Causal pairs of prompt rows from the batch sums alone, as if the rows were equal. */
function promptPairsEstimate(batch: StepBatch): number {
  if (batch.promptRows === 0) return 0;
  const n = batch.promptTokens / batch.promptRows;
  return batch.promptTokens * (batch.promptContextTokens / batch.promptRows + (n + 1) / 2);
}

/** The spec's overrides over the shipped defaults. */
export function rooflineParams(timing: Extract<Timing, { type: "roofline" }>): RooflineParams {
  const out: { -readonly [K in keyof RooflineParams]: number } = { ...ROOFLINE_DEFAULTS };
  for (const name of ROOFLINE_PARAM_NAMES) out[name] = timing[name] ?? out[name];
  return out;
}

/** Why the engine's GPU cannot feed a roofline, or undefined when it can. */
export function rooflineGpuProblem(engine: EngineSettings): string | undefined {
  if (engine.gpu === undefined)
    return `is required by timing type "roofline": name the GPU whose datasheet prices the steps (kvsim gpus lists them) or describe it inline`;
  if (resolveGpu(engine) === undefined)
    return `${typeof engine.gpu === "string" ? engine.gpu : engine.gpu.name} is not a GPU kvsim knows (kvsim gpus lists them)`;
  return undefined;
}

/** The engine's GPU as the roofline reads it (a profile-schema datasheet). */
export function rooflineGpu(engine: EngineSettings): RooflineGpu {
  const gpu = resolveGpu(engine);
  if (gpu === undefined) throw new RangeError(`roofline timing: engine.gpu ${rooflineGpuProblem(engine) ?? "is unknown"}`);
  return gpu;
}

/** Builds the roofline timing of a rank. */
export function createRooflineTiming(timing: Extract<Timing, { type: "roofline" }>, profile: Profile, engine: EngineSettings): RooflineTiming {
  return new RooflineTiming(rooflineRank(profile, engine), rooflineGpu(engine), rooflineParams(timing));
}
