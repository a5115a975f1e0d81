import { Command, CommanderError } from "commander";
import { COMMANDS } from "./commands/index.js";
import { EXIT_BAD_INPUT, EXIT_OK, processIo, reportError, type CliIo, type CommandContext } from "./io.js";
import { VERSION } from "./version.js";

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
    .version(VERSION, "-V, --version")
    .showHelpAfterError()
    .configureOutput({ writeOut: (s) => { io.out(s); }, writeErr: (s) => { io.err(s); } })
    .exitOverride();
  for (const register of COMMANDS) register(program, ctx);
  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version exit 0; every other parse error is bad usage.
      const benign = e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.code === "commander.help";
      return benign ? EXIT_OK : EXIT_BAD_INPUT;
    }
    return reportError(io, e);
  }
  return exitCode;
}
