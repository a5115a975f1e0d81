import { createEngineSession, type WorkerType } from "@kvsim/dynamo-adapter";
import { describeBytes, InputError, MAX_JSONL_LINE_BYTES, parseDocumentText } from "@kvsim/profile-schema";
import { Option, type Command } from "commander";
import { readText, UsageError, type CliIo, type CommandContext } from "../io.js";
import { splitLines } from "../lines.js";
import { loadProfileFile, profileProblems } from "../spec-check.js";

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
    .option("--engine <json>", "Dynamo MockEngineArgs: inline JSON (starting with '{' or '[') or a JSON file")
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
  const loaded = loadProfileFile(flags.profile);
  let engineArgs: unknown;
  let label = "--engine";
  if (flags.engine !== undefined) {
    // Inline JSON starts with '{' (or '[', refused below as not an object), anything else is a file.
    const inline = /^\s*[[{]/.test(flags.engine);
    label = inline ? "--engine" : flags.engine;
    const doc = parseDocumentText(inline ? flags.engine : readText(flags.engine), label, "json");
    // Duplicate keys and integers beyond 2^53 are refused here as in profiles and specs.
    if (doc.issues.length > 0) throw new InputError(label, doc.issues);
    engineArgs = doc.value;
  }
  try {
    return createEngineSession({ profile: loaded.profile, role: flags.role, engineArgs, engineArgsLabel: label, profileLabel: flags.profile });
  } catch (e) {
    // Problems with the profile's fields: at their lines in the profile file.
    if (e instanceof InputError && e.file === flags.profile)
      throw new InputError(
        loaded.file,
        profileProblems(loaded, e.issues).map((p) => p.issue),
      );
    throw e;
  }
}

/**
 * Answers every input line (a blank one too: it is not a request) with one output line, until the
 * input ends. Lines split at \n only: a \r inside a line is JSON blank space, not a line end. A line
 * longer than MAX_JSONL_LINE_BYTES is answered with an error without being held in memory.
 */
async function serve(handleLine: (line: string) => string, io: EngineIo): Promise<void> {
  for await (const line of splitLines(io.stdin ?? process.stdin, MAX_JSONL_LINE_BYTES)) {
    const answer =
      line.tooLong === true
        ? JSON.stringify({
            id: null,
            ok: false,
            error: {
              code: "invalid_request",
              message: `the line is ${line.bytes} bytes, longer than the ${describeBytes(MAX_JSONL_LINE_BYTES)} a request may be`,
            },
          })
        : handleLine(line.text);
    io.out(`${answer}\n`);
  }
}
