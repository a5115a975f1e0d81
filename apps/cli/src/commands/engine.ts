import { createInterface } from "node:readline";
import { createEngineSession, type WorkerType } from "@kvsim/dynamo-adapter";
import { parseDocumentText, parseProfile } from "@kvsim/profile-schema";
import { Option, type Command } from "commander";
import { readText, UsageError, type CliIo, type CommandContext } from "../io.js";

interface EngineFlags {
  readonly stdio?: boolean;
  readonly profile: string;
  readonly role: WorkerType;
  readonly engine?: string;
}

/** A CliIo that may bring its own standard input (tests pass a stream; the binary reads process.stdin). */
export interface EngineIo extends CliIo {
  readonly stdin?: NodeJS.ReadableStream;
}

/** `kvsim engine --stdio`: one kvsim rank behind the line-delimited JSON protocol of @kvsim/dynamo-adapter. */
export function registerEngine(program: Command, ctx: CommandContext): void {
  program
    .command("engine")
    .description(
      "Serve one kvsim rank to a Dynamo mocker process: read one JSON request per line on stdin, write one JSON response per line on stdout (protocol: the @kvsim/dynamo-adapter README).",
    )
    .option("--stdio", "serve over standard input and output (the only transport)")
    .requiredOption("--profile <file>", "model profile (JSON or YAML)")
    .addOption(new Option("--role <role>", "the rank's role").choices(["aggregated", "prefill", "decode"]).makeOptionMandatory())
    .option("--engine <json>", "Dynamo MockEngineArgs: inline JSON (starting with '{') or a JSON file")
    .action(
      ctx.run(async (flags: EngineFlags) => {
        if (flags.stdio !== true) throw new UsageError("kvsim engine serves over standard input and output only: pass --stdio");
        const session = openSession(flags);
        await serve(session.handleLine.bind(session), ctx.io);
        return undefined;
      }),
    );
}

function openSession(flags: EngineFlags) {
  const profile = parseProfile(readText(flags.profile), flags.profile);
  let engineArgs: unknown;
  let label = "--engine";
  if (flags.engine !== undefined) {
    const inline = flags.engine.trimStart().startsWith("{");
    label = inline ? "--engine" : flags.engine;
    engineArgs = parseDocumentText(inline ? flags.engine : readText(flags.engine), label, "json").value;
  }
  return createEngineSession({ profile, role: flags.role, engineArgs, engineArgsLabel: label, profileLabel: flags.profile });
}

/** Answers every input line (a blank one too: it is not a request) with one output line, until the input ends. */
async function serve(handleLine: (line: string) => string, io: EngineIo): Promise<void> {
  const lines = createInterface({ input: io.stdin ?? process.stdin, crlfDelay: Number.POSITIVE_INFINITY, terminal: false });
  for await (const line of lines) {
    io.out(`${handleLine(line)}\n`);
  }
}
