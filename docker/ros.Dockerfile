# syntax=docker/dockerfile:1
# gato on an official ROS 2 image (CPU backend). Build from the repository root:
#
#   docker build -f docker/ros.Dockerfile -t gato:kilted .
#   docker build -f docker/ros.Dockerfile --build-arg ROS_DISTRO=jazzy -t gato:jazzy .
#
# What it reads from the repository: docker/install_workspace.sh (every install
# step, shared with docker/cuda.Dockerfile), requirements/runtime.txt (the pinned
# runtime Python dependencies, the same file scripts/setup.sh installs, filtered by
# docker/lock_for_ros_image.py), src/ (the colcon workspace) and
# docker/entrypoint.sh. docker/ros.Dockerfile.dockerignore keeps .venv, build,
# install, log and .git out of the build context. See docker/README.md.

ARG ROS_DISTRO=kilted
FROM ros:${ROS_DISTRO}-ros-base

ARG ROS_DISTRO
# Parallel compile jobs (a pinocchio translation unit needs ~3 GB to compile).
ARG GATO_BUILD_JOBS=2
ARG DEBIAN_FRONTEND=noninteractive
ENV ROS_DISTRO=${ROS_DISTRO} \
    GATO_VENV=/opt/gato-venv \
    GATO_WS=/opt/gato_ws \
    GATO_BUILD_JOBS=${GATO_BUILD_JOBS} \
    PYTHONUNBUFFERED=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /opt/gato_ws

# 1. apt: ros2_control, controllers, xacro, rosbag2 + mcap, rqt, compilers.
COPY docker/install_workspace.sh docker/install_workspace.sh
RUN bash docker/install_workspace.sh apt

# 2. Python: a venv with --system-site-packages (rclpy from apt stays visible)
#    holding requirements/runtime.txt minus the ROS/colcon wheels apt provides.
COPY requirements/runtime.txt requirements/runtime.txt
COPY docker/lock_for_ros_image.py docker/lock_for_ros_image.py
RUN bash docker/install_workspace.sh python

# 3. The workspace: colcon build --symlink-install, Release. gato_core first (its
#    CMake package: libgato_core.so), then the rest, which includes the ros2_control
#    plugin gato_ros/GatoController, built against the distribution's ros2_control.
COPY src src
RUN bash docker/install_workspace.sh build

COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/gato-entrypoint
ENTRYPOINT ["/usr/local/bin/gato-entrypoint"]
# The hardware bringup: ros2 launch gato_bringup hardware.launch.xml robot:=iiwa14
#   hardware_plugin:=<driver> [controller:=plugin]   (see docker/README.md)
CMD ["bash"]
