import type { Command } from "commander";

/** Each command module registers itself on the program. Keep one module per command. */
export type RegisterCommand = (program: Command) => void;

export const COMMANDS: readonly RegisterCommand[] = [];
