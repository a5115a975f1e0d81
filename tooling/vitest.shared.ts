import { fileURLToPath } from "node:url";
import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

// Two cores shared with builds, typechecks and other test runs can push a test that takes 2 s on
// an idle machine past vitest's 5 s default, so the default here is 30 s per test and per hook;
// KVSIM_TEST_TIMEOUT_MS sets another (tests with their own limit keep it).
const timeoutFromEnv = Number(process.env["KVSIM_TEST_TIMEOUT_MS"]);
const timeoutMs = Number.isFinite(timeoutFromEnv) && timeoutFromEnv > 0 ? timeoutFromEnv : 30_000;

// Workspace packages resolve to their TypeScript sources through the "@kvsim/source" export
// condition, so tests never wait for an upstream build. vitest's node environment reads
// ssr.resolve.conditions, and the array replaces the defaults, hence the spread.
export function packageVitestConfig(name: string) {
  return defineConfig({
    resolve: { conditions: ["@kvsim/source"] },
    ssr: { resolve: { conditions: ["@kvsim/source", ...defaultServerConditions] } },
    test: {
      name,
      include: ["src/**/*.test.ts"],
      testTimeout: timeoutMs,
      hookTimeout: timeoutMs,
      setupFiles: [fileURLToPath(new URL("./vitest.setup.ts", import.meta.url))],
    },
  });
}
