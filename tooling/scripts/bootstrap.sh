#!/usr/bin/env bash
# Installs dependencies (frozen lockfile) and builds every package. Safe to run repeatedly:
# a warm install takes a couple of seconds and turbo replays cached builds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export TURBO_TELEMETRY_DISABLED=1 CI="${CI:-true}"
pnpm() { bash "$root/tooling/scripts/pnpm.sh" "$@"; }
pnpm install --frozen-lockfile --reporter=silent
pnpm exec turbo run build --output-logs=errors-only
