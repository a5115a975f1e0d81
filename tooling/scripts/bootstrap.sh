#!/usr/bin/env bash
# Brings the pinned Node 24 where the machine's Node is older than 22.12 (tooling/scripts/node.sh),
# installs dependencies (frozen lockfile) and builds every package. Safe to run repeatedly:
# a warm install takes a couple of seconds and turbo replays cached builds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
. "$root/tooling/scripts/node.sh"
kvsim_use_node
echo "kvsim bootstrap: Node $(node --version | cut -c2-) ($(command -v node))" >&2
export TURBO_TELEMETRY_DISABLED=1 CI="${CI:-true}"
pnpm() { bash "$root/tooling/scripts/pnpm.sh" "$@"; }
pnpm install --frozen-lockfile --reporter=silent
pnpm exec turbo run build --output-logs=errors-only
