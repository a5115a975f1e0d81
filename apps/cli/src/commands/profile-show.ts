import { DEFAULT_LINEAR_BLOCK_SIZE, isGroupedProfile, parseProfile } from "@kvsim/profile-schema";
import { Option } from "commander";
import { numberOption, readText, UsageError } from "../io.js";
import { capacityTokens, formatCapacity, formatProfile, pageBytes, profileRows } from "../profile-table.js";
import type { RegisterCommand } from "./index.js";
import { addCapacityOptions, capacityEngine, capacityFromFlags, profileGroup, type CapacityFlags } from "./profile-group.js";

interface ShowFlags extends CapacityFlags {
  readonly numGpuBlocks?: string;
  readonly blockSize?: string;
  readonly format: "table" | "json";
}

export const registerProfileShow: RegisterCommand = (program, ctx) => {
  const cmd = profileGroup(program)
    .command("show")
    .description(
      "Print a profile as a table: its cache groups, page size, bytes per block and per token, its model shape when it has one, and the capacity in tokens of --num-gpu-blocks pages (or of the pool --gpu / --gpu-memory-gib gives, with the derivation).",
    )
    .argument("<profile>", "a profile (JSON or YAML)")
    .option("--num-gpu-blocks <N>", "pool pages per rank (the null page included) to state the capacity of")
    .option("--block-size <B>", `linear profiles only: the engine's tokens per block (default ${DEFAULT_LINEAR_BLOCK_SIZE})`)
    .addOption(new Option("--format <format>", "output format").choices(["table", "json"]).default("table"));
  addCapacityOptions(cmd).action(
    ctx.run((file: string, flags: ShowFlags) => {
      const blocks = flags.numGpuBlocks === undefined ? undefined : numberOption("--num-gpu-blocks", flags.numGpuBlocks, { integer: true, min: 2 });
      const blockSize = flags.blockSize === undefined ? undefined : numberOption("--block-size", flags.blockSize, { integer: true, min: 1 });
      const engine = capacityEngine(flags, blockSize);
      if (blocks !== undefined && engine !== undefined)
        throw new UsageError("give --num-gpu-blocks or GPU memory (--gpu, --gpu-memory-gib), not both: an explicit block count wins in vLLM");
      const profile = parseProfile(readText(file), file);
      if (isGroupedProfile(profile) && blockSize !== undefined)
        throw new UsageError("--block-size applies to linear profiles only: a grouped profile takes its block sizes from its groups");
      const linearBlock = blockSize ?? DEFAULT_LINEAR_BLOCK_SIZE;
      const capacity = engine === undefined ? undefined : capacityFromFlags(profile, engine);
      const pages = blocks ?? capacity?.capacity.num_gpu_blocks;
      if (flags.format === "json") {
        const out = {
          model: profile.model,
          vllm_version: profile.vllm_version,
          tensor_parallel_size: profile.tensor_parallel_size,
          layout: isGroupedProfile(profile) ? "grouped" : "linear",
          page_size_bytes: pageBytes(profile, linearBlock),
          groups: profileRows(profile, linearBlock).map((r) => ({
            ...r,
            num_layers: r.num_layers ?? null,
            window_tokens: r.window_tokens ?? null,
            bytes_per_block: r.bytes_per_block ?? null,
            bytes_per_token: r.bytes_per_token ?? null,
          })),
          ...(pages === undefined ? {} : { num_gpu_blocks: pages, capacity_tokens: capacityTokens(profile, pages, linearBlock) }),
          ...(capacity === undefined ? {} : { kv_capacity: capacity.capacity }),
          ...(profile.model_shape === undefined ? {} : { model_shape: profile.model_shape }),
        };
        ctx.io.out(`${JSON.stringify(out, null, 2)}\n`);
        return undefined;
      }
      let text = formatProfile(profile, linearBlock, pages);
      if (capacity !== undefined) text += `\n${formatCapacity(capacity.capacity, profile.vllm_version, capacity)}`;
      ctx.io.out(text);
      return undefined;
    }),
  );
};
