#!/usr/bin/env bash
# The README's test command: bootstrap, then build, typecheck, lint, every test (the packed
# packages' shape and knip's unused-code check among them), and the checks that the generated JSON
# Schemas are up to date and the code is formatted. Ends with one "tests: N passed, N failed" line
# (printed last; a stale schema and unformatted code each count as one failed test) and exits
# non-zero on any failure.
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
echo "== code formatted (prettier; pnpm format rewrites it)"
format_failed=0
pnpm run --silent format:check || { status=1; format_failed=1; }
node tooling/scripts/summarize-tests.mjs "$results" "$((schemas_failed + format_failed))" || status=1
exit "$status"
