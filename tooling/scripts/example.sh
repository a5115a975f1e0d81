#!/usr/bin/env bash
# The README's main job: bootstrap, then run the bundled example (kvsim replay's embedded
# default: a small synthetic trace on GLM-5.3-Flash in P/D, printed as the report table).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bash "$root/tooling/scripts/bootstrap.sh" >&2
. "$root/tooling/scripts/node.sh"
kvsim_use_node nofetch
node "$root/apps/cli/dist/cli.js" replay
