#!/usr/bin/env bash
# Mutation testing with Stryker, package by package, in incremental mode (a re-run tests only the
# mutants of changed code). Not part of `npm test`: a full run takes minutes per package.
#
#   pnpm mutate                                   # every package with a stryker.config.mjs
#   pnpm mutate transfer-rules profile-schema     # some packages (directory names)
#   pnpm mutate transfer-rules -- --concurrency 1 # extra Stryker options after --
#
# Reports: packages/<name>/reports/mutation/mutation.html (and .json); the incremental cache
# beside them. Both are ignored by git.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Stryker runs on the Node the bootstrap picked (tooling/scripts/node.sh).
. "$root/tooling/scripts/node.sh"
kvsim_use_node nofetch || { echo "mutate: run bash tooling/scripts/bootstrap.sh first (it fetches Node 24)" >&2; exit 2; }
packages=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    *) packages+=("$1"); shift ;;
  esac
done
if [ ${#packages[@]} -eq 0 ]; then
  for config in "$root"/packages/*/stryker.config.mjs; do packages+=("$(basename "$(dirname "$config")")"); done
fi
stryker="$root/node_modules/.bin/stryker"
[ -x "$stryker" ] || { echo "mutate: Stryker is not installed; run bash tooling/scripts/bootstrap.sh first" >&2; exit 2; }
for name in "${packages[@]}"; do
  dir="$root/packages/$name"
  [ -f "$dir/stryker.config.mjs" ] || { echo "mutate: packages/$name has no stryker.config.mjs" >&2; exit 2; }
done
status=0
for name in "${packages[@]}"; do
  echo "== mutate packages/$name"
  start=$(date +%s)
  (cd "$root/packages/$name" && "$stryker" run stryker.config.mjs "$@") || status=1
  echo "== packages/$name: $(( $(date +%s) - start )) s; report packages/$name/reports/mutation/mutation.html"
done
exit "$status"
