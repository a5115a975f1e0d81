import { InvalidArgumentError, type Command } from "commander";
import {
  engineSettings,
  EngineOverridesSchema,
  gpuDatasheet,
  KNOWN_GPU_NAMES,
  zodIssues,
  kvCapacity,
  type EngineOverrides,
  type KvCapacity,
  type Profile,
} from "@kvsim/profile-schema";
import { numberOption, UsageError } from "../io.js";

/** The `kvsim profile` command group; each subcommand module adds itself to it. */
export function profileGroup(program: Command): Command {
  return (
    program.commands.find((c) => c.name() === "profile") ??
    program.command("profile").description("Make and inspect profiles: derive one from a Hugging Face config.json (from-hf), or print one as a table (show).")
  );
}

/** The GPU-memory flags `profile from-hf` and `profile show` share. */
export interface CapacityFlags {
  readonly gpu?: string;
  readonly gpuMemoryGib?: string;
  readonly gpuMemoryUtilization?: string;
  readonly maxNumBatchedTokens?: string;
  readonly maxNumSeqs?: string;
  readonly weightsGib?: string;
  readonly activationPeakGib?: string;
  readonly cudaGraphMemoryGib?: string;
}

/** --gpu's parser: a name or alias of the table, refused at parse time (with the usage hint) otherwise. */
function knownGpuName(name: string): string {
  if (gpuDatasheet(name) === undefined)
    throw new InvalidArgumentError(`Known GPUs: ${KNOWN_GPU_NAMES.join(", ")} (\`kvsim gpus\` lists them; or give --gpu-memory-gib).`);
  return name;
}

export function addCapacityOptions(cmd: Command): Command {
  return cmd
    .option("--gpu <name>", "size the KV cache from a known GPU's memory (a name or alias that `kvsim gpus` lists)", knownGpuName)
    .option("--gpu-memory-gib <G>", "size the KV cache from this much GPU memory (GiB, as CUDA reports it)")
    .option("--gpu-memory-utilization <U>", "vLLM's gpu_memory_utilization (default 0.9)")
    .option("--max-num-batched-tokens <T>", "the engine's token budget, which sizes vLLM's profile run (default 8192)")
    .option("--max-num-seqs <S>", "the engine's running-request limit (default 256)")
    .option("--weights-gib <G>", "weights on one rank in GiB, instead of the profile's estimate")
    .option("--activation-peak-gib <G>", "activation peak plus non-torch memory in GiB, instead of kvsim's estimate")
    .option("--cuda-graph-memory-gib <G>", "CUDA graph memory in GiB, instead of kvsim's estimate (0 for enforce_eager)");
}

/** The engine settings the flags describe, or undefined without --gpu / --gpu-memory-gib. */
export function capacityEngine(flags: CapacityFlags, blockSize: number | undefined): EngineOverrides | undefined {
  if (flags.gpu === undefined && flags.gpuMemoryGib === undefined) return undefined;
  const num = (name: string, raw: string | undefined, kind: "positive" | "integer" | "size" = "positive") =>
    raw === undefined
      ? undefined
      : numberOption(name, raw, kind === "integer" ? { integer: true, min: 1 } : kind === "size" ? { min: 0 } : { exclusiveMin: 0 });
  const o: Record<string, unknown> = {
    gpu: flags.gpu,
    gpu_memory_gib: num("--gpu-memory-gib", flags.gpuMemoryGib),
    gpu_memory_utilization: num("--gpu-memory-utilization", flags.gpuMemoryUtilization),
    max_num_batched_tokens: num("--max-num-batched-tokens", flags.maxNumBatchedTokens, "integer"),
    max_num_seqs: num("--max-num-seqs", flags.maxNumSeqs, "integer"),
    weights_gib: num("--weights-gib", flags.weightsGib, "size"),
    activation_peak_gib: num("--activation-peak-gib", flags.activationPeakGib, "size"),
    cuda_graph_memory_gib: num("--cuda-graph-memory-gib", flags.cudaGraphMemoryGib, "size"),
    block_size: blockSize,
  };
  const parsed = EngineOverridesSchema.safeParse(Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)));
  if (!parsed.success) {
    throw new UsageError(
      zodIssues(parsed.error)
        .map((i) => `--${i.path.replaceAll("_", "-")}: ${i.message}`)
        .join("\n"),
    );
  }
  return parsed.data;
}

/** kvCapacity for flags, with refusals naming the flags. */
export function capacityFromFlags(profile: Profile, overrides: EngineOverrides): { capacity: KvCapacity; batchedTokens: number; sequences: number } {
  const flag = (field: string) => `--${field.replaceAll("_", "-")}`;
  const settings = engineSettings(overrides);
  const r = kvCapacity(profile, settings);
  if (!r.ok) throw new UsageError(r.issues.map((i) => `${flag(i.path)}: ${i.message}`).join("\n"));
  return { capacity: r.capacity, batchedTokens: settings.max_num_batched_tokens, sequences: settings.max_num_seqs };
}
