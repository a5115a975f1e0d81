import type { Command } from "commander";
import type { CommandContext } from "../io.js";
import { registerTransfer } from "./transfer.js";
import { registerDynamo } from "./dynamo.js";
import { registerEngine } from "./engine.js";
import { registerSchemas } from "./schemas.js";
import { registerValidate } from "./validate.js";
import { registerReplay } from "./replay.js";
import { registerProfileFromHf } from "./profile-from-hf.js";
import { registerProfileShow } from "./profile-show.js";
import { registerSweep } from "./sweep.js";
import { registerWorker } from "./worker.js";
import { registerDiff } from "./diff.js";
import { registerCompare } from "./compare.js";
import { registerCalibrate } from "./calibrate.js";
import { registerTrace } from "./trace.js";

/** Each command module registers itself on the program. Keep one module per command. */
export type RegisterCommand = (program: Command, ctx: CommandContext) => void;

export const COMMANDS: readonly RegisterCommand[] = [registerTransfer, registerValidate, registerSchemas, registerEngine, registerDynamo, registerReplay, registerProfileFromHf, registerProfileShow, registerSweep, registerWorker, registerDiff, registerCompare, registerCalibrate, registerTrace];
