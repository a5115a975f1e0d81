import process from "node:process";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { mergeConfig } from "vitest/config";
import { packageVitestConfig } from "../../tooling/vitest.shared.js";

const MUTATION = process.env.KVSIM_MUTATION === "1";

/**
 * Under mutation testing: the hand-derived test files first, the property tests (*.prop.test.ts)
 * last. Stryker stops a mutant's run at the first failing test, and vitest's own order puts the
 * slowest files (the properties) first, so a mutant a hand test kills would wait for them.
 */
class HandTestsFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const isProp = (f: TestSpecification): boolean => f.moduleId.endsWith(".prop.test.ts");
    return [...sorted.filter((f) => !isProp(f)), ...sorted.filter(isProp)];
  }
}

// Under mutation testing (KVSIM_MUTATION=1, set by stryker.config.mjs, which also sets the per-test
// limit through KVSIM_TEST_TIMEOUT_MS) the hand tests run first, and the test files share one module
// graph (isolate: false): Stryker switches mutants through a global, not by reloading modules, and
// re-importing every file for every mutant was three quarters of a mutant's time (the whole suite:
// 19.6 s isolated, 4.5 s not). The package's tests keep no state between files.
export default mergeConfig(packageVitestConfig("kv-pool"), MUTATION ? { test: { isolate: false, sequence: { sequencer: HandTestsFirst } } } : {});
