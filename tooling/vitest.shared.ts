import { fileURLToPath } from "node:url";
import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

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
      setupFiles: [fileURLToPath(new URL("./vitest.setup.ts", import.meta.url))],
    },
  });
}
