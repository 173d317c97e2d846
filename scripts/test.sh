#!/usr/bin/env bash
# The README's test command: set up with the test set (first use installs the runtime
# lock, then requirements/lock.txt's test set on top: torch, JAX, warp, Ray, pytest
# tools; stamped, so later runs skip it), then run every test. Extra arguments go to
# pytest (e.g. scripts/test.sh -k solver).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh --with-tests
source scripts/activate.sh
exec python -m pytest "$@"
