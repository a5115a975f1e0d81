import {
  EngineOverridesSchema,
  InputError,
  MAX_DURATION_MS,
  TimingSchema,
  engineSettings,
  isGroupedProfile,
  zodIssues,
  type EngineSettings,
  type InputIssue,
  type KvTransfer,
  type Profile,
  type Timing,
  type TransferMode,
} from "@kvsim/profile-schema";
import { checkBandwidth } from "@kvsim/transfer-rules";
import { describeJson } from "./json-u64.js";

/**
 * Dynamo's `MockEngineArgs` (docs/rules/dynamo.md §3) mapped to kvsim's engine
 * settings, role, timing and transfer settings, and back. Only the vLLM engine is modelled.
 */

export type WorkerType = "aggregated" | "prefill" | "decode";

/** What a kvsim rank takes from Dynamo's engine args (the RankConfig fields besides the profile). */
export interface KvsimEngineArgs {
  readonly role: WorkerType;
  readonly engine: EngineSettings;
  readonly timing: Timing;
  /**
   * How a prefill rank prices its SourceHeld terms. Bandwidth absent: no modelled delay. The setup
   * latency (absent: 0) is paid once per transfer before its first byte; it goes into the delay the
   * driver schedules (`StartTransfer.delay_ms`), as Dynamo's timing shape has no field of its own.
   */
  readonly kvTransfer: { readonly mode: TransferMode; readonly bandwidthGbps?: number; readonly setupLatencyMs?: number };
}

/** The normalised `MockEngineArgs` JSON this adapter writes (every supported field, defaults filled). */
export interface MockEngineArgs {
  readonly engine_type: "vllm";
  readonly worker_type: WorkerType;
  readonly block_size: number;
  readonly num_gpu_blocks: number;
  /** null: unbounded. */
  readonly max_num_seqs: number | null;
  /** null: unbounded. */
  readonly max_num_batched_tokens: number | null;
  readonly max_model_len: number | null;
  readonly enable_prefix_caching: boolean;
  readonly enable_chunked_prefill: boolean;
  readonly speedup_ratio: 1;
  readonly decode_speedup_ratio: 1;
  readonly preemption_mode: "lifo";
  /** Linear profiles: the profile's rate. Grouped profiles: null (priced per cache group). */
  readonly kv_bytes_per_token: number | null;
  /** Decimal GB/s; null: no modelled transfer delay (never 0). */
  readonly kv_transfer_bandwidth: number | null;
  readonly kv_transfer_timing_mode: TransferMode;
  /** kvsim extension: ms added once to every transfer's delay (setup before the first byte); 0: none. */
  readonly kv_transfer_setup_latency_ms: number;
  /** kvsim extension: the timing model (Dynamo's default is the polynomial). */
  readonly timing_model: Timing;
}

/** Dynamo's vLLM block size when `block_size` is absent or 0 (SGLang 1 and TRT-LLM 32 are not modelled). */
export const DYNAMO_VLLM_BLOCK_SIZE = 64;

/**
 * kvsim has no "unbounded" batch limit; Dynamo's null (usize::MAX) maps to the largest count a
 * double holds exactly, and back to null.
 */
export const UNBOUNDED = Number.MAX_SAFE_INTEGER;

interface Unsupported {
  /** Values that ask for nothing (null, or a default that changes nothing) and are accepted. */
  readonly inert: readonly unknown[];
  readonly why: string;
}

const TIERS = "KVBM lower tiers and KV offload are not modelled";
const MTP = "multi-token prediction (MTP) is not modelled";
const AIC = "AIConfigurator timing is not available in kvsim: give the timing in timing_model";

/** Fields kvsim does not model, refused by name unless they hold an inert value. */
const UNSUPPORTED: Readonly<Record<string, Unsupported>> = {
  sglang: { inert: [null], why: "SGLang scheduler settings: kvsim models the vLLM engine only" },
  trtllm: { inert: [null], why: "TensorRT-LLM scheduler settings: kvsim models the vLLM engine only" },
  dp_size: { inert: [null, 1], why: "attention data parallelism: one engine session is one DP rank (run one session per rank)" },
  startup_time: { inert: [null], why: "a simulated start-up delay is not modelled" },
  planner_profile_data: { inert: [null], why: "NPZ/profiler timing data is not read: give the timing in timing_model" },
  aic_nextn: { inert: [null], why: MTP },
  aic_nextn_accept_rates: { inert: [null], why: MTP },
  aic_mtp_seed: { inert: [null, 42], why: MTP },
  gpu_memory_utilization: { inert: [null], why: "KV capacity is not estimated from GPU memory: set num_gpu_blocks" },
  mem_fraction_static: { inert: [null], why: "KV capacity is not estimated from GPU memory: set num_gpu_blocks" },
  free_gpu_memory_fraction: { inert: [null], why: "KV capacity is not estimated from GPU memory: set num_gpu_blocks" },
  enable_local_indexer: { inert: [null, false], why: "a worker-local KV indexer is not modelled: the router consumes the KV events" },
  bootstrap_port: { inert: [null], why: "the handoff transport (bootstrap connection) belongs to the driver, not the engine" },
  handoff_session_timeout_ms: { inert: [null, 300000], why: "handoff session timeouts belong to the driver's coordinator, not the engine" },
  kv_transfer_abort_timeout_ms: { inert: [null], why: "handoff abort timeouts belong to the driver's coordinator, not the engine" },
  num_g2_blocks: { inert: [null, 0], why: TIERS },
  num_g3_blocks: { inert: [null, 0], why: TIERS },
  enable_g4_storage: { inert: [null, false], why: TIERS },
  offload_batch_size: { inert: [null], why: TIERS },
  num_host_blocks: { inert: [null, 0], why: TIERS },
  reasoning: { inert: [null], why: "reasoning-token accounting is not modelled" },
  response_replay_trace_path: { inert: [null], why: "exact output token ids are not modelled" },
  zmq_kv_events_port: { inert: [null], why: "the vLLM-native ZMQ KV event wire is not served: KV events come back in the router format" },
  zmq_replay_port: { inert: [null], why: "the vLLM-native ZMQ replay socket is not served: KV events come back in the router format" },
  router_queue_policy: { inert: [null], why: "a replay-only router option, not an engine setting" },
};

/** Families of unsupported keys matched by name pattern. */
const UNSUPPORTED_PATTERNS: readonly { readonly pattern: RegExp; readonly rule: Unsupported }[] = [
  { pattern: /^(aic|ais)_/, rule: { inert: [null], why: AIC } },
  { pattern: /^bandwidth_g\d_to_g\d_gbps$/, rule: { inert: [null, 0], why: TIERS } },
  { pattern: /^host_offload_/, rule: { inert: [null], why: TIERS } },
];

const SUPPORTED = new Set([
  "engine_type",
  "worker_type",
  "is_prefill",
  "is_decode",
  "block_size",
  "num_gpu_blocks",
  "max_num_seqs",
  "max_num_batched_tokens",
  "max_model_len",
  "enable_prefix_caching",
  "enable_chunked_prefill",
  "speedup_ratio",
  "decode_speedup_ratio",
  "preemption_mode",
  "kv_bytes_per_token",
  "kv_transfer_bandwidth",
  "kv_transfer_timing_mode",
  "kv_transfer_setup_latency_ms",
  "timing_model",
]);

/** Dynamo accepts the legacy capitalised enum spellings too. */
const WORKER_TYPES: Readonly<Record<string, WorkerType>> = {
  aggregated: "aggregated",
  Aggregated: "aggregated",
  prefill: "prefill",
  Prefill: "prefill",
  decode: "decode",
  Decode: "decode",
};
const TIMING_MODES: Readonly<Record<string, TransferMode>> = {
  full_prompt: "full_prompt",
  FullPrompt: "full_prompt",
  destination_missing: "destination_missing",
  DestinationMissing: "destination_missing",
};

/** `table[key]` for an own key only, so `__proto__` or `constructor` never reads Object.prototype. */
const own = <T>(table: Readonly<Record<string, T>>, key: string): T | undefined => (Object.hasOwn(table, key) ? table[key] : undefined);

function unsupportedRule(key: string): Unsupported | undefined {
  return own(UNSUPPORTED, key) ?? UNSUPPORTED_PATTERNS.find((p) => p.pattern.test(key))?.rule;
}

const has = (o: Record<string, unknown>, key: string): boolean => Object.hasOwn(o, key);

/** The full-attention block size of a grouped profile, when all its full-attention groups share one. */
function groupedBlockSize(profile: Profile): number | undefined {
  const sizes = new Set((profile.kv_cache_groups ?? []).filter((g) => g.kind === "full_attention").map((g) => g.block_size_tokens));
  return sizes.size === 1 ? [...sizes][0] : undefined;
}

/**
 * Maps Dynamo's `MockEngineArgs` JSON (already parsed) to kvsim's rank settings for `profile`.
 * Strict: unknown keys, fields kvsim does not model (unless inert) and invalid values are refused,
 * each issue naming its field; throws `InputError` listing all of them.
 *
 * Defaults are the reference's vLLM ones: block 64, 16384 blocks, 256 sequences, 8192 batched
 * tokens, prefix caching and chunked prefill on, worker_type aggregated, full_prompt timing mode,
 * no transfer bandwidth (the Rust engine default; 0 also means "off"), polynomial timing.
 * Speedup ratios other than 1 are refused: the protocol reports modelled milliseconds and the
 * driver owns wall-clock scaling.
 */
export function fromMockEngineArgs(json: unknown, profile: Profile, file = "<engine args>"): KvsimEngineArgs {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    const got = Array.isArray(json) ? "an array" : json === null ? "null" : `a ${typeof json}`;
    throw new InputError(file, [{ path: "", message: `engine args must be a JSON object of Dynamo MockEngineArgs fields, got ${got}` }]);
  }
  const args = json as Record<string, unknown>;
  const issues: InputIssue[] = [];
  const issue = (path: string, message: string) => issues.push({ path, message });

  for (const [key, value] of Object.entries(args)) {
    if (SUPPORTED.has(key)) continue;
    const rule = unsupportedRule(key);
    if (rule === undefined) issue(key, "unknown key");
    else if (!rule.inert.includes(value)) issue(key, `is not supported: ${rule.why}`);
  }

  // engine_type: vLLM only.
  const engineType = args.engine_type;
  if (engineType !== undefined && engineType !== "vllm" && engineType !== "Vllm") {
    if (engineType === "sglang" || engineType === "Sglang" || engineType === "trtllm" || engineType === "Trtllm" || engineType === "TrtLlm") {
      issue("engine_type", `${engineType} is not supported: kvsim models the vLLM engine only`);
    } else {
      issue("engine_type", `must be vllm, got ${describeJson(engineType)}`);
    }
  }

  // Role: worker_type, or the legacy is_prefill / is_decode flags.
  let role: WorkerType = "aggregated";
  for (const flag of ["is_prefill", "is_decode"] as const) {
    if (has(args, flag) && typeof args[flag] !== "boolean") issue(flag, "must be a boolean");
  }
  const isPrefill = args.is_prefill === true;
  const isDecode = args.is_decode === true;
  if (isPrefill && isDecode) issue("is_decode", "is_prefill and is_decode cannot both be true");
  const legacyRole: WorkerType | undefined = isPrefill ? "prefill" : isDecode ? "decode" : undefined;
  if (has(args, "worker_type")) {
    const w = typeof args.worker_type === "string" ? own(WORKER_TYPES, args.worker_type) : undefined;
    if (w === undefined) issue("worker_type", `must be aggregated, prefill or decode, got ${describeJson(args.worker_type)}`);
    else {
      role = w;
      if (legacyRole !== undefined && legacyRole !== w) issue("worker_type", `is ${w} but the legacy flag says ${legacyRole}`);
    }
  } else if (legacyRole !== undefined) {
    role = legacyRole;
  }

  // Speedups: modelled milliseconds only.
  for (const key of ["speedup_ratio", "decode_speedup_ratio"] as const) {
    if (has(args, key) && args[key] !== 1) {
      issue(key, `must be 1, got ${describeJson(args[key])}: kvsim reports modelled milliseconds and the driver owns wall-clock scaling`);
    }
  }

  if (has(args, "preemption_mode") && args.preemption_mode !== "lifo" && args.preemption_mode !== "Lifo") {
    const fifo = args.preemption_mode === "fifo" || args.preemption_mode === "Fifo";
    issue(
      "preemption_mode",
      fifo
        ? "fifo is not supported: kvsim preempts as vLLM v1 does, the tail of the running list (lifo)"
        : `must be lifo, got ${describeJson(args.preemption_mode)}`,
    );
  }

  // block_size: 0 or absent materialises Dynamo's vLLM default; a grouped profile takes it from its groups.
  const grouped = isGroupedProfile(profile);
  let blockSize: number | undefined;
  const rawBlock = args.block_size ?? 0;
  if (typeof rawBlock !== "number" || !Number.isSafeInteger(rawBlock) || rawBlock < 0 || rawBlock === 1) {
    issue("block_size", `must be an integer >= 2 (or 0 for the default), got ${describeJson(args.block_size)}`);
  } else if (grouped) {
    const b = groupedBlockSize(profile);
    if (rawBlock !== 0 && rawBlock !== b) {
      issue(
        "block_size",
        `is ${rawBlock} but a grouped profile takes its block size from its full-attention groups (${b === undefined ? "which do not share one" : `${b} tokens`})`,
      );
    }
  } else {
    blockSize = rawBlock === 0 ? DYNAMO_VLLM_BLOCK_SIZE : rawBlock;
  }

  // Batch limits: null is unbounded.
  const limit = (key: "max_num_seqs" | "max_num_batched_tokens"): number | undefined => (args[key] === null ? UNBOUNDED : (args[key] as number | undefined));

  const overrides = {
    num_gpu_blocks: args.num_gpu_blocks,
    ...(blockSize === undefined ? {} : { block_size: blockSize }),
    max_num_seqs: limit("max_num_seqs"),
    max_num_batched_tokens: limit("max_num_batched_tokens"),
    max_model_len: args.max_model_len ?? undefined,
    enable_prefix_caching: args.enable_prefix_caching,
    enable_chunked_prefill: args.enable_chunked_prefill,
  };
  let engine: EngineSettings | undefined;
  const parsedEngine = EngineOverridesSchema.safeParse(overrides, { reportInput: true });
  if (parsedEngine.success) engine = engineSettings(parsedEngine.data);
  else issues.push(...zodIssues(parsedEngine.error));

  // kv_bytes_per_token: the profile prices the KV; a given value must agree with it.
  const bpt = args.kv_bytes_per_token;
  if (bpt !== undefined && bpt !== null) {
    if (typeof bpt !== "number" || !Number.isSafeInteger(bpt) || bpt <= 0) issue("kv_bytes_per_token", `must be an integer > 0, got ${describeJson(bpt)}`);
    else if (grouped) {
      issue(
        "kv_bytes_per_token",
        "must be null for a grouped profile: its handoff is priced per cache group (block bytes plus fixed window/state bytes), which one per-token rate cannot carry",
      );
    } else if (bpt !== profile.kv_bytes_per_token) {
      issue(
        "kv_bytes_per_token",
        `is ${bpt} but the profile's kv_bytes_per_token is ${profile.kv_bytes_per_token ?? "absent"}; kvsim prices KV from the profile`,
      );
    }
  }

  // kv_transfer_bandwidth: decimal GB/s; null, absent or 0 mean "off" (an absent value in kvsim).
  let bandwidthGbps: number | undefined;
  const bw = args.kv_transfer_bandwidth;
  if (bw !== undefined && bw !== null) {
    if (typeof bw !== "number" || !Number.isFinite(bw) || bw < 0)
      issue("kv_transfer_bandwidth", `must be a finite number of GB/s >= 0 (0 or null: no transfer delay), got ${describeJson(bw)}`);
    else if (bw > 0) {
      const why = checkBandwidth(bw);
      if (why === undefined) bandwidthGbps = bw;
      else issue("kv_transfer_bandwidth", `${why} (0 or null: no transfer delay)`);
    }
  }

  let mode: TransferMode = "full_prompt";
  if (has(args, "kv_transfer_timing_mode")) {
    const m = typeof args.kv_transfer_timing_mode === "string" ? own(TIMING_MODES, args.kv_transfer_timing_mode) : undefined;
    if (m === undefined) issue("kv_transfer_timing_mode", `must be full_prompt or destination_missing, got ${describeJson(args.kv_transfer_timing_mode)}`);
    else mode = m;
  }

  // kv_transfer_setup_latency_ms (kvsim extension): ms per transfer; null, absent or 0: none.
  let setupLatencyMs: number | undefined;
  const setup = args.kv_transfer_setup_latency_ms;
  if (setup !== undefined && setup !== null) {
    if (typeof setup !== "number" || !Number.isFinite(setup) || setup < 0 || setup > MAX_DURATION_MS) {
      issue("kv_transfer_setup_latency_ms", `must be a number of ms in [0, ${MAX_DURATION_MS}], got ${JSON.stringify(setup)}`);
    } else if (setup > 0) setupLatencyMs = setup;
  }

  let timing: Timing = { type: "polynomial" };
  if (has(args, "timing_model")) {
    const parsedTiming = TimingSchema.safeParse(args.timing_model, { reportInput: true });
    if (parsedTiming.success) timing = parsedTiming.data;
    else issues.push(...zodIssues(parsedTiming.error).map((i) => ({ ...i, path: i.path === "" ? "timing_model" : `timing_model.${i.path}` })));
  }

  if (issues.length > 0 || engine === undefined) throw new InputError(file, issues);
  const kvTransfer = { mode, ...(bandwidthGbps === undefined ? {} : { bandwidthGbps }), ...(setupLatencyMs === undefined ? {} : { setupLatencyMs }) };
  return { role, engine, timing, kvTransfer };
}

/** A conversion that can fail, with the reason. */
export type Conversion<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: string };

/**
 * Writes kvsim's rank settings back as normalised `MockEngineArgs` (every supported field, defaults
 * filled). Fails when a setting has no Dynamo field (`long_prefill_token_threshold` other than 0,
 * `async_scheduling`, `scheduler_reserve_full_isl`, `enable_expert_parallel`) or describes more than
 * one rank (`data_parallel_size` above 1).
 */
export function toMockEngineArgs(args: KvsimEngineArgs, profile: Profile): Conversion<MockEngineArgs> {
  const e = args.engine;
  if (e.long_prefill_token_threshold !== 0) {
    return {
      ok: false,
      reason: `long_prefill_token_threshold ${e.long_prefill_token_threshold} has no MockEngineArgs field (Dynamo caps no per-request chunk)`,
    };
  }
  for (const key of ["async_scheduling", "scheduler_reserve_full_isl", "enable_expert_parallel"] as const) {
    if (e[key]) return { ok: false, reason: `${key} has no MockEngineArgs field` };
  }
  if (e.data_parallel_size !== 1) return { ok: false, reason: `data_parallel_size ${e.data_parallel_size}: one kvsim rank serves one data-parallel rank` };
  const grouped = isGroupedProfile(profile);
  const blockSize = grouped ? groupedBlockSize(profile) : (e.block_size ?? DYNAMO_VLLM_BLOCK_SIZE);
  if (blockSize === undefined)
    return { ok: false, reason: "the profile's full-attention groups do not share one block size, so block_size has no single value" };
  if (grouped && e.block_size !== undefined)
    return { ok: false, reason: "engine block_size is set but a grouped profile takes its block size from its groups" };
  const bound = (n: number) => (n === UNBOUNDED ? null : n);
  return {
    ok: true,
    value: {
      engine_type: "vllm",
      worker_type: args.role,
      block_size: blockSize,
      num_gpu_blocks: e.num_gpu_blocks,
      max_num_seqs: bound(e.max_num_seqs),
      max_num_batched_tokens: bound(e.max_num_batched_tokens),
      max_model_len: e.max_model_len ?? null,
      enable_prefix_caching: e.enable_prefix_caching,
      enable_chunked_prefill: e.enable_chunked_prefill,
      speedup_ratio: 1,
      decode_speedup_ratio: 1,
      preemption_mode: "lifo",
      kv_bytes_per_token: grouped ? null : (profile.kv_bytes_per_token ?? null),
      kv_transfer_bandwidth: args.kvTransfer.bandwidthGbps ?? null,
      kv_transfer_timing_mode: args.kvTransfer.mode,
      kv_transfer_setup_latency_ms: args.kvTransfer.setupLatencyMs ?? 0,
      timing_model: args.timing,
    },
  };
}

/** The transfer fields of `MockEngineArgs` that a kvsim spec's `kv_transfer` maps to. */
export type DynamoKvTransfer = Pick<MockEngineArgs, "kv_transfer_bandwidth" | "kv_transfer_timing_mode" | "kv_transfer_setup_latency_ms">;

/**
 * A kvsim spec's `kv_transfer` in Dynamo's engine args: the bandwidth (decimal GB/s, null when
 * absent), the timing mode, and the setup latency (the kvsim extension that the adapter adds to
 * every `StartTransfer.delay_ms`, the one place Dynamo's timing has a field for it).
 *
 * Refuses, naming each, what Dynamo would drop: a shared network (`network.nic`,
 * `network.max_concurrent_transfers`, `network.nodes`: Dynamo fixes each handoff's delay when it
 * starts, at line rate, so transfers never share a link or wait for one) and a fallback latency
 * (Dynamo turns a timing without bandwidth into 0 ms).
 */
export function toDynamoKvTransfer(kvTransfer: KvTransfer): Conversion<DynamoKvTransfer> {
  const dropped: string[] = [];
  const net = kvTransfer.network;
  if (net !== undefined) {
    dropped.push("kv_transfer.network.nic (Dynamo prices each handoff alone at line rate when it starts; concurrent transfers do not share a NIC)");
    if (net.max_concurrent_transfers !== undefined)
      dropped.push("kv_transfer.network.max_concurrent_transfers (Dynamo starts every transfer at once; there is no per-NIC queue)");
    if (net.nodes !== undefined) dropped.push("kv_transfer.network.nodes (Dynamo has one bandwidth for every pair of workers; there is no intra-node link)");
  }
  if (kvTransfer.fallback_latency_ms > 0) {
    dropped.push(
      `kv_transfer.fallback_latency_ms (${kvTransfer.fallback_latency_ms} ms: Dynamo charges 0 ms for a timing without bandwidth; use setup_latency_ms)`,
    );
  }
  if (dropped.length > 0) return { ok: false, reason: `Dynamo's engine args would drop ${dropped.join("; ")}` };
  return {
    ok: true,
    value: {
      kv_transfer_bandwidth: kvTransfer.bandwidth_gbps ?? null,
      kv_transfer_timing_mode: kvTransfer.mode,
      kv_transfer_setup_latency_ms: kvTransfer.setup_latency_ms ?? 0,
    },
  };
}
