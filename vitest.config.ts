import { defineConfig } from "vitest/config";

// One process for every package's tests (the fast local loop and CI). turbo still runs the
// per-package `test` tasks for cached, incremental runs.
export default defineConfig({
  test: {
    projects: [
      "packages/*",
      "apps/*",
      // Checks of the repository as a whole: the packed packages' shape, unused code (knip).
      { test: { name: "repository", include: ["tooling/tests/*.test.ts"], testTimeout: 120_000 } },
    ],
  },
});
