import { InputError, validateProfile, VllmVersionSchema, type InputIssue, type ModelShape, type Profile } from "@kvsim/profile-schema";
import { ConfigReader, isObject, shortJson } from "./config.js";
import { visionTowerParts } from "./dense-families.js";
import { ARCHITECTURES, KNOWN_ARCHITECTURES } from "./families.js";
import { dtypeBytes, optDtype, type FamilyName, type ModelDescription } from "./family-parts.js";
import { layoutCache } from "./layout.js";

/** KV cache dtypes as vLLM's `--kv-cache-dtype` spells them. */
export const KV_CACHE_DTYPES = ["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"] as const;
export type KvCacheDtype = (typeof KV_CACHE_DTYPES)[number];

/** The vLLM release a derived profile names unless told otherwise (the newest P/D-gated one). */
export const DEFAULT_VLLM_VERSION = "0.32.0";

/**
 * Bytes of the sampler's working set per sequence and vocabulary entry in vLLM's profile run:
 * the logits in the model dtype (2) and in float32 (4), their sort (4 for the values, 8 for the
 * int64 indices), softmax (4) and cumulative sum (4) for top-k/top-p: 26 bytes.
 */
export const SAMPLER_BYTES_PER_VOCAB_ENTRY = 26;

export interface HfProfileOptions {
  readonly tensorParallelSize: number;
  /** Default "auto": the model dtype. */
  readonly kvCacheDtype?: KvCacheDtype | undefined;
  /** The literal vLLM version the profile names (default 0.32.0). */
  readonly vllmVersion?: string | undefined;
  /** vLLM's `--block-size`: raised where vLLM raises it, never lowered. */
  readonly blockSize?: number | undefined;
  /** The profile's model name (default: the config's `_name_or_path`, else its architecture). */
  readonly model?: string | undefined;
  /** Names the config in errors (default `<config>`). */
  readonly file?: string;
}

export interface HfProfile {
  readonly profile: Profile;
  readonly architecture: string;
  readonly family: FamilyName;
  /** A linear profile runs with the engine's block size: the one to set (16 unless --block-size). */
  readonly engineBlockSize?: number;
  /** Parameters on one rank (all of them when the weights are not estimated). */
  readonly parametersPerRank: number;
  /** The rules applied, one line each, for the CLI to print. */
  readonly notes: readonly string[];
}

const n = (v: number) => v.toLocaleString("en-US");

/** How the checkpoint stores its weights: bytes per element for the memory estimate and for the model shape. */
interface WeightStorage {
  /** Bytes per linear and per routed-expert element; undefined for a quantization kvsim does not model. */
  readonly bytes: { linear: number; experts: number } | undefined;
  /** The model shape's weight fields (an unmodelled quantization: the model dtype). */
  readonly shape: Pick<ModelShape, "weight_bytes" | "fp8_compute"> & { expert_weight_bytes?: number };
}

/** Bytes of one weight element by category, from the checkpoint's quantization_config. */
function weightStorage(root: ConfigReader, dtype: number, notes: string[]): WeightStorage {
  const q = root.child("quantization_config");
  if (q === undefined) return { bytes: { linear: dtype, experts: dtype }, shape: { weight_bytes: dtype, fp8_compute: false } };
  const method = q.optString("quant_method") ?? "";
  if (method === "fp8") {
    notes.push("weights: FP8 checkpoint, 1 byte per linear and expert weight (block scales not counted)");
    return { bytes: { linear: 1, experts: 1 }, shape: { weight_bytes: 1, fp8_compute: true } };
  }
  if (method === "mxfp4") {
    notes.push("weights: MXFP4 experts, 4.25 bits per expert weight (4-bit values, an 8-bit scale per 32)");
    return { bytes: { linear: dtype, experts: 4.25 / 8 }, shape: { weight_bytes: dtype, expert_weight_bytes: 4.25 / 8, fp8_compute: false } };
  }
  notes.push(`weights: quantization "${method}" is not modelled; give engine.weights_gib to size the KV cache from GPU memory`);
  notes.push(
    `model shape: quantization "${method}" is not modelled; weight_bytes is the model dtype's ${dtype}, so a roofline prices the weights as unquantized`,
  );
  return { bytes: undefined, shape: { weight_bytes: dtype, fp8_compute: false } };
}

/** The size of an ordinary large model per config field, to tell which field of a config is out of scale. */
const TYPICAL_SIZE: Readonly<Record<string, number>> = { num_hidden_layers: 128, hidden_size: 16384, vocab_size: 262144, max_position_embeddings: 2 ** 21 };

/** The numeric config field read (a path in `read`) whose value is largest against its typical size (default 65,536). */
function outOfScale(config: Record<string, unknown>, read: ReadonlySet<string>): { path: string; value: number } | undefined {
  let best: { path: string; value: number; ratio: number } | undefined;
  for (const path of read) {
    let v: unknown = config;
    for (const k of path.split(".")) v = isObject(v) && Object.hasOwn(v, k) ? v[k] : undefined;
    if (typeof v !== "number") continue;
    const key = path.slice(path.lastIndexOf(".") + 1);
    const ratio = v / (TYPICAL_SIZE[key] ?? (key.endsWith("_layers") ? 128 : 65536));
    if (best === undefined || ratio > best.ratio) best = { path, value: v, ratio };
  }
  return best === undefined ? undefined : { path: best.path, value: best.value };
}

/** Config fields a family reads that do not describe the compute shape (they size caches and memory). */
const NOT_SHAPE_FIELDS = new Set(["max_position_embeddings", "partial_rotary_factor"]);

/**
 * Derives a kvsim profile for one TP rank from a Hugging Face `config.json` (already parsed), by
 * vLLM's KV cache rules (see the package README for each rule and its source). Throws an
 * InputError naming the config's fields when it cannot: an unknown architecture (listing the known
 * ones), a missing field, or heads that do not split over the TP size.
 */
export function profileFromHfConfig(config: unknown, options: HfProfileOptions): HfProfile {
  const file = options.file ?? "<config>";
  const issues: InputIssue[] = [];
  const refuse = (path: string, message: string): never => {
    throw new InputError(file, [...issues, { path, message }]);
  };
  if (!isObject(config)) refuse("", "expected a JSON object (a Hugging Face config.json)");
  const tp = options.tensorParallelSize;
  if (!Number.isSafeInteger(tp) || tp < 1) throw new RangeError(`tensorParallelSize must be an integer >= 1, got ${tp}`);
  const vllmVersion = options.vllmVersion ?? DEFAULT_VLLM_VERSION;
  if (!VllmVersionSchema.safeParse(vllmVersion).success) throw new RangeError(`vllmVersion must be a literal version such as 0.32.0, got ${vllmVersion}`);

  const rootObj = config as Record<string, unknown>;
  const names = rootObj.architectures;
  if (!Array.isArray(names) || names.length === 0 || !names.every((x) => typeof x === "string")) {
    refuse("architectures", `must list the model's architecture; kvsim knows: ${KNOWN_ARCHITECTURES.join(", ")}`);
  }
  const listed = names as string[];
  // Own keys only: "constructor" or "__proto__" is no architecture, whatever Object.prototype has.
  const architecture = listed.find((a) => Object.hasOwn(ARCHITECTURES, a));
  if (architecture === undefined) {
    const shown = listed
      .slice(0, 5)
      .map((a) => shortJson(a))
      .join(", ");
    return refuse(
      "architectures",
      `unknown architecture ${shown}${listed.length > 5 ? ` and ${listed.length - 5} more` : ""}; kvsim knows: ${KNOWN_ARCHITECTURES.join(", ")}`,
    );
  }
  const family = ARCHITECTURES[architecture]!;
  const root = new ConfigReader(config as Record<string, unknown>, "", issues, architecture);
  const cfg = family.textConfig === true ? root.child("text_config") : root;
  if (cfg === undefined) return refuse("text_config", `is required to derive a profile for ${architecture}`);

  const notes: string[] = [];
  const dtypeName =
    optDtype(cfg, "torch_dtype") ?? optDtype(cfg, "dtype") ?? (cfg === root ? undefined : (optDtype(root, "torch_dtype") ?? optDtype(root, "dtype")));
  const dtype = dtypeBytes(dtypeName, 2);
  if (dtype === 4) notes.push("model dtype: float32 in the config; vLLM serves it in 16 bits by default, so 2 bytes");
  const modelDtype = 2;
  const kvCacheDtype = options.kvCacheDtype ?? "auto";
  const kvBytes = kvCacheDtype === "auto" ? modelDtype : kvCacheDtype.startsWith("fp8") ? 1 : 2;

  const model: ModelDescription = family.describe(cfg, { tp, kvBytes, dtypeBytes: modelDtype, notes });
  if (issues.length > 0) throw new InputError(file, issues);
  const shapeFields = [...root.read].filter((f) => !NOT_SHAPE_FIELDS.has(f.slice(f.lastIndexOf(".") + 1)));

  let layout;
  try {
    layout = layoutCache(model.layers, { mla: model.mla, blockSize: options.blockSize, vllmVersion });
  } catch (e) {
    if (e instanceof RangeError) return refuse("architectures", `${architecture}: ${e.message}`);
    throw e;
  }
  notes.unshift(...layout.notes);

  // Weights: parameters per rank times their bytes, plus the rotary cos/sin cache vLLM builds.
  const parts = model.parts;
  if (family.textConfig === true) parts.other += visionTowerParts(root.child("vision_config"), model.hidden, tp);
  if (issues.length > 0) throw new InputError(file, issues);
  const params = parts.embedding + parts.linear + parts.experts + parts.other;
  const storage = weightStorage(root, modelDtype, notes);
  const bytesOf = storage.bytes;
  const weights =
    bytesOf === undefined
      ? undefined
      : Math.round(modelDtype * (parts.embedding + parts.other + model.rotaryElements) + bytesOf.linear * parts.linear + bytesOf.experts * parts.experts);
  if (weights !== undefined)
    notes.push(`weights: ${n(Math.round(params))} parameters per rank + ${n(model.rotaryElements)} rotary cache elements, x their bytes = ${n(weights)} bytes`);

  // Widths that do not split evenly over the ranks (a width vLLM would refuse to shard) round up:
  // the estimate is of bytes, which come whole.
  const activationPerToken = Math.ceil(modelDtype * (2 * model.hidden + model.mixerWidth + 3 * model.ffnWidth));
  const samplerPerSequence = model.vocab * SAMPLER_BYTES_PER_VOCAB_ENTRY;
  notes.push(
    `activation estimate: ${n(activationPerToken)} B per batched token (2 x (2 x ${n(model.hidden)} hidden + ${n(model.mixerWidth)} mixer + 3 x ${n(model.ffnWidth)} MLP)) and ${n(samplerPerSequence)} B per sampled sequence (${n(model.vocab)} vocab x ${SAMPLER_BYTES_PER_VOCAB_ENTRY} B)`,
  );

  const nameOrPath = root.optString("_name_or_path");
  const modelName = options.model ?? (nameOrPath !== undefined && nameOrPath.trim() !== "" ? nameOrPath : architecture);
  const description = `Derived by kvsim profile from-hf from a ${architecture} config.json: one of ${tp} tensor-parallel rank${tp === 1 ? "" : "s"}, KV cache dtype ${kvCacheDtype}${kvCacheDtype === "auto" ? ` (${dtypeName ?? "bfloat16"})` : ""}, vLLM ${vllmVersion} rules. No forward_pass timings: use a fixed or polynomial timing model, or add measured passes.`;
  const memory = {
    ...(weights === undefined ? {} : { weights_bytes: weights }),
    activation_bytes_per_token: activationPerToken,
    sampler_bytes_per_sequence: samplerPerSequence,
    provenance: `kvsim profile from-hf estimates for ${architecture} at TP ${tp}: weights from the config's parameter count, activations from its widths (see @kvsim/profile-schema README, KV capacity from GPU memory)`,
  };
  const base = {
    schema_version: 1,
    model: modelName,
    description,
    vllm_version: vllmVersion,
    tensor_parallel_size: tp,
    kv_cache_dtype: kvCacheDtype === "auto" ? (dtypeName ?? "bfloat16") : kvCacheDtype,
  };
  const value =
    layout.kind === "linear"
      ? { ...base, kv_bytes_per_token: layout.kvBytesPerToken, memory }
      : { ...base, page_size_bytes: layout.pageSizeBytes, kv_cache_groups: layout.groups, memory };
  const quantFields = [...root.read].filter((f) => f.startsWith("quantization_config."));
  const modelShape = {
    ...model.shape,
    ...storage.shape,
    provenance: `kvsim profile from-hf: the whole model's shape from a ${architecture} config.json (${[...shapeFields, ...quantFields].join(", ")})`,
  };
  // Sizes that pass their own bounds can still multiply past what a double holds exactly: name
  // the config field most out of scale, not the derived figure.
  const byteFigures: [string, number | undefined][] = [
    ["the weights", weights],
    ["the activations per token", activationPerToken],
    ["the sampler's bytes per sequence", samplerPerSequence],
    ["the KV cache per token", layout.kind === "linear" ? layout.kvBytesPerToken : layout.pageSizeBytes],
  ];
  const tooLarge = byteFigures.find(([, v]) => v !== undefined && !(v <= Number.MAX_SAFE_INTEGER));
  if (tooLarge !== undefined) {
    const key = outOfScale(config as Record<string, unknown>, root.read);
    refuse(
      key?.path ?? "architectures",
      `${key === undefined ? "with the config's sizes" : `${n(key.value)} is out of scale: with it`} ${tooLarge[0]} come to ${tooLarge[1]!.toExponential(2)} bytes per rank, more than kvsim holds exactly (2^53); no model is that large`,
    );
  }
  let profile: Profile;
  try {
    profile = validateProfile({ ...value, model_shape: modelShape }, `${file} (derived profile)`);
  } catch (e) {
    // A derived figure out of its range comes from the config: name the field most out of scale.
    if (!(e instanceof InputError)) throw e;
    const key = outOfScale(config as Record<string, unknown>, root.read);
    throw new InputError(
      file,
      e.issues.map((i) => ({
        path: key?.path ?? "architectures",
        message: `${key === undefined ? "" : `${n(key.value)} is out of scale: `}the derived ${i.path === "" ? "profile" : i.path} ${i.message.replace(/^[a-z_]+ must/, "must")}`,
      })),
    );
  }
  return {
    profile,
    architecture,
    family: family.family,
    ...(layout.kind === "linear" ? { engineBlockSize: layout.blockSize } : {}),
    parametersPerRank: Math.round(params),
    notes,
  };
}
