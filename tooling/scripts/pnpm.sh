#!/usr/bin/env bash
# Runs the pinned pnpm without assuming a global install: a global pnpm of exactly the pinned
# version if present, else npx (which fetches it once into npm's cache). It runs on the Node
# that tooling/scripts/node.sh picks (the pinned Node 24 where the machine's is too old).
set -e
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
. "$root/tooling/scripts/node.sh"
kvsim_use_node
PNPM_VERSION=10.34.9
if command -v pnpm >/dev/null 2>&1 && [ "$(pnpm --version 2>/dev/null)" = "$PNPM_VERSION" ]; then
  exec pnpm "$@"
fi
exec npx -y "pnpm@$PNPM_VERSION" "$@"
