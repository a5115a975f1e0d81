// @ts-check
// Mutation testing (Stryker) of one package: `pnpm mutate` runs it per package from that
// package's directory (tooling/scripts/mutate.sh). Not part of `npm test`: it takes minutes.
import { fileURLToPath } from "node:url";

// pnpm keeps each package's dependencies apart, so Stryker cannot find its plugins by scanning
// its own node_modules: name them by path.
const plugin = (name) => fileURLToPath(import.meta.resolve(name));

/**
 * @param {{ mutate: string[] }} options the files to mutate, relative to the package
 * @returns {import("@stryker-mutator/api/core").PartialStrykerOptions}
 */
export function strykerConfig({ mutate }) {
  return {
    packageManager: "pnpm",
    plugins: [plugin("@stryker-mutator/vitest-runner"), plugin("@stryker-mutator/typescript-checker")],
    testRunner: "vitest",
    vitest: { configFile: "vitest.config.ts" },
    // Mutants that do not compile are reported as such instead of being run.
    checkers: ["typescript"],
    tsconfigFile: "tsconfig.json",
    coverageAnalysis: "perTest",
    mutate,
    // Only the mutants of changed code (or whose covering tests changed) run again; the file is a
    // local cache beside the report, kept out of git (see the README's Developing section).
    incremental: true,
    incrementalFile: "reports/mutation/incremental.json",
    reporters: ["clear-text", "progress", "html", "json"],
    htmlReporter: { fileName: "reports/mutation/mutation.html" },
    jsonReporter: { fileName: "reports/mutation/mutation.json" },
    // Mutate the package's files where they are instead of in a copy: a copy elsewhere breaks the
    // package's relative paths (../../tooling/vitest.shared.ts, ../../tsconfig.base.json).
    // Stryker restores the files when it ends; do not edit them while it runs.
    inPlace: true,
    thresholds: { high: 90, low: 85, break: null },
    timeoutMS: 10_000,
  };
}
