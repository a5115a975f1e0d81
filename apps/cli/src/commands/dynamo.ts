import { dynamoTimingIssues, handoffDelayMs, toDynamoTiming, toLegacyTiming } from "@kvsim/dynamo-adapter";
import { InputError, TransferModeSchema, tokens, type TransferMode } from "@kvsim/profile-schema";
import { sourceTerms, transferProfileIssues } from "@kvsim/transfer-rules";
import { Option, type Command } from "commander";
import { BANDWIDTH_FLAG_HELP, BANDWIDTH_GBPS_FLAG_HELP, bandwidthFromFlags, type BandwidthFlags } from "../bandwidth-flag.js";
import { numberOption, UsageError, type CliIo, type CommandContext } from "../io.js";
import { loadProfileFile, profileProblems } from "../spec-check.js";
import { PROMPT_TOKENS_BOUND } from "./transfer.js";

interface HandoffTimingFlags extends BandwidthFlags {
  readonly profile: string;
  readonly promptTokens: string;
  readonly mode: TransferMode;
  readonly legacy?: boolean;
}

/** `kvsim dynamo ...`: the Dynamo mocker boundary. */
export function registerDynamo(program: Command, ctx: CommandContext): void {
  const dynamo = program.command("dynamo").description("Dynamo mocker interop: kvsim's handoff terms in Dynamo's shapes.");
  dynamo
    .command("handoff-timing")
    .description(
      "Print the Dynamo HandoffTransferTiming JSON for one handoff (fixed bytes in kv_bytes_per_request; a grouped source in tokens only when exact) and its delay to an empty destination.",
    )
    .requiredOption("--profile <file>", "model profile (JSON or YAML), grouped or linear")
    .requiredOption("--prompt-tokens <N>", "prompt length in tokens (an integer >= 1)")
    .option("--bandwidth <B>", BANDWIDTH_FLAG_HELP)
    .option("--bandwidth-gbps <G>", BANDWIDTH_GBPS_FLAG_HELP)
    .addOption(new Option("--mode <mode>", "kv_transfer_timing_mode").choices(TransferModeSchema.options).default("full_prompt"))
    .option("--legacy", "print Dynamo's legacy four-field shape; refused (exit 2) when it would lose fixed bytes or block units")
    .action(
      ctx.run((flags: HandoffTimingFlags) => {
        ctx.io.out(`${JSON.stringify(handoffTiming(ctx.io, flags), null, 2)}\n`);
        return undefined;
      }),
    );
}

function handoffTiming(io: CliIo, flags: HandoffTimingFlags): Record<string, unknown> {
  const n = numberOption("--prompt-tokens", flags.promptTokens, PROMPT_TOKENS_BOUND);
  const gbps = bandwidthFromFlags(io, flags);

  const loaded = loadProfileFile(flags.profile);
  const profile = loaded.profile;
  // The current shape needs whole bytes per token; --legacy has its own, stricter refusal below.
  const issues = [...transferProfileIssues(profile), ...(flags.legacy === true ? [] : dynamoTimingIssues(profile))];
  if (issues.length > 0)
    throw new InputError(
      loaded.file,
      profileProblems(loaded, issues).map((p) => p.issue),
    );
  const terms = sourceTerms(profile, tokens(n), { mode: flags.mode, bandwidthGbps: gbps });

  const timing = flags.legacy === true ? toLegacyTiming(terms) : toDynamoTiming(terms);
  if (!timing.ok) throw new UsageError(`${flags.legacy === true ? "--legacy: " : ""}${timing.reason}`);
  return { transfer_timing: timing.value, delay_ms: handoffDelayMs(timing.value) ?? null };
}
