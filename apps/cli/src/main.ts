import { Command, CommanderError } from "commander";
import { commandsFor } from "./commands/index.js";
import { EXIT_BAD_INPUT, EXIT_OK, processIo, reportError, type CliIo, type CommandContext } from "./io.js";
import { VERSION } from "./version.js";

/** `kvsim dynamo handoff-timing` for the handoff-timing command: how a user would type it. */
function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c !== null; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/** The one line printed under a usage error: where to read the command's usage. */
function usageHint(cmd: Command | undefined): string {
  return cmd === undefined ? "hint: `kvsim --help` lists the commands" : `hint: \`${commandPath(cmd)} --help\` shows its usage`;
}

/**
 * Every command and group prints a usage error as the error and one hint line (not its whole
 * help, which `--help` prints); a group run without its subcommand (bare `kvsim`, `kvsim profile`)
 * is a usage error too (exit 2), naming the commands it has.
 */
function conciseUsageErrors(cmd: Command): void {
  cmd.showHelpAfterError(usageHint(cmd.parent === null ? undefined : cmd));
  if (cmd.commands.length > 0) {
    // Commander calls help({ error: true }) on a group run without its subcommand; only that
    // call is replaced (the typings mark an old overload of help deprecated, not this one).
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    const help = cmd.help.bind(cmd);
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    cmd.help = ((context?: { error: boolean }) => {
      if (context?.error !== true) return help(context);
      const names = cmd.commands.map((c) => c.name()).join(", ");
      return cmd.error(`error: ${commandPath(cmd)} needs a command: ${names}`, { exitCode: EXIT_BAD_INPUT, code: "kvsim.missingCommand" });
    }) as Command["help"];
  }
  for (const sub of cmd.commands) conciseUsageErrors(sub);
}

/** Runs the CLI on `argv` (without the node and script entries) and returns the exit code. */
export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let exitCode = EXIT_OK;
  const ctx: CommandContext = {
    io,
    run:
      (fn) =>
      async (...args) => {
        try {
          exitCode = (await fn(...args)) ?? EXIT_OK;
        } catch (e) {
          exitCode = reportError(io, e);
        }
      },
  };
  const program = new Command("kvsim")
    .description(
      "Predict how a vLLM deployment serves a workload, without GPUs: replay traces through modelled vLLM ranks, price every P/D KV handoff, report serving metrics.",
    )
    // The Node it runs on too, for bug reports.
    .version(`kvsim ${VERSION} (node ${process.versions.node})`, "-V, --version")
    .configureOutput({
      writeOut: (s) => {
        io.out(s);
      },
      writeErr: (s) => {
        io.err(s);
      },
    })
    .exitOverride();
  for (const register of await commandsFor(argv)) register(program, ctx);
  conciseUsageErrors(program);
  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError) {
      // --help, `kvsim help` and --version exit 0; every other parse error is bad usage.
      return e.exitCode === 0 ? EXIT_OK : EXIT_BAD_INPUT;
    }
    return reportError(io, e);
  }
  return exitCode;
}
