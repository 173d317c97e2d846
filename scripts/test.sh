#!/usr/bin/env bash
# The README's test command: set up (first use installs everything), then run
# every test. Extra arguments go to pytest (e.g. scripts/test.sh -k solver).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
source scripts/activate.sh
exec python -m pytest "$@"
