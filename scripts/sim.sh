#!/usr/bin/env bash
# The README's main command: set up (first use installs the runtime lock
# requirements/runtime.txt only, builds, and prints its stage times), then run the
# MuJoCo simulation bringup headless (sim world, MPC controller and reference as
# separate ROS 2 processes, lockstep) for a fixed simulated duration, and print a
# summary; the bag, a tracking plot and summary.json land in build/sim/<robot>-<time>/.
# Extra arguments go to the bringup (python -m gato_ros.bringup_sim --help), e.g.
#   scripts/sim.sh --robot fr3 --duration 5 --reference goals
# The solver smoke run of before stays available: python -m gato smoke
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
source scripts/activate.sh
exec python -m gato_ros.bringup_sim "$@"
