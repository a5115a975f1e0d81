// Prints vitest's totals as one plain closing line: "tests: N passed, N failed". A second argument
// counts failed checks run outside vitest (the JSON Schemas check) among the failed.
import { existsSync, readFileSync } from "node:fs";

const file = process.argv[2];
const otherFailed = Number(process.argv[3] ?? 0) || 0;
if (file === undefined || !existsSync(file)) {
  console.error(`no test results at ${file ?? "(none given)"}`);
  console.log(`tests: 0 passed, ${1 + otherFailed} failed`);
  process.exit(1);
}
const r = JSON.parse(readFileSync(file, "utf8"));
const passed = r.numPassedTests ?? 0;
const failed = (r.numFailedTests ?? 0) + (r.numFailedTestSuites ?? 0) + otherFailed;
const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
console.log(`tests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
