#!/usr/bin/env bash
# The README's main command: set up (first use installs everything), then run
# the simulation bringup. Extra arguments go to the runner (see --help).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
source scripts/activate.sh
# Until the MuJoCo simulation bringup lands (issue 7), the main job is a
# solver smoke run.
exec python -m gato smoke "$@"
