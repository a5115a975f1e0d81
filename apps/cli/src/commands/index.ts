import type { Command } from "commander";
import type { CommandContext } from "../io.js";

/** Each command module registers itself on the program. Keep one module per command. */
export type RegisterCommand = (program: Command, ctx: CommandContext) => void;

/**
 * The command modules, in the order `kvsim --help` lists them, each under the top-level command
 * it registers (`profile` has two modules, one per subcommand). A module is imported only when
 * the command line needs it (see `commandsFor`), so a command does not load every other
 * command's code and dependencies before it starts.
 */
const COMMANDS: readonly { readonly name: string; readonly load: () => Promise<RegisterCommand> }[] = [
  { name: "transfer", load: async () => (await import("./transfer.js")).registerTransfer },
  { name: "validate", load: async () => (await import("./validate.js")).registerValidate },
  { name: "schemas", load: async () => (await import("./schemas.js")).registerSchemas },
  { name: "engine", load: async () => (await import("./engine.js")).registerEngine },
  { name: "dynamo", load: async () => (await import("./dynamo.js")).registerDynamo },
  { name: "replay", load: async () => (await import("./replay.js")).registerReplay },
  { name: "profile", load: async () => (await import("./profile-from-hf.js")).registerProfileFromHf },
  { name: "profile", load: async () => (await import("./profile-show.js")).registerProfileShow },
  { name: "gpus", load: async () => (await import("./gpus.js")).registerGpus },
  { name: "sweep", load: async () => (await import("./sweep.js")).registerSweep },
  { name: "plan", load: async () => (await import("./plan.js")).registerPlan },
  { name: "worker", load: async () => (await import("./worker.js")).registerWorker },
  { name: "diff", load: async () => (await import("./diff.js")).registerDiff },
  { name: "compare", load: async () => (await import("./compare.js")).registerCompare },
  { name: "calibrate", load: async () => (await import("./calibrate.js")).registerCalibrate },
  { name: "trace", load: async () => (await import("./trace.js")).registerTrace },
  { name: "spec", load: async () => (await import("./spec.js")).registerSpec },
];

/**
 * The command modules a command line needs: those of the command it names first; none for a bare
 * `--version`; every one otherwise (`--help`, `help`, a missing or unknown command, which
 * commander lists or suggests from all of them).
 */
export function commandsFor(argv: readonly string[]): Promise<RegisterCommand[]> {
  const first = argv[0];
  if (argv.length === 1 && (first === "--version" || first === "-V")) return Promise.resolve([]);
  const named = COMMANDS.filter((c) => c.name === first);
  return Promise.all((named.length > 0 ? named : COMMANDS).map((c) => c.load()));
}
