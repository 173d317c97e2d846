#!/usr/bin/env bash
# The one install script of both gato images (docker/ros.Dockerfile and
# docker/cuda.Dockerfile): every apt package, the Python venv and the colcon
# build are defined here, so the CPU and CUDA images cannot drift apart.
#
# Run from the workspace root inside the image (the Dockerfiles' WORKDIR), one
# step per Docker layer so that editing src/ does not reinstall apt packages:
#
#   install_workspace.sh ros-base     ROS 2 from the ROS apt repository (only for
#                                     base images without ROS, i.e. the CUDA image)
#   install_workspace.sh apt          ros2_control, controllers, xacro, rosbag2+mcap,
#                                     rqt tools, compilers, python3-venv
#   install_workspace.sh python       venv (--system-site-packages) with the pinned
#                                     packages of requirements/runtime.txt (the runtime
#                                     lock: no test set) minus what apt provides
#                                     (docker/lock_for_ros_image.py)
#   install_workspace.sh build [CMAKE_ARG...]
#                                     colcon build --symlink-install, Release; extra
#                                     CMake arguments go to gato_core
#
# Environment (the Dockerfiles set these):
#   ROS_DISTRO       kilted | jazzy (required)
#   GATO_VENV        the venv (default /opt/gato-venv)
#   GATO_BUILD_JOBS  parallel compile jobs (default 2; one pinocchio translation
#                    unit needs ~3 GB of memory to compile)
#   ROS_APT_SOURCE_VERSION  ros2-apt-source release for `ros-base` (default:
#                    the latest release, looked up on GitHub)
set -euo pipefail

GATO_VENV="${GATO_VENV:-/opt/gato-venv}"
GATO_BUILD_JOBS="${GATO_BUILD_JOBS:-2}"
export DEBIAN_FRONTEND=noninteractive

say() { echo "[install_workspace] $*"; }
die() { echo "[install_workspace] ERROR: $*" >&2; exit 1; }

[[ -n "${ROS_DISTRO:-}" ]] || die "ROS_DISTRO is not set (kilted or jazzy)"

# The ROS packages every gato image carries (names are ros-$ROS_DISTRO-<name>).
ROS_PACKAGES=(
  ros2-control              # controller_manager, hardware_interface, realtime_tools
  ros2-controllers
  controller-manager
  joint-state-broadcaster
  effort-controllers        # JointGroupEffortController: <controller>/commands
  realtime-tools            # the gato plugin (gato_ros/GatoController): RealtimePublisher
  generate-parameter-library  # the gato plugin's parameters (gato_controller_parameters.yaml)
  xacro
  robot-state-publisher
  rosbag2
  rosbag2-storage-mcap
  rqt
  rqt-reconfigure
  rqt-plot
)
# Build tools and what gato_core needs to compile against the venv's Python.
SYSTEM_PACKAGES=(
  build-essential
  cmake
  git
  python3-dev
  python3-venv
  python3-colcon-common-extensions
)

apt_install() {
  apt-get update
  apt-get install -y --no-install-recommends "$@"
  rm -rf /var/lib/apt/lists/*
}

# Source a ROS/colcon setup script (they read unset variables: no `set -u`).
source_setup() {
  set +u
  # shellcheck disable=SC1090
  source "$1"
  set -u
}

step_ros_base() {
  # ROS 2 on a plain Ubuntu base image, as in the ROS installation guide:
  # the ros2-apt-source package installs the repository key and source list.
  apt_install ca-certificates curl
  local codename version
  # shellcheck disable=SC1091
  codename="$(. /etc/os-release && echo "${UBUNTU_CODENAME:-${VERSION_CODENAME}}")"
  version="${ROS_APT_SOURCE_VERSION:-}"
  if [[ -z "$version" ]]; then
    version="$(curl -fsSL https://api.github.com/repos/ros-infrastructure/ros-apt-source/releases/latest \
      | sed -n 's/.*"tag_name": *"\([^"]*\)".*/\1/p' | head -n1)"
    [[ -n "$version" ]] || die "could not look up the latest ros-apt-source release; pass --build-arg ROS_APT_SOURCE_VERSION=<x.y.z>"
  fi
  say "ros2-apt-source $version for $codename"
  curl -fsSL -o /tmp/ros2-apt-source.deb \
    "https://github.com/ros-infrastructure/ros-apt-source/releases/download/${version}/ros2-apt-source_${version}.${codename}_all.deb"
  dpkg -i /tmp/ros2-apt-source.deb
  rm -f /tmp/ros2-apt-source.deb
  apt_install "ros-${ROS_DISTRO}-ros-base" ros-dev-tools
}

step_apt() {
  local pkgs=() p
  for p in "${ROS_PACKAGES[@]}"; do pkgs+=("ros-${ROS_DISTRO}-${p}"); done
  say "apt: ${pkgs[*]} ${SYSTEM_PACKAGES[*]}"
  apt_install "${pkgs[@]}" "${SYSTEM_PACKAGES[@]}"
}

step_python() {
  [[ -f requirements/runtime.txt ]] || die "requirements/runtime.txt missing (run from the workspace root)"
  # --system-site-packages: rclpy, the message packages and colcon come from apt
  # (/opt/ros/$ROS_DISTRO and /usr/lib/python3/dist-packages) and stay visible.
  python3 -m venv --system-site-packages "$GATO_VENV"
  python3 docker/lock_for_ros_image.py requirements/runtime.txt \
    -o "$GATO_VENV/gato-requirements.txt" --explain
  "$GATO_VENV/bin/python" -m pip install --no-cache-dir -r "$GATO_VENV/gato-requirements.txt"
  "$GATO_VENV/bin/python" -c 'import numpy, pinocchio, mujoco, cmeel; print("venv ok: numpy", numpy.__version__, "pinocchio", pinocchio.__version__, "mujoco", mujoco.__version__)'
}

step_build() {
  [[ -d src ]] || die "src/ missing (run from the workspace root)"
  [[ -x "$GATO_VENV/bin/python" ]] || die "$GATO_VENV missing: run the 'python' step first"
  source_setup "/opt/ros/${ROS_DISTRO}/setup.bash"
  source_setup "$GATO_VENV/bin/activate"
  local py="$GATO_VENV/bin/python" colcon_bin cmeel_prefix
  colcon_bin="$(command -v colcon)" || die "colcon not found"
  cmeel_prefix="$("$py" -m cmeel cmake)"
  # colcon runs under the venv's Python (it sees apt's colcon through the system
  # site-packages): Python packages are then built and installed with the venv
  # interpreter, and their entry points start with it (#!/opt/gato-venv/bin/python),
  # so the nodes see pinocchio, mujoco and numpy from the lock.
  local common=(--symlink-install --event-handlers console_direct+ summary+)
  local cmake_args=(-DCMAKE_BUILD_TYPE=Release
                    "-DPython_EXECUTABLE=$py" "-DPython3_EXECUTABLE=$py")
  export MAKEFLAGS="-j${GATO_BUILD_JOBS}"
  export CMAKE_BUILD_PARALLEL_LEVEL="${GATO_BUILD_JOBS}"

  # 1. gato_core alone, with pinocchio/Eigen of the venv's `pin` wheel first on
  #    CMAKE_PREFIX_PATH. Only here: the cmeel prefix also holds urdfdom,
  #    console_bridge, tinyxml2, boost and zlib, which must not replace apt's in
  #    the packages that link ros2_control.
  say "colcon build gato_core (cmeel prefix $cmeel_prefix) $*"
  CMAKE_PREFIX_PATH="${cmeel_prefix}${CMAKE_PREFIX_PATH:+:${CMAKE_PREFIX_PATH}}" \
    "$py" "$colcon_bin" build "${common[@]}" --packages-select gato_core \
      --cmake-args "${cmake_args[@]}" "$@"

  # 2. everything else (messages, nodes, the ros2_control plugin, bringup).
  say "colcon build (all other packages)"
  "$py" "$colcon_bin" build "${common[@]}" --packages-skip gato_core \
    --cmake-args "${cmake_args[@]}"

  rm -rf log
  source_setup install/setup.bash
  "$py" -c 'import gato; print("gato ok:", gato.__file__)'
}

[[ $# -ge 1 ]] || die "usage: $0 ros-base|apt|python|build [CMAKE_ARG...]"
step="$1"; shift
case "$step" in
  ros-base) step_ros_base ;;
  apt)      step_apt ;;
  python)   step_python ;;
  build)    step_build "$@" ;;
  *)        die "unknown step '$step' (ros-base, apt, python, build)" ;;
esac
