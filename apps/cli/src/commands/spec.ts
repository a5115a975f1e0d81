import { existsSync } from "node:fs";
import { dirname, isAbsolute, relative, resolve } from "node:path";
import { deploymentFromMeta, deploymentFromServeArgs, specFromVllm, type VllmDeployment } from "@kvsim/calibrate";
import { gpuDatasheet, parseDocumentText, parseProfile, TraceFormatSchema } from "@kvsim/profile-schema";
import { checkOutputs, readText, UsageError, writeOutputs, type CliIo } from "../io.js";
import { specText } from "./calibrate-output.js";
import type { RegisterCommand } from "./index.js";

export interface SpecFromVllmFlags {
  readonly profile?: string;
  readonly trace?: string;
  readonly format: string;
  readonly gpu?: string;
  readonly timing?: string;
  readonly out?: string;
  readonly force: boolean;
}

/** A path as the spec at `out` names it: relative to its folder, starting with ./ or ../. */
function fromSpec(out: string, path: string): string {
  if (isAbsolute(path) && !isAbsolute(out)) return path;
  const r = relative(dirname(resolve(out)), resolve(path));
  return r.startsWith(".") || isAbsolute(r) ? r : `./${r}`;
}

/** A meta.json (one argument naming an existing .json file), or vllm serve arguments. */
function readDeployment(source: readonly string[]): VllmDeployment {
  const first = source[0]!;
  // One argument that is a file, or names a .json one: a meta.json; anything else: vllm serve arguments.
  if (source.length === 1 && !first.startsWith("-") && (existsSync(first) || first.toLowerCase().endsWith(".json"))) {
    if (!existsSync(first)) throw new UsageError(`${first}: no such file (give a run's meta.json, or vllm serve arguments)`);
    return deploymentFromMeta(parseDocumentText(readText(first), first, "json").value, first);
  }
  return deploymentFromServeArgs(source);
}

/**
 * `kvsim spec from-vllm <meta.json | vllm serve arguments>`: the replay spec of a vLLM
 * deployment, with its engine settings where the spec keeps them (async_scheduling,
 * scheduler_reserve_full_isl, cudagraph_capture_sizes, ...), the profile and trace given, and a
 * timing a calibration starts from. Prints what was assumed or left out.
 */
export function specFromVllmCommand(io: CliIo, source: readonly string[], flags: SpecFromVllmFlags): number {
  if (flags.out === undefined) throw new UsageError("--out <file> is required: where to write the spec (YAML, or JSON for a .json name)");
  const format = TraceFormatSchema.safeParse(flags.format);
  if (!format.success) throw new UsageError(`--format must be kvsim, mooncake or azure (the trace's format), got "${flags.format}"`);
  if (flags.gpu !== undefined && gpuDatasheet(flags.gpu) === undefined)
    throw new UsageError(`--gpu must be a GPU kvsim knows (kvsim gpus lists them), got "${flags.gpu}"`);
  if (flags.timing !== undefined && !["roofline", "linear", "profile"].includes(flags.timing))
    throw new UsageError(`--timing must be roofline, linear or profile, got "${flags.timing}"`);
  if (flags.timing === "roofline" && flags.gpu === undefined && source.length !== 1)
    throw new UsageError("--timing roofline needs the GPU: give --gpu (kvsim gpus lists them)");
  if (source.length === 0)
    throw new UsageError("give a run's meta.json, or vllm serve arguments (after --, e.g. -- --max-num-seqs 128 --tensor-parallel-size 2)");
  checkOutputs([{ flag: "--out", path: flags.out }], flags.force);
  const d = readDeployment(source);
  const notes: string[] = [];
  if (flags.profile !== undefined) {
    // The profile must describe the run's model at its TP: say so when it does not.
    const profile = parseProfile(readText(flags.profile), flags.profile);
    if (profile.tensor_parallel_size !== d.tensorParallelSize)
      notes.push(
        `the profile is for TP ${profile.tensor_parallel_size}, the run uses TP ${d.tensorParallelSize}: make a profile at TP ${d.tensorParallelSize} (kvsim profile from-hf --tp ${d.tensorParallelSize})`,
      );
    if (d.model !== undefined && profile.model !== d.model) notes.push(`the profile's model is ${profile.model}, the run's ${d.model}`);
  } else {
    notes.push(
      `profile: ./profile.json is a placeholder: write it with kvsim profile from-hf <the model's config.json> --tp ${d.tensorParallelSize} --out profile.json, or give --profile`,
    );
  }
  if (flags.trace !== undefined && !existsSync(flags.trace)) throw new UsageError(`--trace ${flags.trace}: no such file`);
  const { spec, notes: more } = specFromVllm(d, {
    profile: flags.profile === undefined ? "./profile.json" : fromSpec(flags.out, flags.profile),
    ...(flags.trace === undefined ? {} : { trace: fromSpec(flags.out, flags.trace), format: format.data }),
    ...(flags.gpu === undefined ? {} : { gpu: gpuDatasheet(flags.gpu)!.name }),
    ...(flags.timing === undefined ? {} : { timing: { type: flags.timing } }),
  });
  if (flags.timing === "linear") notes.push("timing: linear with every term 0, a start for kvsim calibrate (fit it before replaying)");
  if (flags.timing === "roofline" && (spec.engine as Record<string, unknown>).gpu === undefined)
    throw new UsageError(
      `--timing roofline needs the GPU: ${d.deviceName === undefined ? "the source names none" : `"${d.deviceName}" is no GPU kvsim knows`}; give --gpu (kvsim gpus lists them)`,
    );
  writeOutputs([{ flag: "--out", path: flags.out, text: specText(flags.out, spec) }], flags.force);
  const from = d.source === "meta" ? source[0]! : "the vllm serve arguments";
  const what = [
    d.model ?? "model ?",
    `TP ${d.tensorParallelSize}`,
    ...(d.vllmVersion === undefined ? [] : [`vLLM ${d.vllmVersion}`]),
    ...(d.deviceName === undefined ? [] : [d.deviceName]),
  ].join(", ");
  io.out(`wrote ${flags.out} from ${from} (${what}); check it with kvsim validate ${flags.out}\n${[...more, ...notes].map((n) => `note: ${n}\n`).join("")}`);
  return 0;
}

export const registerSpec: RegisterCommand = (program, ctx) => {
  const spec = program.command("spec").description("Make replay specs.");
  spec
    .command("from-vllm")
    .description(
      "Write the replay spec of a vLLM deployment: from a run's meta.json (engine_kwargs, kv_cache, resolved_config, hardware) or from vllm serve arguments (after --). The engine settings go where the spec keeps them (max_num_seqs, max_num_batched_tokens, async_scheduling, scheduler_reserve_full_isl, cudagraph_capture_sizes, data_parallel_size, ...); what is assumed or not modelled is printed as notes.",
    )
    .argument(
      "<source...>",
      "a run's meta.json, or vllm serve arguments after -- (e.g. -- --max-num-seqs 128 --tensor-parallel-size 2 --async-scheduling), or quoted as one",
    )
    .option("--profile <file>", "the model's profile at the run's TP (kvsim profile from-hf); default: a ./profile.json placeholder")
    .option("--trace <file>", "the workload's trace (e.g. from kvsim trace from-measured); default: a synthetic placeholder")
    .option("--format <format>", "the trace's format: kvsim, mooncake or azure", "kvsim")
    .option("--gpu <name>", "the GPU, when the source does not name one (kvsim gpus lists them): the timing is then the roofline on it")
    .option(
      "--timing <type>",
      "roofline (default with a known GPU), linear (all terms 0: a start for kvsim calibrate) or profile (the profile's forward_pass tables; default otherwise)",
    )
    .option("--out <file>", "the spec to write (YAML, or JSON for a .json name)")
    .option("--force", "overwrite an existing --out file", false)
    .allowUnknownOption()
    .action(ctx.run((source: string[], flags: SpecFromVllmFlags) => specFromVllmCommand(ctx.io, source, flags)));
};
