import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * The CLI's bundled examples folder: `../examples` from the built `dist/cli.js`, or
 * `../../examples` from `src/replay/*.ts` when run from source (tests).
 */
export function examplesDir(): string {
  for (const rel of ["../examples/", "../../examples/"]) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(`${dir}replay-pd.yaml`)) return dir;
  }
  throw new Error("the bundled examples folder was not found next to the CLI");
}

/** The spec `kvsim replay` runs with no --spec: a 48-request Mooncake trace on GLM-5.3-Flash in P/D. */
export function defaultSpecPath(): string {
  return `${examplesDir()}replay-pd.yaml`;
}
