# syntax=docker/dockerfile:1
# gato on an NVIDIA CUDA devel image plus ROS 2 from the ROS apt repository
# (Jazzy on Ubuntu 24.04 by default; Kilted also targets 24.04). It builds the same
# CPU core as docker/ros.Dockerfile plus gato's CUDA backend (gato._cuda, nvcc from
# the CUDA toolkit of the base image; docs/cuda.md).
# Build from the repository root:
#
#   docker build -f docker/cuda.Dockerfile -t gato:jazzy-cuda .
#   docker build -f docker/cuda.Dockerfile --build-arg ROS_DISTRO=kilted -t gato:kilted-cuda .
#
# Run with `--gpus all` (NVIDIA Container Toolkit on the host). Every install
# step is docker/install_workspace.sh, shared with docker/ros.Dockerfile; only
# the base image and the ROS apt repository differ.
# See docker/README.md.

ARG CUDA_IMAGE=nvidia/cuda:12.8.0-devel-ubuntu24.04
FROM ${CUDA_IMAGE}

ARG ROS_DISTRO=jazzy
# Release of ros-infrastructure/ros-apt-source (empty: the latest, from GitHub).
ARG ROS_APT_SOURCE_VERSION=
ARG GATO_BUILD_JOBS=2
ARG DEBIAN_FRONTEND=noninteractive
ENV ROS_DISTRO=${ROS_DISTRO} \
    GATO_VENV=/opt/gato-venv \
    GATO_WS=/opt/gato_ws \
    GATO_BUILD_JOBS=${GATO_BUILD_JOBS} \
    CUDACXX=/usr/local/cuda/bin/nvcc \
    LANG=C.UTF-8 \
    LC_ALL=C.UTF-8 \
    PYTHONUNBUFFERED=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /opt/gato_ws

# 0. ROS 2 itself (the ros:* images of docker/ros.Dockerfile already have it).
COPY docker/install_workspace.sh docker/install_workspace.sh
RUN bash docker/install_workspace.sh ros-base

# 1. apt: ros2_control, controllers, xacro, rosbag2 + mcap, rqt, compilers.
RUN bash docker/install_workspace.sh apt

# 2. Python: a venv with --system-site-packages (rclpy from apt stays visible)
#    holding requirements/runtime.txt minus the ROS/colcon wheels apt provides.
COPY requirements/runtime.txt requirements/runtime.txt
COPY docker/lock_for_ros_image.py docker/lock_for_ros_image.py
RUN bash docker/install_workspace.sh python

# 3. The workspace: gato_core's CPU backend and its CUDA backend gato._cuda (GATO_CUDA=ON: the
#    build fails instead of silently leaving it out), for A100-class (sm_80) and H100/H200 (sm_90)
#    GPUs; docs/cuda.md says what of it has run on a GPU.
ARG GATO_CUDA_ARCHS="80-real;90"
COPY src src
RUN bash docker/install_workspace.sh build -DGATO_CUDA=ON "-DGATO_CUDA_ARCHS=${GATO_CUDA_ARCHS}"

COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/gato-entrypoint
ENTRYPOINT ["/usr/local/bin/gato-entrypoint"]
CMD ["bash"]
