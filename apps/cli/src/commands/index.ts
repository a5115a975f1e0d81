import type { Command } from "commander";
import type { CommandContext } from "../io.js";
import { registerTransfer } from "./transfer.js";

/** Each command module registers itself on the program. Keep one module per command. */
export type RegisterCommand = (program: Command, ctx: CommandContext) => void;

export const COMMANDS: readonly RegisterCommand[] = [registerTransfer];
