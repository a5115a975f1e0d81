/**
 * The entry of the sweep's worker threads: dist/point-worker.js beside the built CLI (tsup builds
 * it on its own, every dependency bundled in). Run from source (tests), this file is a .ts module
 * and the entry is point-worker.ts, which @kvsim/sweep-threads runs under tsx. A module with no
 * import: cli.ts reads it before the CLI's modules load.
 */
export const pointWorkerEntry = (): URL => new URL(import.meta.url.endsWith(".ts") ? "./point-worker.ts" : "./point-worker.js", import.meta.url);
