import { DEFAULT_VLLM_VERSION, KV_CACHE_DTYPES, profileFromHfConfig, type KvCacheDtype } from "@kvsim/hf-profile";
import { checkPdGate, DEFAULT_LINEAR_BLOCK_SIZE, InputError, parseDocumentText, VllmVersionSchema } from "@kvsim/profile-schema";
import { Option } from "commander";
import { assertWritable, numberOption, readText, UsageError, writeTextAtomic } from "../io.js";
import { formatCapacity, formatProfile } from "../profile-table.js";
import type { RegisterCommand } from "./index.js";
import { addCapacityOptions, capacityEngine, capacityFromFlags, profileGroup, type CapacityFlags } from "./profile-group.js";

interface FromHfFlags extends CapacityFlags {
  readonly tp: string;
  readonly kvCacheDtype: KvCacheDtype;
  readonly vllm: string;
  readonly blockSize?: string;
  readonly model?: string;
  readonly out?: string;
  readonly force: boolean;
}

/** `text_config.num_hidden_layers` back to its keys, to find its line in the config. */
const pathKeys = (path: string): PropertyKey[] => [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => (m[2] === undefined ? m[1]! : Number(m[2])));

export const registerProfileFromHf: RegisterCommand = (program, ctx) => {
  const cmd = profileGroup(program)
    .command("from-hf")
    .description(
      "Derive a profile for one TP rank from a Hugging Face config.json by vLLM's KV cache rules (dense, MLA, sliding-window and Mamba/linear-attention hybrids). Writes the profile to --out (or prints it as JSON) and prints its table; with --gpu or --gpu-memory-gib also the KV capacity vLLM would allocate.",
    )
    .argument("<config.json>", "the model's Hugging Face config.json")
    .requiredOption("--tp <N>", "tensor-parallel size: the profile describes one of N ranks")
    .addOption(new Option("--kv-cache-dtype <dtype>", "vLLM's --kv-cache-dtype (auto: the model dtype)").choices(KV_CACHE_DTYPES).default("auto"))
    .option("--vllm <version>", "the literal vLLM version whose rules the profile follows", DEFAULT_VLLM_VERSION)
    .option("--block-size <B>", "vLLM's --block-size: raised where vLLM raises it (Mamba states, MLA), never lowered")
    .option("--model <name>", "the profile's model name (default: the config's _name_or_path, else its architecture)")
    .option("--out <profile.json>", "write the profile here (default: print it as JSON on stdout and the table on stderr)")
    .option("--force", "overwrite an existing --out file", false);
  addCapacityOptions(cmd).action(
    ctx.run((configFile: string, flags: FromHfFlags) => {
      const tp = numberOption("--tp", flags.tp, { integer: true, min: 1 });
      const blockSize = flags.blockSize === undefined ? undefined : numberOption("--block-size", flags.blockSize, { integer: true, min: 1 });
      if (!VllmVersionSchema.safeParse(flags.vllm).success) throw new UsageError(`--vllm must be a literal version such as 0.32.0, got "${flags.vllm}"`);
      const engine = capacityEngine(flags, blockSize);
      assertWritable(flags.out, flags.force);

      const doc = parseDocumentText(readText(configFile), configFile, "json");
      let derived;
      try {
        derived = profileFromHfConfig(doc.value, {
          tensorParallelSize: tp,
          kvCacheDtype: flags.kvCacheDtype,
          vllmVersion: flags.vllm,
          blockSize,
          model: flags.model,
          file: configFile,
        });
      } catch (e) {
        // Point each problem at its line in config.json.
        if (e instanceof InputError && e.file === configFile)
          throw new InputError(
            configFile,
            e.issues.map((i) => ({ ...i, ...(doc.locate(pathKeys(i.path)) ?? {}) })),
          );
        throw e;
      }
      const { profile } = derived;
      const linearBlock = derived.engineBlockSize ?? blockSize ?? DEFAULT_LINEAR_BLOCK_SIZE;
      const capacity = engine === undefined ? undefined : capacityFromFlags(profile, engine);

      // Sections separated by one blank line.
      const sections = [
        [`${derived.architecture} (${derived.family}), TP ${tp}: the rules applied`, ...derived.notes.map((n) => `  ${n}`)].join("\n"),
        formatProfile(profile, linearBlock, capacity?.capacity.num_gpu_blocks),
      ];
      if (capacity !== undefined) sections.push(formatCapacity(capacity.capacity, profile.vllm_version, capacity));
      const gate = checkPdGate(profile, "prefill");
      if (gate.length > 0)
        sections.push(
          `note: aggregated replay only; a P/D rank refuses this profile: ${gate.map((g) => `${g.path}: ${g.message.replace(/^prefill role: /, "")}`).join("; ")}`,
        );
      if (derived.engineBlockSize !== undefined && derived.engineBlockSize !== DEFAULT_LINEAR_BLOCK_SIZE)
        sections.push(`note: set engine.block_size: ${derived.engineBlockSize} in the spec (a linear profile takes its block size from the engine)`);
      const table = `${sections.map((x) => x.replace(/\n+$/, "")).join("\n\n")}\n`;

      const json = `${JSON.stringify(profile, null, 2)}\n`;
      if (flags.out !== undefined) {
        writeTextAtomic(flags.out, json, flags.force);
        ctx.io.out(`${table}\nwrote ${flags.out}\n`);
      } else {
        ctx.io.out(json);
        ctx.io.err(table);
      }
      return undefined;
    }),
  );
};
