import {
  DEFAULT_LINEAR_BLOCK_SIZE,
  InputError,
  MAX_REQUEST_TOKENS,
  TransferModeSchema,
  isGroupedProfile,
  tokens,
  type Profile,
  type TransferMode,
} from "@kvsim/profile-schema";
import {
  chargedFixedBytes,
  groupPayload,
  payloadBytes,
  sourceTerms,
  transferDelayMs,
  transferProfileIssues,
  withDestination,
  type GroupPayload,
  type TransferTerms,
} from "@kvsim/transfer-rules";
import { Option, type Command } from "commander";
import { BANDWIDTH_FLAG_HELP, BANDWIDTH_GBPS_FLAG_HELP, bandwidthFromFlags, type BandwidthFlags } from "../bandwidth-flag.js";
import { numberOption, UsageError, type CliIo, type CommandContext } from "../io.js";
import { loadProfileFile, profileProblems } from "../spec-check.js";
import { tableLines } from "../text-table.js";

/** The prompt-length bound every command shares: the longest prompt a request may have. */
export const PROMPT_TOKENS_BOUND = {
  integer: true,
  min: 1,
  max: MAX_REQUEST_TOKENS,
  maxText: `${MAX_REQUEST_TOKENS} (2^24), the longest prompt a request may have`,
} as const;

interface TransferFlags extends BandwidthFlags {
  readonly profile: string;
  readonly promptTokens: string;
  readonly destinationCachedTokens?: string;
  readonly mode?: TransferMode;
  readonly blockSize?: string;
  readonly format: "table" | "json";
}

/** Everything one `kvsim transfer` run prints, in both formats. */
interface TransferReport {
  readonly profile: Profile;
  readonly promptTokens: number;
  readonly destinationCachedTokens: number | undefined;
  /** Linear profiles: the engine block size used for block rounding and the blocks column. */
  readonly linearBlockSize: number | undefined;
  readonly terms: TransferTerms;
  readonly groups: readonly GroupPayload[];
  readonly payloadBytes: number;
  readonly fixedBytes: number;
  readonly delayMs: number | undefined;
}

export function registerTransfer(program: Command, ctx: CommandContext): void {
  program
    .command("transfer")
    .description("Price one prefill-to-decode KV handoff by vLLM's per-group rules (blocks and bytes per cache group, payload, delay).")
    .requiredOption("--profile <file>", "model profile (JSON or YAML), grouped or linear")
    .requiredOption("--prompt-tokens <N>", "prompt length in tokens (an integer >= 1)")
    .option("--destination-cached-tokens <C>", "tokens of the prompt the decode rank already holds (its prefix-cache hit; rounded down to whole blocks)")
    .option("--bandwidth <B>", BANDWIDTH_FLAG_HELP)
    .option("--bandwidth-gbps <G>", BANDWIDTH_GBPS_FLAG_HELP)
    .addOption(
      new Option(
        "--mode <mode>",
        "what is charged: full_prompt (the whole prompt) or destination_missing (what the destination lacks; the whole prompt when no destination is given) (default: destination_missing when --destination-cached-tokens is given, else full_prompt)",
      ).choices(TransferModeSchema.options),
    )
    .option("--block-size <B>", `linear profiles only: the engine's tokens per block (default ${DEFAULT_LINEAR_BLOCK_SIZE})`)
    .addOption(new Option("--format <format>", "output format").choices(["table", "json"]).default("table"))
    .action(
      ctx.run((flags: TransferFlags) => {
        const report = priceTransfer(ctx.io, flags);
        ctx.io.out(flags.format === "json" ? `${JSON.stringify(toJson(report), null, 2)}\n` : renderTable(report));
        return undefined;
      }),
    );
}

function priceTransfer(io: CliIo, flags: TransferFlags): TransferReport {
  // Flags first (cheap), then the file.
  const n = numberOption("--prompt-tokens", flags.promptTokens, PROMPT_TOKENS_BOUND);
  const cached =
    flags.destinationCachedTokens === undefined
      ? undefined
      : numberOption("--destination-cached-tokens", flags.destinationCachedTokens, { ...PROMPT_TOKENS_BOUND, min: 0 });
  // A destination cannot hold more of the prompt than the prompt has.
  if (cached !== undefined && cached > n)
    throw new UsageError(
      `--destination-cached-tokens (${cached}) must be at most --prompt-tokens (${n}): the destination cannot hold more of the prompt than it has`,
    );
  const gbps = bandwidthFromFlags(io, flags);
  const blockSize = flags.blockSize === undefined ? undefined : numberOption("--block-size", flags.blockSize, { integer: true, min: 1 });

  const loaded = loadProfileFile(flags.profile);
  const profile = loaded.profile;
  const grouped = isGroupedProfile(profile);
  if (grouped && blockSize !== undefined) {
    throw new UsageError("--block-size applies to linear profiles only: a grouped profile takes its block size from its full_attention groups");
  }
  const issues = transferProfileIssues(profile);
  if (issues.length > 0)
    throw new InputError(
      loaded.file,
      profileProblems(loaded, issues).map((p) => p.issue),
    );

  const mode: TransferMode = flags.mode ?? (cached === undefined ? "full_prompt" : "destination_missing");
  const linear = { blockSizeTokens: blockSize };
  const source = sourceTerms(profile, tokens(n), { mode, bandwidthGbps: gbps, ...linear });
  const terms = cached === undefined ? source : withDestination(source, profile, tokens(cached), linear);
  // The rows show what the mode charges, so they add up to the payload.
  const rowHit = mode === "destination_missing" && cached !== undefined ? tokens(cached) : undefined;
  return {
    profile,
    promptTokens: n,
    destinationCachedTokens: cached,
    linearBlockSize: grouped ? undefined : (blockSize ?? DEFAULT_LINEAR_BLOCK_SIZE),
    terms,
    groups: groupPayload(profile, terms.transferredTokens, rowHit, linear),
    payloadBytes: payloadBytes(terms),
    fixedBytes: chargedFixedBytes(terms),
    delayMs: transferDelayMs(terms),
  };
}

/** The JSON contract of docs/rules/formats.md §6, plus the terms and the destination when one is given. */
function toJson(r: TransferReport): Record<string, unknown> {
  const t = r.terms;
  return {
    model: r.profile.model,
    vllm_version: r.profile.vllm_version,
    unit: t.unit,
    ...(t.unit === "block" ? { block_size_tokens: t.blockSizeTokens } : { engine_block_size_tokens: r.linearBlockSize }),
    mode: t.mode,
    prompt_tokens: r.promptTokens,
    backoff_tokens: t.backoffTokens,
    transferred_tokens: t.transferredTokens,
    prompt_units: t.promptUnits,
    bytes_per_unit: t.bytesPerUnit,
    ...(t.missing === undefined
      ? {}
      : { destination_cached_tokens: r.destinationCachedTokens, missing_units: t.missing.units, missing_fixed_bytes: t.missing.fixedBytes }),
    groups: r.groups.map((g) => ({ name: g.name, kind: g.kind, blocks: g.blocks, bytes: g.bytes })),
    fixed_bytes: r.fixedBytes,
    payload_bytes: r.payloadBytes,
    bandwidth_gbps: t.bandwidthGbps ?? null,
    delay_ms: r.delayMs ?? null,
  };
}

/** 1234567 -> "1,234,567" (integers only; fixed, locale-independent). */
const thousands = (n: number): string => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
const plural = (n: number, word: string) => `${thousands(n)} ${word}${n === 1 ? "" : "s"}`;

function renderTable(r: TransferReport): string {
  const t = r.terms;
  const unit = t.unit;
  const lines: string[] = [];
  const p = r.profile;
  const shape =
    t.unit === "block"
      ? `grouped, full-attention block ${plural(t.blockSizeTokens, "token")}`
      : `linear, ${thousands(t.bytesPerUnit)} bytes per token, engine block ${plural(r.linearBlockSize ?? DEFAULT_LINEAR_BLOCK_SIZE, "token")}`;
  lines.push(`profile      ${p.model} (vLLM ${p.vllm_version}; ${shape})`);
  const promptUnits = t.unit === "block" ? ` = ${plural(t.promptUnits, "block")}` : "";
  lines.push(
    `prompt       ${plural(r.promptTokens, "token")}: backoff ${thousands(t.backoffTokens)}, transferred ${plural(t.transferredTokens, "token")}${promptUnits}`,
  );
  if (t.missing !== undefined && r.destinationCachedTokens !== undefined) {
    lines.push(
      `destination  holds ${plural(r.destinationCachedTokens, "token")}; lacks ${plural(t.missing.units, unit)} and ${plural(t.missing.fixedBytes, "fixed byte")}`,
    );
  }
  lines.push(`mode         ${t.mode}`);
  lines.push("");

  const header = ["group", "kind", "blocks", "bytes"];
  const body = r.groups.map((g) => [g.name, g.kind, thousands(g.blocks), thousands(g.bytes)]);
  const total = ["total", "", thousands(r.groups.reduce((s, g) => s + g.blocks, 0)), thousands(r.groups.reduce((s, g) => s + g.bytes, 0))];
  const rows = [header, ...body, total];
  lines.push(...tableLines(rows, "llrr"), "");

  const units = t.mode === "destination_missing" && t.missing !== undefined ? t.missing.units : t.promptUnits;
  lines.push(`payload      ${plural(r.payloadBytes, "byte")} = ${plural(units, unit)} x ${thousands(t.bytesPerUnit)} + ${thousands(r.fixedBytes)} fixed`);
  lines.push(
    r.delayMs === undefined || t.bandwidthGbps === undefined
      ? "delay        not modelled (no --bandwidth)"
      : `delay        ${String(r.delayMs)} ms at ${String(t.bandwidthGbps)} GB/s`,
  );
  return `${lines.join("\n")}\n`;
}
