import { GPU_DATASHEETS, InputError, type InputIssue } from "@kvsim/profile-schema";

/**
 * A vLLM deployment as a kvsim spec needs it: the model, vLLM's version and TP, the spec's
 * `engine` settings, the GPU (when known), and notes on what was assumed or is not modelled.
 */
export interface VllmDeployment {
  readonly source: "meta" | "serve-args";
  readonly model: string | undefined;
  readonly vllmVersion: string | undefined;
  readonly tensorParallelSize: number;
  /** The spec's `engine` keys, in the order a spec lists them. */
  readonly engine: Readonly<Record<string, unknown>>;
  /** The GPU's name in kvsim's catalog (`kvsim gpus`), when the run names a GPU kvsim knows. */
  readonly gpu: string | undefined;
  /** What the run says the GPU is, as written (meta.json's hardware.device_name). */
  readonly deviceName: string | undefined;
  readonly notes: readonly string[];
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);
const normal = (s: string) => s.toLowerCase().replace(/nvidia|geforce|[^a-z0-9]/g, "");

/**
 * kvsim's GPU for a CUDA device name ("NVIDIA GeForce RTX 4090" -> RTX-4090, "NVIDIA H100 80GB
 * HBM3" -> H100-80GB): the catalog name or alias that is the longest prefix of the device name,
 * letters and digits only, ignoring case and the words NVIDIA and GeForce. Undefined when none is.
 */
export function gpuForDevice(deviceName: string): string | undefined {
  const device = normal(deviceName);
  let best: { name: string; length: number } | undefined;
  for (const g of GPU_DATASHEETS) {
    for (const n of [g.name, ...g.aliases]) {
      const key = normal(n);
      if (key !== "" && device.startsWith(key) && (best === undefined || key.length > best.length)) best = { name: g.name, length: key.length };
    }
  }
  return best?.name;
}

/** Reads the fields of a value by dotted path, for meta.json's nested configs. */
function at(root: unknown, path: string): unknown {
  let v = root;
  for (const k of path.split(".")) v = isRecord(v) ? v[k] : undefined;
  return v;
}

/**
 * The deployment of a run's meta.json (as the shared vLLM runs record it: engine_kwargs, kv_cache,
 * hardware and resolved_config). Settings the run does not record take vLLM's defaults (async
 * scheduling and full-sequence reservation on), and the notes say so. Throws an InputError naming
 * `file` and the field when one has the wrong type.
 */
export function deploymentFromMeta(meta: unknown, file: string): VllmDeployment {
  if (!isRecord(meta)) throw new InputError(file, [{ path: "", message: "is not a vLLM run's meta.json (expected a JSON object with engine_kwargs)" }]);
  const issues: InputIssue[] = [];
  const notes: string[] = [];
  const num = (path: string, integer = true, zero = false): number | undefined => {
    const v = at(meta, path);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || (v === 0 && !zero) || (integer && !Number.isSafeInteger(v))) {
      issues.push({ path, message: `must be a ${zero ? "non-negative" : "positive"} ${integer ? "whole " : ""}number (got ${JSON.stringify(v)})` });
      return undefined;
    }
    return v;
  };
  const bool = (path: string): boolean | undefined => {
    const v = at(meta, path);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "boolean") {
      issues.push({ path, message: `must be true or false (got ${JSON.stringify(v)})` });
      return undefined;
    }
    return v;
  };
  if (!isRecord(meta.engine_kwargs))
    issues.push({ path: "engine_kwargs", message: "is required: the engine arguments of the run (max_num_seqs, max_num_batched_tokens, ...)" });
  const model =
    typeof meta.model === "string" ? meta.model : typeof at(meta, "engine_kwargs.model") === "string" ? (at(meta, "engine_kwargs.model") as string) : undefined;
  const vllmVersion = typeof meta.vllm_version === "string" ? meta.vllm_version : undefined;
  const tp = num("engine_kwargs.tensor_parallel_size") ?? num("resolved_config.parallel_config.tensor_parallel_size") ?? 1;
  const dp = num("engine_kwargs.data_parallel_size") ?? num("resolved_config.parallel_config.data_parallel_size") ?? 1;
  const blocks = num("kv_cache.num_gpu_blocks") ?? num("resolved_config.cache_config.num_gpu_blocks");
  const utilization = num("kv_cache.gpu_memory_utilization", false) ?? num("resolved_config.cache_config.gpu_memory_utilization", false);
  const sizes = at(meta, "resolved_config.compilation_config.cudagraph_capture_sizes");
  const eager = bool("engine_kwargs.enforce_eager") ?? bool("resolved_config.model_config.enforce_eager") ?? false;
  const threshold = num("resolved_config.scheduler_config.long_prefill_token_threshold", true, true);
  const defaulted = (value: boolean | undefined, name: string): boolean => {
    if (value !== undefined) return value;
    notes.push(`${name}: not recorded in the run, vLLM's default (on) assumed`);
    return true;
  };
  const all: Record<string, unknown> = {
    ...(blocks === undefined ? {} : { num_gpu_blocks: blocks }),
    block_size: num("kv_cache.block_size") ?? num("resolved_config.cache_config.block_size") ?? 16,
    max_num_batched_tokens: num("engine_kwargs.max_num_batched_tokens") ?? num("resolved_config.scheduler_config.max_num_batched_tokens"),
    max_num_seqs: num("engine_kwargs.max_num_seqs") ?? num("resolved_config.scheduler_config.max_num_seqs"),
    max_model_len: num("engine_kwargs.max_model_len") ?? num("resolved_config.model_config.max_model_len"),
    enable_prefix_caching: bool("kv_cache.enable_prefix_caching") ?? bool("resolved_config.cache_config.enable_prefix_caching") ?? true,
    enable_chunked_prefill: bool("resolved_config.scheduler_config.enable_chunked_prefill") ?? true,
    ...(threshold === undefined || threshold === 0 ? {} : { long_prefill_token_threshold: threshold }),
    async_scheduling: defaulted(bool("resolved_config.scheduler_config.async_scheduling"), "async_scheduling"),
    scheduler_reserve_full_isl: defaulted(bool("resolved_config.scheduler_config.scheduler_reserve_full_isl"), "scheduler_reserve_full_isl"),
    ...(!eager && Array.isArray(sizes) && sizes.length > 0 && sizes.every((s) => Number.isSafeInteger(s) && (s as number) > 0)
      ? { cudagraph_capture_sizes: [...new Set(sizes as number[])].sort((a, b) => a - b) }
      : {}),
    ...(dp > 1
      ? {
          data_parallel_size: dp,
          enable_expert_parallel: bool("engine_kwargs.enable_expert_parallel") ?? bool("resolved_config.parallel_config.enable_expert_parallel") ?? false,
        }
      : {}),
    ...(blocks === undefined && utilization !== undefined ? { gpu_memory_utilization: utilization } : {}),
    ...(eager ? { cuda_graph_memory_gib: 0 } : {}),
  };
  const engine = Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined));
  if (issues.length > 0) throw new InputError(file, issues);
  const deviceName = typeof at(meta, "hardware.device_name") === "string" ? (at(meta, "hardware.device_name") as string) : undefined;
  const gpu = deviceName === undefined ? undefined : gpuForDevice(deviceName);
  if (deviceName !== undefined && gpu === undefined)
    notes.push(`hardware.device_name "${deviceName}" is no GPU kvsim knows (kvsim gpus lists them): describe it inline in engine.gpu for the roofline`);
  return { source: "meta", model, vllmVersion, tensorParallelSize: tp, engine, gpu, deviceName, notes };
}

/** `vllm serve` flags kvsim maps to spec fields, by flag name (without --): the engine key and the value's kind. */
const SERVE_FLAGS: Readonly<Record<string, { readonly key: string; readonly kind: "int" | "tokens" | "fraction" | "bool" }>> = {
  "max-num-seqs": { key: "max_num_seqs", kind: "int" },
  "max-num-batched-tokens": { key: "max_num_batched_tokens", kind: "tokens" },
  "max-model-len": { key: "max_model_len", kind: "tokens" },
  "block-size": { key: "block_size", kind: "int" },
  "num-gpu-blocks-override": { key: "num_gpu_blocks", kind: "int" },
  "long-prefill-token-threshold": { key: "long_prefill_token_threshold", kind: "tokens" },
  "data-parallel-size": { key: "data_parallel_size", kind: "int" },
  "gpu-memory-utilization": { key: "gpu_memory_utilization", kind: "fraction" },
  "enable-prefix-caching": { key: "enable_prefix_caching", kind: "bool" },
  "enable-chunked-prefill": { key: "enable_chunked_prefill", kind: "bool" },
  "async-scheduling": { key: "async_scheduling", kind: "bool" },
  "scheduler-reserve-full-isl": { key: "scheduler_reserve_full_isl", kind: "bool" },
  "enable-expert-parallel": { key: "enable_expert_parallel", kind: "bool" },
  "enforce-eager": { key: "enforce_eager", kind: "bool" },
};
/** Short forms vLLM accepts. */
const SHORT_FLAGS: Readonly<Record<string, string>> = { tp: "tensor-parallel-size", dp: "data-parallel-size", O: "compilation-config" };
/** Flags that take a value but do not change what kvsim models (served names, ports, logging, ...). */
const IGNORED_WITH_VALUE = new Set([
  "host",
  "port",
  "served-model-name",
  "seed",
  "api-key",
  "uvicorn-log-level",
  "tokenizer",
  "revision",
  "download-dir",
  "load-format",
  "trust-remote-code",
  "chat-template",
  "root-path",
  "max-log-len",
  "disable-log-stats",
  "disable-log-requests",
  "config",
]);

/**
 * A token count as vLLM reads one: digits, or with a suffix k/m/g (thousands, millions,
 * billions) or K/M/G (powers of 1024): 32k = 32,000, 32K = 32,768.
 */
export function parseTokenCount(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)([kmgKMG]?)$/.exec(text.trim());
  if (m === null) return undefined;
  const scale: Record<string, number> = { "": 1, k: 1e3, m: 1e6, g: 1e9, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30 };
  const v = Number(m[1]) * scale[m[2]!]!;
  return Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

/** Splits a shell-like argument string: spaces separate, single and double quotes group. */
export function splitArgs(text: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quote: string | undefined;
  let has = false;
  for (const c of text) {
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else cur += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      has = true;
    } else if (/\s/.test(c)) {
      if (has || cur !== "") out.push(cur);
      cur = "";
      has = false;
    } else if (c !== "\\") {
      cur += c;
    }
  }
  if (quote !== undefined) throw new InputError("<vllm serve arguments>", [{ path: "", message: `a ${quote} quote is not closed` }]);
  if (has || cur !== "") out.push(cur);
  return out;
}

/**
 * The deployment of `vllm serve` arguments (`[vllm serve] [MODEL] --max-num-seqs 128
 * --max-num-batched-tokens 8192 --tensor-parallel-size 2 --async-scheduling ...`): `--flag
 * value`, `--flag=value`, `--no-flag` for booleans, and `--compilation-config` JSON (its
 * cudagraph_capture_sizes). Settings not given take vLLM's defaults where kvsim's differ (async
 * scheduling and full-sequence reservation on); flags kvsim does not model are listed in the
 * notes. Throws an InputError naming the flag of a bad value.
 */
export function deploymentFromServeArgs(argv: readonly string[]): VllmDeployment {
  const file = "<vllm serve arguments>";
  const args = argv.length === 1 ? splitArgs(argv[0]!) : [...argv];
  if (args[0] === "vllm") args.shift();
  if (args[0] === "serve") args.shift();
  const issues: InputIssue[] = [];
  const notes: string[] = [];
  const ignored: string[] = [];
  const set: Record<string, unknown> = {};
  let model: string | undefined;
  let tp = 1;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!arg.startsWith("-")) {
      if (model === undefined) model = arg;
      else issues.push({ path: arg, message: "is a second positional argument: vllm serve takes one model" });
      continue;
    }
    const eq = arg.indexOf("=");
    let name = (eq >= 0 ? arg.slice(0, eq) : arg).replace(/^--?/, "");
    name = SHORT_FLAGS[name] ?? name;
    // vLLM accepts --max_num_seqs too.
    name = name.replaceAll("_", "-");
    const inline = eq >= 0 ? arg.slice(eq + 1) : undefined;
    const takeValue = (): string | undefined => {
      if (inline !== undefined) return inline;
      const next = args[i + 1];
      if (next === undefined || (next.startsWith("--") && next.length > 2)) {
        issues.push({ path: `--${name}`, message: "needs a value" });
        return undefined;
      }
      i++;
      return next;
    };
    if (name === "model") {
      model = takeValue();
      continue;
    }
    if (name === "tensor-parallel-size") {
      const v = takeValue();
      const n = v === undefined ? undefined : Number(v);
      if (n === undefined || !Number.isSafeInteger(n) || n < 1)
        issues.push({ path: "--tensor-parallel-size", message: `must be a whole number of at least 1 (got ${JSON.stringify(v)})` });
      else tp = n;
      continue;
    }
    if (name === "compilation-config") {
      const v = takeValue();
      if (v === undefined) continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(v);
      } catch {
        issues.push({ path: "--compilation-config", message: `must be JSON, e.g. '{"cudagraph_capture_sizes": [1, 2, 4, 8]}' (got ${JSON.stringify(v)})` });
        continue;
      }
      const sizes = isRecord(parsed) ? parsed.cudagraph_capture_sizes : undefined;
      if (sizes !== undefined) set.cudagraph_capture_sizes = sizes;
      continue;
    }
    if (name === "cuda-graph-sizes" || name === "cudagraph-capture-sizes") {
      // Sizes follow as separate arguments (nargs) or as one comma- or space-separated value.
      const values: string[] = inline === undefined ? [] : inline.split(/[\s,]+/);
      while (inline === undefined && args[i + 1] !== undefined && !args[i + 1]!.startsWith("-")) values.push(...args[++i]!.split(/[\s,]+/));
      const sizes = values.filter((v) => v !== "").map(Number);
      if (sizes.length === 0 || !sizes.every((s) => Number.isSafeInteger(s) && s > 0))
        issues.push({ path: `--${name}`, message: `must list positive whole numbers (got ${JSON.stringify(values.join(" "))})` });
      else set.cudagraph_capture_sizes = [...new Set(sizes)].sort((a, b) => a - b);
      continue;
    }
    const negated = name.startsWith("no-") && SERVE_FLAGS[name.slice(3)]?.kind === "bool";
    const flag = SERVE_FLAGS[negated ? name.slice(3) : name];
    if (flag === undefined) {
      // An unknown flag's value (if any) is the next argument that does not start with a dash.
      if (inline === undefined && args[i + 1] !== undefined && !args[i + 1]!.startsWith("-")) i++;
      if (!IGNORED_WITH_VALUE.has(name)) ignored.push(`--${name}`);
      continue;
    }
    if (flag.kind === "bool") {
      if (inline !== undefined && !/^(true|false)$/i.test(inline))
        issues.push({ path: `--${name}`, message: `takes no value, or true or false (got ${JSON.stringify(inline)})` });
      set[flag.key] = negated ? false : inline === undefined || /^true$/i.test(inline);
      continue;
    }
    const v = takeValue();
    if (v === undefined) continue;
    const n = flag.kind === "tokens" ? parseTokenCount(v) : Number(v);
    const ok =
      n !== undefined &&
      Number.isFinite(n) &&
      (flag.kind === "fraction" ? n > 0 && n <= 1 : Number.isSafeInteger(n) && n >= (flag.key === "long_prefill_token_threshold" ? 0 : 1));
    const least = flag.key === "long_prefill_token_threshold" ? 0 : 1;
    if (!ok)
      issues.push({
        path: `--${name}`,
        message:
          flag.kind === "fraction"
            ? `must be in (0, 1] (got ${JSON.stringify(v)})`
            : `must be a whole number of at least ${least}${flag.kind === "tokens" ? " (or with k, K, m, M)" : ""} (got ${JSON.stringify(v)})`,
      });
    else set[flag.key] = n;
  }
  if (issues.length > 0) throw new InputError(file, issues);
  const eager = set.enforce_eager === true;
  delete set.enforce_eager;
  const dp = typeof set.data_parallel_size === "number" ? set.data_parallel_size : 1;
  const defaulted = (key: string): boolean => {
    if (typeof set[key] === "boolean") return set[key];
    notes.push(`${key}: not given, vLLM's default (on) assumed`);
    return true;
  };
  const engine: Record<string, unknown> = {
    ...(set.num_gpu_blocks === undefined ? {} : { num_gpu_blocks: set.num_gpu_blocks }),
    block_size: set.block_size ?? 16,
    ...pick(set, ["max_num_batched_tokens", "max_num_seqs", "max_model_len"]),
    enable_prefix_caching: set.enable_prefix_caching ?? true,
    enable_chunked_prefill: set.enable_chunked_prefill ?? true,
    ...pick(set, ["long_prefill_token_threshold"]),
    async_scheduling: defaulted("async_scheduling"),
    scheduler_reserve_full_isl: defaulted("scheduler_reserve_full_isl"),
    ...(eager ? {} : pick(set, ["cudagraph_capture_sizes"])),
    ...(dp > 1 ? { data_parallel_size: dp, enable_expert_parallel: set.enable_expert_parallel ?? false } : {}),
    ...pick(set, ["gpu_memory_utilization"]),
    ...(eager ? { cuda_graph_memory_gib: 0 } : {}),
  };
  for (const k of ["max_num_batched_tokens", "max_num_seqs"])
    if (engine[k] === undefined) notes.push(`${k}: not given, kvsim's default (vLLM's: 8192 tokens and 256 sequences for vllm serve)`);
  if (set.enable_expert_parallel === true && dp <= 1)
    notes.push("--enable-expert-parallel without --data-parallel-size: kvsim models expert parallelism across data-parallel ranks only");
  if (ignored.length > 0) notes.push(`not modelled, left out: ${ignored.join(", ")}`);
  return { source: "serve-args", model, vllmVersion: undefined, tensorParallelSize: tp, engine, gpu: undefined, deviceName: undefined, notes };
}

function pick(from: Readonly<Record<string, unknown>>, keys: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => from[k] !== undefined).map((k) => [k, from[k]]));
}

export interface SpecFromVllmOptions {
  /** The spec's `profile`: a path as the spec should say it (relative to the spec's folder). */
  readonly profile: string;
  /** The spec's workload trace, as the spec should say it, and its format (default kvsim). */
  readonly trace?: string;
  readonly format?: "kvsim" | "mooncake" | "azure";
  /** The timing; default: the roofline on the run's GPU when kvsim knows it, else the profile's tables. */
  readonly timing?: Readonly<Record<string, unknown>>;
  /** A GPU (kvsim's name) to use when the deployment names none. */
  readonly gpu?: string;
}

/**
 * The replay spec of a deployment: one aggregated worker with the run's engine settings, the
 * given profile and trace (a 100-request synthetic placeholder without a trace), and a timing a
 * calibration can start from. `engine.gpu` is set when the timing is the roofline (it needs the
 * GPU's datasheet). Returns the spec (plain data, ready for YAML) and the notes.
 */
export function specFromVllm(d: VllmDeployment, opts: SpecFromVllmOptions): { spec: Record<string, unknown>; notes: string[] } {
  const notes = [...d.notes];
  const gpu = opts.gpu ?? d.gpu;
  const timing: Record<string, unknown> = opts.timing === undefined ? (gpu === undefined ? { type: "profile" } : { type: "roofline" }) : { ...opts.timing };
  if (opts.timing === undefined) {
    notes.push(
      gpu === undefined
        ? "timing: the profile's forward_pass tables (no GPU known for the roofline: give --gpu); kvsim calibrate fits a timing to a run of this deployment"
        : `timing: the roofline on ${gpu}'s datasheet with shipped efficiencies; kvsim calibrate fits them to a run of this deployment`,
    );
  }
  // The GPU goes in the engine when the roofline prices steps on it, or when it sizes the pool.
  const sized = d.engine.num_gpu_blocks === undefined;
  const engine = { ...d.engine, ...(gpu !== undefined && (timing.type === "roofline" || sized) ? { gpu } : {}) };
  if (sized) {
    notes.push(
      gpu === undefined
        ? "num_gpu_blocks: not recorded, and no GPU to size the pool from its memory as vLLM does: give --gpu, or set num_gpu_blocks from vLLM's log line \"GPU KV cache size: N tokens\" (N / block_size); kvsim's default is 16384"
        : `num_gpu_blocks: not recorded: sized from ${gpu}'s memory as vLLM does (gpu_memory_utilization ${typeof d.engine.gpu_memory_utilization === "number" ? d.engine.gpu_memory_utilization : 0.9}, the profile's weights); vLLM's log line "GPU KV cache size: N tokens" gives the real one (N / block_size)`,
    );
  }
  const workload =
    opts.trace === undefined
      ? { synthetic: { requests: 100, input_tokens: 1024, output_tokens: 128, rate_per_s: 1 } }
      : { trace: opts.trace, format: opts.format ?? "kvsim" };
  if (opts.trace === undefined)
    notes.push("workload: a synthetic placeholder (100 requests of 1024 + 128 tokens at 1 req/s): give --trace, e.g. from kvsim trace from-measured");
  return {
    spec: { version: 1, profile: opts.profile, topology: { kind: "aggregated", workers: 1 }, engine, timing, workload },
    notes,
  };
}
