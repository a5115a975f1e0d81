// @ts-check
import process from "node:process";
import { strykerConfig } from "../../tooling/stryker.shared.mjs";

// The property tests scale their fast-check runs down under mutation testing (propRuns in
// src/test-helpers.ts reads this): they cover nearly every mutant, so with full runs each
// surviving mutant costs about 25 s. Stryker's test-runner processes inherit this environment.
process.env.KVSIM_MUTATION = "1";
// Instrumented code is several times slower: a minute per test (tooling/vitest.shared.ts reads it).
process.env.KVSIM_TEST_TIMEOUT_MS ??= "60000";

export default strykerConfig({
  mutate: [
    "src/**/*.ts",
    "!src/**/*.test.ts",
    "!src/test-helpers.ts",
    // Test-only oracle (not exported): the property tests compare BlockPool with it, so mutating
    // it tests the tests, not the package.
    "!src/reference-pool.ts",
    "!src/index.ts",
  ],
});
