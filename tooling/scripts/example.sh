#!/usr/bin/env bash
# The README's main job: bootstrap, then run the bundled example.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bash "$root/tooling/scripts/bootstrap.sh" >&2
node "$root/apps/cli/dist/cli.js" validate "$root/apps/cli/examples/profiles/glm-5.3-flash-tp4-fp8-vllm-0.32.0.json"
