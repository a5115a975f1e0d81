import { defineConfig } from "vitest/config";

// One process for every package's tests (the fast local loop and CI). turbo still runs the
// per-package `test` tasks for cached, incremental runs.
export default defineConfig({
  test: {
    projects: ["packages/*", "apps/*"],
  },
});
