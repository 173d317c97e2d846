#!/usr/bin/env bash
# Create or update .venv from requirements/lock.txt, fix the ROS wheels' CMake
# paths, build the workspace (gato_core with pip, the ROS packages with colcon).
# Idempotent and fast when nothing changed (stamps under .venv/.gato-stamps).
#
# Usage: scripts/setup.sh [--quiet]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/env.sh
QUIET=0; [[ "${1:-}" == "--quiet" ]] && QUIET=1
say() { [[ $QUIET == 1 ]] || echo "[setup] $*"; }
die() { echo "[setup] ERROR: $*" >&2; exit 1; }

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
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating .venv"
  python3 -m venv "$VENV"
fi
source "$VENV/bin/activate"
LOCK_HASH=$(hash_of requirements/lock.txt)
if ! stamp_ok lock "$LOCK_HASH"; then
  say "installing pinned dependencies (first run: a few minutes)"
  python -m pip install -q --upgrade pip
  python -m pip install -q -r requirements/lock.txt
  # The ROS wheels' CMake exports name the paths of the machine they were
  # built on; point them at this venv's Python and numpy headers.
  PYINC=$(python -c 'import sysconfig;print(sysconfig.get_paths()["include"])')
  NPINC=$(python -c 'import numpy;print(numpy.get_include())')
  { grep -rlZ --include='*.cmake' /opt/python/ "$VENV/share" 2>/dev/null || true; } | xargs -0 -r sed -i \
    -e "s#/opt/python/cp[0-9]*-cp[0-9]*/include/python3\.[0-9]*#$PYINC#g" \
    -e "s#/opt/python/cp[0-9]*-cp[0-9]*/lib/python3\.[0-9]*/site-packages/numpy/_core/include#$NPINC#g"
  stamp_set lock "$LOCK_HASH"
  rm -f "$STAMPS/core" "$STAMPS/colcon"   # rebuild against the new dependencies
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
  if ! stamp_ok sdk "$SDK_HASH-$LOCK_HASH" || [[ ! -f "$SDK_DIR/ros2-control-sdk/setup.bash" ]]; then
    say "extracting the ROS 2 overlay $(basename "$SDK_TARBALL") into build/ros2_sdk"
    rm -rf "$SDK_DIR"; mkdir -p "$SDK_DIR"
    tar -xJf "$SDK_TARBALL" -C "$SDK_DIR" || die "could not extract $SDK_TARBALL"
    SDK_SHARE="$SDK_DIR/ros2-control-sdk/share/ros2_sdk"
    # The overlay is built against the lock's exact ros-* wheels (its README): refuse a mismatch
    # here instead of failing late and obscurely in a C++ process.
    if ! diff <(python -m pip freeze 2>/dev/null | grep -E '^ros-' | sort) \
              <(grep -E '^ros-' "$SDK_SHARE/built-against.txt" | sort) >/dev/null; then
      die "requirements/lock.txt's ros-* wheels differ from those the overlay was built against ($SDK_SHARE/built-against.txt); the overlay needs a rebuild for this lock"
    fi
    say "installing the overlay's pinned Python requirements"
    python -m pip install -q -r "$SDK_SHARE/requirements-runtime.txt" -r "$SDK_SHARE/requirements-build.txt"
    # Two more wheel CMake exports name the wheel builder's libraries (the overlay README);
    # both libraries carry their own copies, so the entries are dropped (idempotent).
    sed -i 's#/usr/lib64/libtinyxml2\.so;##' "$VENV/share/fastdds/cmake/fastdds-shared-targets.cmake"
    sed -i -e 's#"lttng-ust;dl#"dl#' "$VENV/share/tracetools/cmake/ament_cmake_export_libraries-extras.cmake" \
      "$VENV/share/tracetools/cmake/tracetools_exportExport.cmake"
    stamp_set sdk "$SDK_HASH-$LOCK_HASH"
  fi
  # Building C++ packages against the overlay (the ros2_control plugin) needs these Debian
  # dev packages (the overlay README's list); run time needs none.
  SDK_DEBS="libfmt-dev libtinyxml2-dev liburdfdom-dev liburdfdom-headers-dev libconsole-bridge-dev libboost-dev libeigen3-dev libcap-dev liborocos-kdl-dev libexpected-dev"
  missing_debs=""
  for d in $SDK_DEBS; do dpkg -s "$d" >/dev/null 2>&1 || missing_debs="$missing_debs $d"; done
  if [[ -n "$missing_debs" ]]; then
    if [[ $EUID == 0 ]] && command -v apt-get >/dev/null; then
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
GATO_CUDA="${GATO_CUDA:-AUTO}"
case "$GATO_CUDA" in AUTO|ON|OFF) ;; *) die "GATO_CUDA: expected AUTO, ON or OFF, got '$GATO_CUDA'" ;; esac
CUDA_KEY="$GATO_CUDA $(command -v nvcc || echo no-nvcc)"
CORE_HASH=$( (cd src/gato_core && find . -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.py' -o -name '*.txt' -o -name '*.toml' -o -name '*.json' -o -name '*.urdf' -o -name '*.in' \) -not -path './build/*' -print0 | sort -z | xargs -0 sha256sum; echo "$CUDA_KEY") | sha256sum | cut -c1-16)
if ! stamp_ok core "$CORE_HASH"; then
  say "building gato_core (C++ core + pybind11; first build: a few minutes)"
  # No build isolation: the venv already holds the pinned build dependencies,
  # and the persistent build dir makes rebuilds incremental.
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    python -m pip install -q --no-build-isolation --no-deps \
      -Cbuild-dir="$ROOT/build/gato_core" -Ccmake.define.GATO_CUDA="$GATO_CUDA" ./src/gato_core
  stamp_set core "$CORE_HASH"
fi

# --- 3. the ROS packages with colcon ----------------------------------------
ROS_HASH=$( (find src/gato_msgs src/gato_ros src/gato_bringup src/gato_description src/vendor -type f -not -name '*.pyc' -print0 2>/dev/null | sort -z | xargs -0 sha256sum; echo "$SDK_HASH $CORE_HASH") | sha256sum | cut -c1-16)
if ! stamp_ok colcon "$ROS_HASH" || [[ ! -f install/setup.bash ]]; then
  say "building ROS packages with colcon"
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
  VENDOR_SKIP=()
  IFS=: read -ra _prefixes <<< "$COLCON_AMENT_PREFIX"
  for _p in "${_prefixes[@]}"; do
    [[ -z "$_p" || "$_p" == "$ROOT/install"* ]] && continue
    [[ -e "$_p/share/ament_index/resource_index/packages/visualization_msgs" ]] && VENDOR_SKIP=(--packages-skip visualization_msgs)
  done
  colcon_build() {
    AMENT_PREFIX_PATH="$COLCON_AMENT_PREFIX" colcon --log-base build/colcon-log build \
      --base-paths src --build-base build/colcon --install-base install \
      --packages-ignore gato_core "${VENDOR_SKIP[@]}" --event-handlers console_cohesion- summary- status- "$@" \
      > build/colcon.log 2>&1 || { tail -40 build/colcon.log; die "colcon build failed (full log: build/colcon.log)"; }
  }
  colcon_build
  # With ROS 2 (overlay or system) the ros2_control plugin must be there. gato_ros's CMake
  # decides at configure time and is not re-configured when gato_core's package appears or
  # changes later: configure it again once before giving up.
  plugin_status() { cat build/colcon/gato_ros/gato_plugin_status 2>/dev/null || echo "unknown"; }
  if [[ "$SDK_HASH" != none && "$(plugin_status)" != built ]]; then
    say "the gato ros2_control plugin was not built ($(plugin_status)): configuring gato_ros again"
    colcon_build --packages-select gato_ros --cmake-force-configure
    [[ "$(plugin_status)" == built ]] || die "the gato ros2_control plugin was not built although ROS 2 is present: $(plugin_status) (full log: build/colcon.log)"
  fi
  stamp_set colcon "$ROS_HASH"
fi
say "ready"
