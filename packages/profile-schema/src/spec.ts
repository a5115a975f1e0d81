import { z } from "zod";
import { bandwidthSchema } from "./bandwidth.js";
import { EngineOverridesSchema } from "./engine.js";
import { KvOffloadSchema } from "./kv-offload.js";
import {
  MAX_BANDWIDTH_GBPS,
  MAX_DURATION_MS,
  MAX_RATE_PER_S,
  MAX_REQUEST_TOKENS,
  MAX_SPEEDUP,
  MAX_SYNTHETIC_REQUESTS,
  MAX_VIRTUAL_TIME_MS,
  MIN_BANDWIDTH_GBPS,
  MIN_RATE_PER_S,
  MIN_SPEEDUP,
} from "./limits.js";
import { durationMs, finiteNumber, nonBlank, nonNegativeInt, positiveInt, rangedNumber } from "./primitives.js";
import { ProfileSchema } from "./profile.js";

/** A step-time coefficient in ms: from 0 to MAX_DURATION_MS, 0 when absent. */
const coefficient = () => durationMs().default(0);
/** An efficiency: a share in (0, 1]; absent means the shipped default. */
const efficiency = () => rangedNumber(0, 1, "", { exclusiveMin: true }).optional();
/** A step-time coefficient in microseconds per token: from 0 to 10^6 (a second per token), 0 when absent. */
const perTokenUs = () => rangedNumber(0, 1e6, "us", { note: "a second per token" }).default(0);
/** A time span in ms, in (0, MAX_VIRTUAL_TIME_MS]. */
const spanMs = () => rangedNumber(0, MAX_VIRTUAL_TIME_MS, "ms", { exclusiveMin: true, note: "about 317 years" });

/** A profile given by path (relative to the spec file) or inline. */
const ProfileRefSchema = z.union([nonBlank(), ProfileSchema], {
  error: "expected a path to a profile file or an inline profile object",
});

/** The most workers one pool may have (each is a whole modelled rank). */
const MAX_WORKERS_PER_POOL = 1024;
const workerCount = () => positiveInt().max(MAX_WORKERS_PER_POOL, { error: `must be at most ${MAX_WORKERS_PER_POOL}`, abort: true });
const PoolSchema = z.strictObject({ workers: workerCount() });

export const TopologySchema = z.discriminatedUnion(
  "kind",
  [
    z.strictObject({ kind: z.literal("aggregated"), workers: workerCount() }),
    z.strictObject({ kind: z.literal("disaggregated"), prefill: PoolSchema, decode: PoolSchema }),
  ],
  {
    error: (iss) =>
      iss.input === undefined
        ? "is missing: a spec says how the workers are laid out, e.g. topology: { kind: aggregated, workers: 1 }"
        : "kind must be aggregated or disaggregated",
  },
);
export type Topology = z.infer<typeof TopologySchema>;

/** Per-role overrides (prefill and decode roles of a disaggregated topology). */
const RoleOverrideSchema = z.strictObject({
  engine: EngineOverridesSchema.optional(),
  profile: ProfileRefSchema.optional(),
  kv_offload: KvOffloadSchema.optional().describe("This role's offload tiers instead of the spec's kv_offload (the whole section)."),
});

export const TransferModeSchema = z.enum(["full_prompt", "destination_missing"]);
export type TransferMode = z.infer<typeof TransferModeSchema>;

/** The most GPUs one node may hold. */
export const MAX_GPUS_PER_NODE = 1024;

/**
 * The shared network of P/D handoffs (off when absent: each handoff then has a private pipe at
 * `bandwidth_gbps`). Bandwidths are written with their unit and parsed to bytes per second.
 */
export const NetworkSchema = z.strictObject({
  /** One worker's NIC (one TP rank's, as the payload is per rank), each direction; bytes per second once parsed. */
  nic: z
    .strictObject({ send: bandwidthSchema(), receive: bandwidthSchema() })
    .describe("Each worker's NIC: send and receive bandwidths with units (e.g. 50 GB/s, 400 Gbit/s); shared max-min fairly by the transfers that cross it."),
  /** Transfers one NIC runs at once; later ones wait in arrival order. Absent: no limit. */
  max_concurrent_transfers: positiveInt().optional().describe("Transfers a NIC runs at once; later ones wait in arrival order. Absent: no limit."),
  nodes: z
    .strictObject({
      gpus_per_node: positiveInt().max(MAX_GPUS_PER_NODE, { error: `must be at most ${MAX_GPUS_PER_NODE}`, abort: true }),
      /** Each worker's intra-node link (NVLink), each direction; bytes per second once parsed. */
      intra_node_bandwidth: bandwidthSchema(),
      /** Worker order when filling nodes: prefill workers then decode, or alternating. */
      fill: z.enum(["prefill_first", "interleaved"]).default("prefill_first"),
    })
    .optional()
    .describe("Workers on nodes (a worker's TP ranks on one node): transfers between workers on one node take the intra-node link, not the NICs."),
});
export type Network = z.infer<typeof NetworkSchema>;

export const KvTransferSchema = z
  .strictObject({
    /** The private pipe's bandwidth with its unit (`50 GB/s`, `400 Gbit/s`); parsed to bytes per second, then folded into bandwidth_gbps. */
    bandwidth: bandwidthSchema()
      .optional()
      .describe(
        'The private pipe of each handoff, with its unit: "50 GB/s" (decimal bytes), "400 Gbit/s" (bits); 1 MB/s to 100 TB/s. Absent: no modelled transfer delay.',
      ),
    /** Deprecated alias of `bandwidth` in decimal GB/s (10^9 B/s): "gbps" reads as gigabits, 8x off. */
    bandwidth_gbps: rangedNumber(MIN_BANDWIDTH_GBPS, MAX_BANDWIDTH_GBPS, "GB/s", { note: "1 MB/s to 100 TB/s" })
      .optional()
      .describe(
        `Deprecated (it warns): bandwidth in decimal GB/s (10^9 B/s, not gigabits), ${MIN_BANDWIDTH_GBPS} to ${MAX_BANDWIDTH_GBPS}; write bandwidth: "50 GB/s" instead.`,
      ),
    mode: TransferModeSchema.default("destination_missing"),
    /** Delay used when no bandwidth is set. */
    fallback_latency_ms: durationMs().default(0).describe(`Transfer delay when no bandwidth is set, ms (0 to ${MAX_DURATION_MS}).`),
    /** Paid once by every transfer before its first byte (descriptor exchange, registration). Absent: 0. */
    setup_latency_ms: durationMs().optional().describe(`Paid once by every transfer before its first byte, ms (0 to ${MAX_DURATION_MS}); absent: 0.`),
    /** Off when absent: each handoff has a private pipe at bandwidth. */
    network: NetworkSchema.optional().describe("A shared network of per-worker NICs instead of a private pipe per handoff; absent: the private pipe."),
  })
  .superRefine((k, ctx) => {
    if (k.bandwidth !== undefined && k.bandwidth_gbps !== undefined) {
      ctx.addIssue({ code: "custom", path: ["bandwidth_gbps"], message: "and bandwidth say the same thing; keep bandwidth (with its unit) only" });
    }
    if (k.network === undefined) return;
    for (const key of ["bandwidth", "bandwidth_gbps"] as const) {
      if (k[key] !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: "prices a private pipe per handoff; with network the NIC bandwidths price transfers (remove one of them)",
        });
      }
    }
    if (k.fallback_latency_ms !== 0) {
      ctx.addIssue({
        code: "custom",
        path: ["fallback_latency_ms"],
        message: "applies to the private pipe without bandwidth; with network use setup_latency_ms",
      });
    }
  })
  // What the layers below read: one bandwidth, in decimal GB/s (`50 GB/s` and `400 Gbit/s` are 50).
  .transform(({ bandwidth, ...k }) => (bandwidth === undefined ? k : { ...k, bandwidth_gbps: bandwidth / 1e9 }));
export type KvTransfer = z.infer<typeof KvTransferSchema>;

/** A deprecated key a document still may use: where it is, and what to write instead. */
export interface Deprecation {
  readonly path: string;
  readonly message: string;
}

/**
 * The deprecated keys a spec document (as written, after `--set`) uses; each still works, and the
 * CLI prints a warning naming its line. Today: `kv_transfer.bandwidth_gbps`, whose "gbps" reads as
 * gigabits while it means gigabytes per second (8x apart).
 */
export function specDeprecations(value: unknown): Deprecation[] {
  const kv = typeof value === "object" && value !== null ? (value as { kv_transfer?: unknown }).kv_transfer : undefined;
  const gbps = typeof kv === "object" && kv !== null ? (kv as { bandwidth_gbps?: unknown }).bandwidth_gbps : undefined;
  if (gbps === undefined) return [];
  const example = typeof gbps === "number" && Number.isFinite(gbps) ? `${gbps} GB/s` : "50 GB/s";
  return [
    {
      path: "kv_transfer.bandwidth_gbps",
      message: `is deprecated: it means gigabytes per second, but "Gbps" reads as gigabits (8x less); write bandwidth: ${example} (or in Gbit/s: ${typeof gbps === "number" && Number.isFinite(gbps) ? `${gbps * 8} Gbit/s` : "400 Gbit/s"})`,
    },
  ];
}

/**
 * The expert weight loading of a mixture-of-experts model in the `linear` timing: a step reads the
 * weights of each expert its tokens are routed to once, so the cost grows with the number of
 * distinct experts touched and saturates when every expert is (vllm-scheduler README).
 */
const LinearExpertsSchema = z
  .strictObject({
    num_experts: positiveInt()
      .max(65536, { error: "must be at most 65536", abort: true })
      .describe("Routed experts per MoE layer (the model's config.json num_experts, or n_routed_experts)."),
    num_experts_per_tok: positiveInt()
      .max(65536, { error: "must be at most 65536", abort: true })
      .describe("Experts each token is routed to (config.json num_experts_per_tok); at most num_experts."),
    all_experts_ms: coefficient().describe(
      "Per step whose tokens touch every expert (reading all of this rank's expert weights once), ms; a step pays the expected share it touches.",
    ),
  })
  .refine((e) => e.num_experts_per_tok <= e.num_experts, { error: "num_experts_per_tok must be at most num_experts", path: ["num_experts_per_tok"] });

export const TimingSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({
      type: z.literal("fixed"),
      prefill_ms: durationMs().describe(`Time of a pass with prompt work, ms (0 to ${MAX_DURATION_MS}).`),
      decode_ms: durationMs().describe(`Time of a pass's decode part, ms (0 to ${MAX_DURATION_MS}).`),
    }),
    /** The upstream simulator's uncalibrated polynomial (docs/rules/replay.md §4.2). */
    z.strictObject({ type: z.literal("polynomial") }),
    /** The profile's forward_pass tables; `outside_grid` says what a query outside the grid does. */
    z.strictObject({ type: z.literal("profile"), outside_grid: z.enum(["refuse", "clamp"]).default("refuse") }),
    /**
     * One linear formula for a whole step (vllm-scheduler README): a constant, a cost per scheduled
     * sequence, per KV token that decode rows attend, per prompt token computed and per earlier token
     * of prompt rows, and a surcharge for steps with prompt work. `kvsim calibrate` fits it.
     */
    z.strictObject({
      type: z.literal("linear"),
      step_ms: coefficient().describe("Per step (CPU scheduling, launch, weights read once), ms."),
      per_sequence_ms: coefficient().describe("Per scheduled sequence (a decode-only step counts it padded up to the next cudagraph capture size), ms."),
      per_kv_token_us: perTokenUs().describe("Per KV token a decode row attends (its tokens before the one it computes, that one included), microseconds."),
      per_prompt_token_us: perTokenUs().describe("Per prompt token computed by a prompt row (a prefill chunk, or a recompute after preemption), microseconds."),
      per_cached_token_us: perTokenUs().describe("Per token a prompt row already holds before its chunk (prefix-cache hit and earlier chunks), microseconds."),
      prompt_step_ms: coefficient().describe(
        "Once per step that carries prompt work (mixed steps run piecewise CUDA graphs, decode-only steps whole graphs), ms.",
      ),
      experts: LinearExpertsSchema.optional().describe(
        "Mixture-of-experts weight loading (optional; absent, the step has no such term): all_experts_ms x the expected share of the experts a step's tokens touch, 1 - (1 - num_experts_per_tok / num_experts)^N, N = the step's tokens x data_parallel_size with enable_expert_parallel (the ranks' tokens go to every rank's experts).",
      ),
    }),
    /**
     * A roofline over the profile's model_shape and the engine's GPU datasheet (vllm-scheduler
     * README): each operator class costs the larger of its FLOPs over peak x an efficiency and its
     * bytes over HBM bandwidth x an efficiency, plus TP all-reduces and per-step overheads. Every
     * efficiency and overhead has a shipped default fitted on real runs; a spec may override any.
     */
    z.strictObject({
      type: z.literal("roofline"),
      compute_efficiency: efficiency().describe("Share of the GPU's peak tensor FLOPs dense GEMMs reach (default: fitted, see the vllm-scheduler README)."),
      attention_efficiency: efficiency().describe("Share of peak FLOPs attention kernels reach on prompt rows."),
      memory_efficiency: efficiency().describe("Share of HBM bandwidth reached reading weights, KV and state."),
      moe_efficiency: efficiency().describe("Fused-MoE kernels' efficiency relative to dense GEMMs (divides both their compute and memory time)."),
      link_efficiency: efficiency().describe("Share of the intra-node link bandwidth TP all-reduces and expert-parallel exchanges reach."),
      pcie_collective_gbps: rangedNumber(0, 1e4, "GB/s", { exclusiveMin: true })
        .optional()
        .describe(
          "The bus bandwidth NCCL collectives reach over a PCIe link (GB/s, 10^9 B/s): caps link x link_efficiency on PCIe GPUs (NCCL's PCIe transport, not the link, limits it).",
        ),
      step_overhead_ms: durationMs().optional().describe("Per step: scheduling, input preparation, sampling, launch (ms)."),
      layer_overhead_us: rangedNumber(0, 1e6, "us")
        .optional()
        .describe("Per decoder layer of a step with prompt rows (piecewise CUDA graphs launch attention eagerly), microseconds."),
      per_sequence_us: rangedNumber(0, 1e6, "us").optional().describe("Per scheduled row (sampler, input and output bookkeeping), microseconds."),
    }),
  ],
  {
    error: (iss) =>
      iss.input === undefined
        ? "is missing: a spec says how long a forward pass takes, e.g. timing: { type: profile } (the profile's forward_pass tables) or timing: { type: fixed, prefill_ms: 20, decode_ms: 5 }"
        : "type must be fixed, polynomial, profile, linear or roofline",
  },
);
export type Timing = z.infer<typeof TimingSchema>;

const SyntheticWorkloadSchema = z.strictObject({
  requests: positiveInt()
    .max(MAX_SYNTHETIC_REQUESTS, {
      error: `must be at most ${MAX_SYNTHETIC_REQUESTS} (each request keeps a record in memory until the report is written)`,
      abort: true,
    })
    .describe(`Requests, 1 to ${MAX_SYNTHETIC_REQUESTS}.`),
  input_tokens: positiveInt().max(MAX_REQUEST_TOKENS, { error: `must be at most ${MAX_REQUEST_TOKENS} (2^24) tokens`, abort: true }),
  output_tokens: positiveInt().max(MAX_REQUEST_TOKENS, { error: `must be at most ${MAX_REQUEST_TOKENS} (2^24) tokens`, abort: true }),
  /** Mean Poisson arrival rate; absent: every request arrives at 0. */
  rate_per_s: rangedNumber(MIN_RATE_PER_S, MAX_RATE_PER_S, "requests per second")
    .optional()
    .describe(`Mean Poisson arrival rate, ${MIN_RATE_PER_S} to ${MAX_RATE_PER_S} requests per second; absent: every request arrives at 0.`),
  seed: nonNegativeInt().default(0),
  /** Fraction of each prompt (rounded down to whole tokens) that is a prefix shared by every request. */
  shared_prefix_ratio: finiteNumber().min(0, { error: "must be in [0, 1]", abort: true }).max(1, { error: "must be in [0, 1]", abort: true }).default(0),
});
export type SyntheticWorkload = z.infer<typeof SyntheticWorkloadSchema>;

export const TraceFormatSchema = z.enum(["mooncake", "azure", "kvsim"]);
export type TraceFormat = z.infer<typeof TraceFormatSchema>;

export const WorkloadSchema = z
  .strictObject({
    trace: nonBlank().optional(),
    synthetic: SyntheticWorkloadSchema.optional(),
    format: TraceFormatSchema.optional(),
    /** Tokens per Mooncake hash id. */
    trace_block_size: positiveInt()
      .max(MAX_REQUEST_TOKENS, { error: `must be at most ${MAX_REQUEST_TOKENS} (2^24) tokens`, abort: true })
      .default(512)
      .describe("Tokens per Mooncake hash id."),
    /** Arrival times are divided by it. */
    speedup: rangedNumber(MIN_SPEEDUP, MAX_SPEEDUP, "")
      .default(1)
      .describe(`Arrival times are divided by it; ${MIN_SPEEDUP} to ${MAX_SPEEDUP}. Arrivals, once divided, must fall within 10^13 ms of the first.`),
  })
  .superRefine((w, ctx) => {
    if ((w.trace === undefined) === (w.synthetic === undefined)) {
      ctx.addIssue({ code: "custom", path: [], message: "needs exactly one of trace or synthetic" });
    }
    if (w.trace !== undefined && w.format === undefined) {
      ctx.addIssue({ code: "custom", path: ["format"], message: "is required with trace (mooncake, azure or kvsim)" });
    }
    if (w.synthetic !== undefined && w.format !== undefined) {
      ctx.addIssue({ code: "custom", path: ["format"], message: "applies to trace workloads only" });
    }
  });
export type Workload = z.infer<typeof WorkloadSchema>;

const SlaSchema = z
  .strictObject({
    ttft_ms: spanMs().optional(),
    itl_ms: spanMs().optional(),
    e2e_ms: spanMs().optional(),
  })
  .refine((s) => s.ttft_ms !== undefined || s.itl_ms !== undefined || s.e2e_ms !== undefined, { error: "set at least one of ttft_ms, itl_ms, e2e_ms" });
export type Sla = z.infer<typeof SlaSchema>;

/** The placement policies a router may use (a pool's choice of worker for each request). */
export const RouterPolicySchema = z.enum(["round_robin", "kv_aware", "prefix_only", "least_loaded", "power_of_two", "weighted"], {
  error: "must be round_robin, kv_aware, prefix_only, least_loaded, power_of_two or weighted",
});
export type RouterPolicy = z.infer<typeof RouterPolicySchema>;

const routerSeed = () => nonNegativeInt().default(0).describe("Seed of the router's random choices (ties, sampling); the same seed gives the same placements.");
const routerWeight = (what: string) => rangedNumber(0, 1e6, "").default(1).describe(`Weight of the ${what} score, 0 to 10^6.`);

/**
 * The router of both pools, in its mapping form. `kv_aware` is Dynamo's KV router cost (docs:
 * replay-engine README, "Routers"), its settings under Dynamo's names and defaults.
 */
export const RouterSettingsSchema = z.discriminatedUnion(
  "policy",
  [
    z.strictObject({ policy: z.literal("round_robin") }),
    z.strictObject({
      policy: z.literal("kv_aware"),
      overlap_score_weight: rangedNumber(0, 1e6, "")
        .default(1)
        .describe(
          "Dynamo's kv-overlap-score-weight: weight of the prefill blocks (those the worker does not cache) against its active blocks, 0 to 10^6; 0 ignores the prefix cache.",
        ),
      router_temperature: rangedNumber(0, 1e6, "")
        .default(0)
        .describe(
          "Dynamo's router-temperature: 0 picks the lowest cost (ties at random); above 0, softmax sampling over the costs normalised by their spread.",
        ),
      seed: routerSeed(),
    }),
    z.strictObject({ policy: z.literal("prefix_only") }),
    z.strictObject({ policy: z.literal("least_loaded") }),
    z.strictObject({ policy: z.literal("power_of_two"), seed: routerSeed() }),
    z.strictObject({
      policy: z.literal("weighted"),
      prefix_weight: routerWeight("prefix-cache (the share of the prompt's blocks the worker caches)"),
      queue_weight: routerWeight("queue (the shortest queue of the pool scores 1, the longest 0)"),
      kv_utilization_weight: routerWeight("KV-utilisation (1 - the share of the worker's KV pages in use)"),
      seed: routerSeed(),
    }),
  ],
  {
    error: (iss) =>
      typeof iss.input === "object" && iss.input !== null && !("policy" in iss.input)
        ? "is missing: a router mapping names its policy, e.g. { policy: kv_aware }"
        : "must be round_robin, kv_aware, prefix_only, least_loaded, power_of_two or weighted",
  },
);

/**
 * A router: a policy name (`kv_aware`), or a mapping with the policy and its settings
 * (`{ policy: kv_aware, overlap_score_weight: 2 }`). Parsed to the mapping with every default. A
 * name becomes `{ policy: name }` before the mapping is checked, so every problem names its field
 * (a union of the two forms would report only "invalid input" at `router`).
 */
export const RouterSchema = z
  .union([z.string(), z.record(z.string(), z.unknown())], {
    error: "expected a policy name or a mapping with a policy, e.g. { policy: kv_aware, overlap_score_weight: 1 }",
  })
  .transform((r) => (typeof r === "string" ? { policy: r } : r))
  .pipe(RouterSettingsSchema);

/**
 * The HTTP front end before the engine (API server, tokenisation, detokenisation): a request
 * reaches the engine overhead_ms after its client arrival, so its TTFT and E2E are on the client's
 * clock, as benchmarks measure them; without it they start at the engine.
 */
const FrontendSchema = z.strictObject({
  overhead_ms: durationMs().describe(
    "Time from a request's client arrival to the engine (HTTP server, tokenisation, the first token's detokenisation), added to every request's TTFT and E2E, ms; kvsim calibrate can fit it.",
  ),
});
export type Frontend = z.infer<typeof FrontendSchema>;

export type Router = z.infer<typeof RouterSchema>;

/** Replay spec v1 (docs/rules/formats.md §2). Unknown keys are errors. */
export const SpecSchema = z
  .strictObject({
    /** Editor support only: the JSON Schema this file follows. kvsim ignores it. */
    $schema: z.string().optional().describe("The JSON Schema this file follows (editor support); kvsim ignores it."),
    version: z.literal(1, { error: "must be 1" }).describe("Spec format version; 1."),
    profile: ProfileRefSchema.describe("The profile: a path relative to the spec file, or an inline profile."),
    topology: TopologySchema.describe("aggregated (workers: N) or disaggregated (prefill and decode pools)."),
    engine: EngineOverridesSchema.default({}).describe("vLLM settings for every rank; prefill and decode may override them."),
    prefill: RoleOverrideSchema.optional().describe("Disaggregated: engine and profile overrides of the prefill role."),
    decode: RoleOverrideSchema.optional().describe("Disaggregated: engine and profile overrides of the decode role."),
    kv_offload: KvOffloadSchema.optional().describe(
      "KV cache offloading: tiers (host memory, disk) below every worker's GPU pool; absent: the GPU pool only. prefill and decode may override it.",
    ),
    kv_transfer: KvTransferSchema.prefault({ mode: "destination_missing", fallback_latency_ms: 0 }).describe("How P/D handoffs are priced."),
    timing: TimingSchema.describe(
      "Step timing: fixed, polynomial, profile (the profile's forward_pass tables), linear (fitted by kvsim calibrate) or roofline (the profile's model_shape on the engine's GPU).",
    ),
    workload: WorkloadSchema.describe("A trace file (with its format) or a synthetic workload."),
    router: RouterSchema.default({ policy: "round_robin" }).describe(
      "Placement in each pool: a policy name (round_robin, kv_aware, prefix_only, least_loaded, power_of_two, weighted) or a mapping with its policy and settings.",
    ),
    sla: SlaSchema.optional().describe("Service-level targets for goodput."),
    frontend: FrontendSchema.optional().describe(
      "The HTTP front end's overhead: present, TTFT and E2E are on the client's clock (the report's ttft_clock: client); absent, on the engine's.",
    ),
    /** Soft cutoff on virtual time: no event after it is processed. */
    max_virtual_time_ms: rangedNumber(0, MAX_VIRTUAL_TIME_MS, "ms", { note: "about 317 years" })
      .optional()
      .describe("Soft cutoff on virtual time, ms (0 to 10^13)."),
  })
  .superRefine((s, ctx) => {
    if (s.topology.kind === "aggregated") {
      for (const role of ["prefill", "decode"] as const) {
        if (s[role] !== undefined) ctx.addIssue({ code: "custom", path: [role], message: "applies to a disaggregated topology only" });
      }
      if (s.kv_transfer.network !== undefined)
        ctx.addIssue({ code: "custom", path: ["kv_transfer", "network"], message: "applies to a disaggregated topology only" });
    }
    // Data-parallel ranks: a pool's ranks (workers x data_parallel_size) are bounded like its workers,
    // and the shared network has one NIC per worker, which D ranks would not share.
    const pools =
      s.topology.kind === "aggregated"
        ? [{ role: undefined, workers: s.topology.workers }]
        : [
            { role: "prefill" as const, workers: s.topology.prefill.workers },
            { role: "decode" as const, workers: s.topology.decode.workers },
          ];
    for (const { role, workers } of pools) {
      const own = role === undefined ? undefined : s[role]?.engine?.data_parallel_size;
      const d = own ?? s.engine.data_parallel_size ?? 1;
      if (d === 1) continue;
      const path = own === undefined ? ["engine", "data_parallel_size"] : [role!, "engine", "data_parallel_size"];
      const pool = role === undefined ? "" : ` of the ${role} pool`;
      if (workers * d > MAX_WORKERS_PER_POOL) {
        ctx.addIssue({
          code: "custom",
          path,
          message: `${d} ranks per worker on ${workers} workers${pool} make ${workers * d} ranks; at most ${MAX_WORKERS_PER_POOL} ranks per pool`,
        });
      }
      if (s.kv_transfer.network !== undefined) {
        ctx.addIssue({
          code: "custom",
          path,
          message: `${d} ranks per worker${pool}: kv_transfer.network has one NIC per worker, which data-parallel ranks would share (not modelled); use data_parallel_size 1 or the private pipe (bandwidth_gbps)`,
        });
      }
    }
  });
export type Spec = z.infer<typeof SpecSchema>;
