import { Command, CommanderError } from "commander";
import { EXIT_BAD_INPUT, EXIT_OK } from "./io.js";
import { COMMANDS } from "./commands/index.js";
import { VERSION } from "./version.js";

export function buildProgram(): Command {
  const program = new Command("kvsim")
    .description("Predict how a vLLM deployment serves a workload, without GPUs: replay traces through modelled vLLM ranks, price every P/D KV handoff, report serving metrics.")
    .version(VERSION, "-V, --version")
    .showHelpAfterError()
    .exitOverride();
  for (const register of COMMANDS) register(program);
  return program;
}

async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version exit 0; every other parse error is bad usage.
      const benign = e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.code === "commander.help";
      process.exitCode = benign ? EXIT_OK : EXIT_BAD_INPUT;
      return;
    }
    throw e;
  }
}

await main(process.argv);
