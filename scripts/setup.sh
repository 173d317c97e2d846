#!/usr/bin/env bash
# Create or update .venv from requirements/runtime.txt (the runtime lock), fix the
# ROS wheels' CMake paths, build the workspace (gato_core with pip, the ROS packages
# with colcon); with --with-tests also install the test set (requirements/lock.txt,
# the full lock, on top: torch, JAX, warp, Ray, the test tools). Idempotent and fast
# when nothing changed (stamps under .venv/.gato-stamps). Prints the seconds of each
# stage that ran (also in build/setup_stages.tsv).
#
# Usage: scripts/setup.sh [--quiet] [--with-tests]
#   scripts/sim.sh runs it plain (the runtime set only), scripts/test.sh with --with-tests.
# Environment: GATO_BUILD_JOBS  parallel compile jobs (default: the cores, at most one per
#   3 GB of available memory: a pinocchio translation unit needs ~3 GB to compile).
#   GATO_CORE_VARIANTS  which builds of the C++ core: ALL (baseline + AVX2 + gato._cuda_host;
#   the default with the test set), NATIVE (the default for the runtime set alone: the one
#   build this CPU runs, AVX2 or BASELINE), AVX2 or BASELINE (src/gato_core/CMakeLists.txt).
#   GATO_CUDA  AUTO, ON or OFF (below).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/env.sh
QUIET=0; WITH_TESTS=0
for arg in "$@"; do
  case "$arg" in
    --quiet) QUIET=1 ;;
    --with-tests) WITH_TESTS=1 ;;
    *) echo "[setup] ERROR: unknown argument '$arg' (usage: scripts/setup.sh [--quiet] [--with-tests])" >&2; exit 2 ;;
  esac
done
say() { [[ $QUIET == 1 ]] || echo "[setup] $*"; }
die() { echo "[setup] ERROR: $*" >&2; exit 1; }
# A bad build choice is refused before any work (and before waiting for another setup's lock).
case "${GATO_CORE_VARIANTS:-}" in ""|ALL|NATIVE|AVX2|BASELINE) ;;
  *) die "GATO_CORE_VARIANTS: expected ALL, NATIVE, AVX2 or BASELINE, got '$GATO_CORE_VARIANTS'" ;; esac

# --- stage timing: `stage NAME` closes the running stage and opens NAME ------
# Wall time and the CPU time (user + system) of the stage's finished child processes: on a
# shared machine the wall time swings with the load, the CPU time much less.
usec() { local t=${EPOCHREALTIME/./}; echo "${t#0}"; }
cpu_ticks() { local f; read -ra f < "/proc/$$/stat"; echo $(( f[15] + f[16] )); }  # cutime + cstime
TICKS=$(getconf CLK_TCK 2>/dev/null || echo 100)
T_SETUP=$(usec); C_SETUP=$(cpu_ticks); T_STAGE=""; C_STAGE=""; N_STAGE=""; STAGE_ROWS=()
stage() {
  local now cpu; now=$(usec); cpu=$(cpu_ticks)
  [[ -n "$N_STAGE" ]] && STAGE_ROWS+=("$N_STAGE"$'\t'"$(( (now - T_STAGE) / 100000 ))"$'\t'"$(( (cpu - C_STAGE) * 10 / TICKS ))")
  N_STAGE="${1:-}"; T_STAGE=$now; C_STAGE=$cpu
}
tenths() { printf '%d.%d' $(( $1 / 10 )) $(( $1 % 10 )); }
stage_table() {  # the table of the stages that ran, in seconds (also build/setup_stages.tsv)
  stage
  (( ${#STAGE_ROWS[@]} )) || return 0
  local total cpu_total row name t c sum=0 csum=0 tsv="$ROOT/build/setup_stages.tsv"
  total=$(( ($(usec) - T_SETUP) / 100000 )); cpu_total=$(( ($(cpu_ticks) - C_SETUP) * 10 / TICKS ))
  printf 'stage\twall_s\tcpu_s\n' > "$tsv"
  say "$(printf '%-46s %8s %8s' "stage times" "wall s" "CPU s")"
  for row in "${STAGE_ROWS[@]}"; do
    IFS=$'\t' read -r name t c <<< "$row"
    sum=$(( sum + t )); csum=$(( csum + c ))
    say "$(printf '  %-44s %8s %8s' "$name" "$(tenths "$t")" "$(tenths "$c")")"
    printf '%s\t%s\t%s\n' "$name" "$(tenths "$t")" "$(tenths "$c")" >> "$tsv"
  done
  t=$(( total - sum )); c=$(( cpu_total - csum ))
  say "$(printf '  %-44s %8s %8s' "other (checks, hashes, waiting for the lock)" "$(tenths "$t")" "$(tenths "$c")")"
  say "$(printf '  %-44s %8s %8s' "setup total" "$(tenths "$total")" "$(tenths "$cpu_total")")"
  printf 'other\t%s\t%s\nsetup total\t%s\t%s\n' "$(tenths "$t")" "$(tenths "$c")" \
    "$(tenths "$total")" "$(tenths "$cpu_total")" >> "$tsv"
}

# --- system tools a fresh machine must have ---------------------------------
need() {  # need TOOL "how to install"
  command -v "$1" >/dev/null 2>&1 || die "'$1' not found. Install it: $2"
}
need python3 "apt-get install python3 python3-venv python3-dev"
need c++ "apt-get install build-essential (a C++17 compiler)"
need cmake "apt-get install cmake (3.22 or newer)"
python3 - <<'PY' || die "Python >= 3.10 required (found $(python3 --version 2>&1)). Install it: apt-get install python3"
import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY
python3 -c 'import venv, ensurepip' 2>/dev/null || die "python3 venv support missing. Install it: apt-get install python3-venv"
python3 -c 'import sysconfig, os; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null \
  || die "Python headers missing. Install them: apt-get install python3-dev"

# One setup at a time per checkout (parallel test runs share the venv and build dir).
mkdir -p "$ROOT/build"
exec 9>"$ROOT/build/.setup.lock"
flock 9

VENV="$ROOT/.venv"
STAMPS="$VENV/.gato-stamps"
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
stamp_ok() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
stamp_set() { mkdir -p "$STAMPS"; echo "$2" > "$STAMPS/$1"; }

# --- 1. the venv and the pinned dependencies --------------------------------
# requirements/runtime.txt: what the simulation bringup and a robot need (numpy, pin, mujoco,
# the ROS wheels, colcon, ...). requirements/lock.txt: the full lock, the same pins plus the
# test set, installed on top with --with-tests. Both are fully pinned and closed under their
# dependencies (scripts/runtime_lock.py, test/test_install_locks.py): --no-deps spares pip the
# resolution.
if [[ ! -x "$VENV/bin/python" ]]; then
  stage "venv"
  say "creating .venv"
  python3 -m venv "$VENV"
fi
source "$VENV/bin/activate"
RUNTIME_HASH=$(hash_of requirements/runtime.txt)
FULL_HASH=$(hash_of requirements/lock.txt)
# A workspace set up before the split (one stamp 'lock') holds the full lock: where every pin of
# requirements/lock.txt is installed as pinned, carry its stamps over instead of reinstalling
# (and rebuilding) anything.
if [[ -f "$STAMPS/lock" ]]; then
  if python - requirements/lock.txt <<'PY'
import importlib.metadata as md, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
have = {norm(d.metadata["Name"]): d.version for d in md.distributions()}
pins = [ln.split("==") for ln in open(sys.argv[1]).read().split() if "==" in ln]
sys.exit(0 if all(have.get(norm(n)) == v for n, v in pins) else 1)
PY
  then
    stamp_set runtime "$RUNTIME_HASH"; stamp_set tests "$FULL_HASH"
    [[ -f "$STAMPS/sdk" ]] && sed -i "s/-$(cat "$STAMPS/lock")\$/-$RUNTIME_HASH/" "$STAMPS/sdk"
  fi
  rm -f "$STAMPS/lock"
fi
if ! stamp_ok runtime "$RUNTIME_HASH"; then
  stage "pip: runtime lock ($(grep -c '==' requirements/runtime.txt) pins)"
  say "installing the runtime lock requirements/runtime.txt (first run: a minute or two)"
  python -m pip install -q --upgrade pip
  python -m pip install -q --no-deps -r requirements/runtime.txt
  # The ROS wheels' CMake exports name the paths of the machine they were
  # built on; point them at this venv's Python and numpy headers.
  PYINC=$(python -c 'import sysconfig;print(sysconfig.get_paths()["include"])')
  NPINC=$(python -c 'import numpy;print(numpy.get_include())')
  { grep -rlZ --include='*.cmake' /opt/python/ "$VENV/share" 2>/dev/null || true; } | xargs -0 -r sed -i \
    -e "s#/opt/python/cp[0-9]*-cp[0-9]*/include/python3\.[0-9]*#$PYINC#g" \
    -e "s#/opt/python/cp[0-9]*-cp[0-9]*/lib/python3\.[0-9]*/site-packages/numpy/_core/include#$NPINC#g"
  stamp_set runtime "$RUNTIME_HASH"
  rm -f "$STAMPS/core" "$STAMPS/colcon"   # rebuild against the new dependencies
fi
if [[ $WITH_TESTS == 1 ]] && ! stamp_ok tests "$FULL_HASH"; then
  stage "pip: test set (requirements/lock.txt on top)"
  say "installing the test set: requirements/lock.txt on top of the runtime lock (first run: a minute or two)"
  # The test set adds ~2 GB to the venv (torch's CPU build, JAX, warp, Ray) and pip unpacks
  # wheels in its temp folder first: name a short disk before pip fails half-way with ENOSPC.
  FREE_MB=$(df -Pm "$VENV" | awk 'NR==2 {print $4}')
  if [[ -n "$FREE_MB" && "$FREE_MB" -lt 3000 ]]; then
    say "warning: only ${FREE_MB} MB free on the disk of $VENV; the test set needs about 3000 MB (installed plus pip's unpacking)"
  fi
  python -m pip install -q --no-deps -r requirements/lock.txt
  stamp_set tests "$FULL_HASH"
fi

# --- 1b. the ROS 2 overlay: what PyPI lacks (rclcpp, ros2_control, launch, ros2 CLI, rosbag2)
# Where the project's prebuilt overlay sits beside the checkout (../shared/ros2_sdk: dev
# machines and CI) it is extracted into build/ros2_sdk and sourced by scripts/activate.sh.
# A sourced system ROS 2 (/opt/ros/<distro>, robots and the Docker image) plays its part
# instead. Without either, the ros2_control plugin is not built and the tests that need
# the real ROS 2 tools skip; everything else works from the wheels.
SDK_TARBALL="${GATO_ROS2_SDK_TARBALL:-$(ls "$ROOT"/../shared/ros2_sdk/ros2-control-sdk-*.tar.xz 2>/dev/null | head -1)}"
SDK_DIR="$ROOT/build/ros2_sdk"
SDK_HASH=none
if [[ -n "$SDK_TARBALL" && -f "$SDK_TARBALL" ]]; then
  SDK_HASH=$( (stat -c '%s %Y' "$SDK_TARBALL"; basename "$SDK_TARBALL") | sha256sum | cut -c1-16)
  if ! stamp_ok sdk "$SDK_HASH-$RUNTIME_HASH" || [[ ! -f "$SDK_DIR/ros2-control-sdk/setup.bash" ]]; then
    stage "ROS 2 overlay: extract + its pip pins"
    say "extracting the ROS 2 overlay $(basename "$SDK_TARBALL") into build/ros2_sdk"
    rm -rf "$SDK_DIR"; mkdir -p "$SDK_DIR"
    tar -xJf "$SDK_TARBALL" -C "$SDK_DIR" || die "could not extract $SDK_TARBALL"
    SDK_SHARE="$SDK_DIR/ros2-control-sdk/share/ros2_sdk"
    # The overlay is built against the lock's exact ros-* wheels (its README): refuse a mismatch
    # here instead of failing late and obscurely in a C++ process.
    if ! diff <(python -m pip freeze 2>/dev/null | grep -E '^ros-' | sort) \
              <(grep -E '^ros-' "$SDK_SHARE/built-against.txt" | sort) >/dev/null; then
      die "requirements/runtime.txt's ros-* wheels differ from those the overlay was built against ($SDK_SHARE/built-against.txt); the overlay needs a rebuild for this lock"
    fi
    say "installing the overlay's pinned Python requirements"
    python -m pip install -q -r "$SDK_SHARE/requirements-runtime.txt" -r "$SDK_SHARE/requirements-build.txt"
    # Two more wheel CMake exports name the wheel builder's libraries (the overlay README);
    # both libraries carry their own copies, so the entries are dropped (idempotent).
    sed -i 's#/usr/lib64/libtinyxml2\.so;##' "$VENV/share/fastdds/cmake/fastdds-shared-targets.cmake"
    sed -i -e 's#"lttng-ust;dl#"dl#' "$VENV/share/tracetools/cmake/ament_cmake_export_libraries-extras.cmake" \
      "$VENV/share/tracetools/cmake/tracetools_exportExport.cmake"
    stamp_set sdk "$SDK_HASH-$RUNTIME_HASH"
  fi
  # Building C++ packages against the overlay (the ros2_control plugin) needs these Debian
  # dev packages (the overlay README's list); run time needs none.
  SDK_DEBS="libfmt-dev libtinyxml2-dev liburdfdom-dev liburdfdom-headers-dev libconsole-bridge-dev libboost-dev libeigen3-dev libcap-dev liborocos-kdl-dev libexpected-dev"
  missing_debs=""
  for d in $SDK_DEBS; do dpkg -s "$d" >/dev/null 2>&1 || missing_debs="$missing_debs $d"; done
  if [[ -n "$missing_debs" ]]; then
    if [[ $EUID == 0 ]] && command -v apt-get >/dev/null; then
      stage "apt: the overlay's Debian dev packages"
      say "apt-get install$missing_debs (to build the ros2_control plugin)"
      { DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing_debs >/dev/null 2>&1 ||
        { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing_debs >/dev/null 2>&1; }; } ||
        die "apt-get install$missing_debs failed"
    else
      die "building against the ROS 2 overlay needs Debian packages:$missing_debs. Install them: sudo apt-get install$missing_debs"
    fi
  fi
  echo "$SDK_DIR/ros2-control-sdk" > "$ROOT/build/ros2_overlay"
elif [[ -n "${ROS_DISTRO:-}" && -d "/opt/ros/${ROS_DISTRO}" ]]; then
  SDK_HASH="system-$ROS_DISTRO"
  say "using the sourced system ROS 2 ($ROS_DISTRO) for the ros2_control plugin and the ROS 2 tools"
  rm -f "$ROOT/build/ros2_overlay"
else
  say "no ROS 2 overlay (../shared/ros2_sdk) and no sourced /opt/ros: the ros2_control plugin is not built and the tests that need the ros2 CLI / launch / ros2_control skip"
  rm -f "$ROOT/build/ros2_overlay"
fi

# --- 2. gato_core: the C++ core and the Python package ----------------------
# The CUDA backend's module gato._cuda builds where nvcc is found (GATO_CUDA=AUTO; ON
# requires nvcc, OFF skips it; docs/cuda.md): the choice and the compiler are in the hash.
# Default: AUTO in a workspace with the test set (scripts/test.sh: CI tests gato._cuda where
# nvcc is), OFF for the runtime set alone (scripts/sim.sh runs the CPU backend; the module costs
# 1-2.5 min of a first build: docs/cuda.md).
if [[ -z "${GATO_CUDA:-}" ]]; then
  if [[ $WITH_TESTS == 1 || -f "$STAMPS/tests" ]]; then GATO_CUDA=AUTO; else GATO_CUDA=OFF; fi
fi
case "$GATO_CUDA" in AUTO|ON|OFF) ;; *) die "GATO_CUDA: expected AUTO, ON or OFF, got '$GATO_CUDA'" ;; esac
# Which builds of the core: every one (ALL) with the test set, which checks them against each
# other, and in the wheel / Docker images; for the runtime set alone only the build this CPU
# runs (NATIVE -> AVX2 where the CPU reports AVX2 and FMA, as gato.core.native decides, else
# BASELINE): one solver build instead of two and no gato._cuda_host, ~40 % less to compile.
# Adding the test set later (scripts/test.sh) rebuilds the core with every build.
if [[ -z "${GATO_CORE_VARIANTS:-}" ]]; then
  if [[ $WITH_TESTS == 1 || -f "$STAMPS/tests" ]]; then GATO_CORE_VARIANTS=ALL; else GATO_CORE_VARIANTS=NATIVE; fi
fi
if [[ $GATO_CORE_VARIANTS == NATIVE ]]; then
  GATO_CORE_VARIANTS=BASELINE
  if [[ "$(uname -m)" == x86_64 ]] && grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qw avx2 &&
     grep -m1 '^flags' /proc/cpuinfo | grep -qw fma; then
    GATO_CORE_VARIANTS=AVX2
  fi
fi
CUDA_KEY="$GATO_CUDA $(command -v nvcc || echo no-nvcc) $GATO_CORE_VARIANTS"
CORE_HASH=$( (cd src/gato_core && find . -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.py' -o -name '*.txt' -o -name '*.toml' -o -name '*.json' -o -name '*.urdf' -o -name '*.in' \) -not -path './build/*' -print0 | sort -z | xargs -0 sha256sum; echo "$CUDA_KEY") | sha256sum | cut -c1-16)
# Compile jobs: the cores, at most one per 3 GB of available memory (a pinocchio translation
# unit needs ~3 GB; more jobs than that swap or get killed).
if [[ -z "${GATO_BUILD_JOBS:-}" ]]; then
  _mem_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
  GATO_BUILD_JOBS=$(( _mem_kb / (3 * 1024 * 1024) ))
  _cores=$(nproc 2>/dev/null || echo 1)
  (( GATO_BUILD_JOBS > _cores )) && GATO_BUILD_JOBS=$_cores
  (( GATO_BUILD_JOBS < 1 )) && GATO_BUILD_JOBS=1
fi
[[ "$GATO_BUILD_JOBS" =~ ^[1-9][0-9]*$ ]] || die "GATO_BUILD_JOBS: expected a positive integer, got '$GATO_BUILD_JOBS'"

# The colcon environment (step 3, and the packages built beside step 2).
ROS_HASH=$( (find src/gato_msgs src/gato_ros src/gato_bringup src/gato_description src/vendor -type f -not -name '*.pyc' -print0 2>/dev/null | sort -z | xargs -0 sha256sum; echo "$SDK_HASH $CORE_HASH") | sha256sum | cut -c1-16)
COLCON_NEEDED=0
if ! stamp_ok colcon "$ROS_HASH" || [[ ! -f install/setup.bash ]]; then COLCON_NEEDED=1; fi
colcon_env() {  # source the ROS 2 overlay into this shell; set COLCON_AMENT_PREFIX, VENDOR_SKIP, EARLY_PACKAGES
  COLCON_AMENT_PREFIX="$VENV"
  if [[ -f "$ROOT/build/ros2_overlay" ]]; then
    # The overlay's setup.bash puts its prefix on AMENT/CMAKE_PREFIX_PATH and its libraries
    # on LD_LIBRARY_PATH (the linker needs them for the plugin).
    set +u; source "$(cat "$ROOT/build/ros2_overlay")/setup.bash"; set -u
    COLCON_AMENT_PREFIX="$AMENT_PREFIX_PATH"
  fi
  # src/vendor/visualization_msgs (message definitions neither the wheels nor the overlay
  # have): built here only where the environment lacks the package, so that a full ROS 2
  # install keeps its own (src/vendor/visualization_msgs/VENDORED.md).
  VENDOR_SKIP=(); EARLY_PACKAGES=(gato_msgs gato_description visualization_msgs)
  local prefixes p
  IFS=: read -ra prefixes <<< "$COLCON_AMENT_PREFIX"
  for p in "${prefixes[@]}"; do
    [[ -z "$p" || "$p" == "$ROOT/install"* ]] && continue
    if [[ -e "$p/share/ament_index/resource_index/packages/visualization_msgs" ]]; then
      VENDOR_SKIP=(--packages-skip visualization_msgs); EARLY_PACKAGES=(gato_msgs gato_description)
    fi
  done
}
colcon_build() {  # colcon_build LOG [colcon arguments]: the workspace's colcon build, output to LOG
  local log="$1"; shift
  AMENT_PREFIX_PATH="$COLCON_AMENT_PREFIX" colcon --log-base build/colcon-log build \
    --base-paths src --build-base build/colcon --install-base install \
    --packages-ignore gato_core "${VENDOR_SKIP[@]}" --event-handlers console_cohesion- summary- status- "$@" \
    > "$log" 2>&1
}

if ! stamp_ok core "$CORE_HASH"; then
  EARLY_PID=""
  if [[ $COLCON_NEEDED == 1 ]]; then
    # The message and description packages need no gato_core: colcon builds them beside the
    # core, niced (the core's compile jobs keep the CPU they want; these fill its serial links
    # and pip's packaging), in a subshell (the overlay's environment stays out of the core's
    # CMake). Step 3 finds them built; it builds them itself if this failed.
    stage "gato_core build (pip, -j$GATO_BUILD_JOBS, $GATO_CORE_VARIANTS) + colcon msgs beside it"
    (
      renice -n 10 -p "$BASHPID" >/dev/null 2>&1 || true
      t0=$(usec); colcon_env
      rc=0; colcon_build build/colcon-early.log --packages-select "${EARLY_PACKAGES[@]}" || rc=$?
      echo "${EARLY_PACKAGES[*]}: rc $rc, $(( ($(usec) - t0) / 1000000 )) s" > build/colcon-early.status
      exit $rc
    ) &
    EARLY_PID=$!
  else
    stage "gato_core build (pip, -j$GATO_BUILD_JOBS, $GATO_CORE_VARIANTS)"
  fi
  say "building gato_core (C++ core + pybind11, builds: $GATO_CORE_VARIANTS, $GATO_BUILD_JOBS jobs; first build: a few minutes)"
  # No build isolation: the venv already holds the pinned build dependencies,
  # and the persistent build dir makes rebuilds incremental.
  core_rc=0
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$GATO_BUILD_JOBS}" \
    python -m pip install -q --no-build-isolation --no-deps \
      -Cbuild-dir="$ROOT/build/gato_core" -Ccmake.define.GATO_CUDA="$GATO_CUDA" \
      -Ccmake.define.GATO_CORE_VARIANTS="$GATO_CORE_VARIANTS" ./src/gato_core || core_rc=$?
  if [[ -n "$EARLY_PID" ]]; then
    if wait "$EARLY_PID"; then say "colcon built $(cat build/colcon-early.status) beside the core"
    else say "colcon's early build beside the core failed ($(cat build/colcon-early.status 2>/dev/null || echo "no status"); build/colcon-early.log): step 3 builds them"; fi
  fi
  [[ $core_rc == 0 ]] || die "building gato_core failed (pip exit code $core_rc)"
  stamp_set core "$CORE_HASH"
fi

# --- 3. the ROS packages with colcon ----------------------------------------
if [[ $COLCON_NEEDED == 1 ]]; then
  stage "colcon build (ROS packages)"
  say "building ROS packages with colcon"
  colcon_env
  colcon_build build/colcon.log || { tail -40 build/colcon.log; die "colcon build failed (full log: build/colcon.log)"; }
  # With ROS 2 (overlay or system) the ros2_control plugin must be there. gato_ros's CMake
  # decides at configure time and is not re-configured when gato_core's package appears or
  # changes later: configure it again once before giving up.
  plugin_status() { cat build/colcon/gato_ros/gato_plugin_status 2>/dev/null || echo "unknown"; }
  if [[ "$SDK_HASH" != none && "$(plugin_status)" != built ]]; then
    say "the gato ros2_control plugin was not built ($(plugin_status)): configuring gato_ros again"
    colcon_build build/colcon.log --packages-select gato_ros --cmake-force-configure ||
      { tail -40 build/colcon.log; die "colcon build failed (full log: build/colcon.log)"; }
    [[ "$(plugin_status)" == built ]] || die "the gato ros2_control plugin was not built although ROS 2 is present: $(plugin_status) (full log: build/colcon.log)"
  fi
  stamp_set colcon "$ROS_HASH"
fi
stage_table
say "ready"
