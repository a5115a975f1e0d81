#!/usr/bin/env bash
# The README's test command: bootstrap, then build, typecheck, lint, every test, and the check
# that the generated JSON Schemas are up to date. Ends with one "tests: N passed, N failed" line
# (printed last; a stale schema counts as one failed test) and exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export TURBO_TELEMETRY_DISABLED=1
pnpm() { bash "$root/tooling/scripts/pnpm.sh" "$@"; }
bash tooling/scripts/bootstrap.sh
# Every step below runs on the Node the bootstrap picked (the pinned Node 24 on an older machine).
. "$root/tooling/scripts/node.sh"
kvsim_use_node nofetch
echo "== typecheck and lint"
pnpm exec turbo run typecheck lint --output-logs=errors-only
echo "== tests"
results="$root/.vitest-results.json"
rm -f "$results"
status=0
pnpm exec vitest run --reporter=default --reporter=json --outputFile.json="$results" || status=$?
echo "== JSON Schemas up to date"
schemas_failed=0
pnpm run --silent schemas:check || { status=1; schemas_failed=1; }
node tooling/scripts/summarize-tests.mjs "$results" "$schemas_failed" || status=1
exit "$status"
