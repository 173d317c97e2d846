#!/usr/bin/env bash
# Entrypoint of the gato images: ROS 2, then the gato venv, then the workspace,
# then the command (default: bash). For a shell in a running container:
#   docker exec -it <container> gato-entrypoint bash
#
# Nothing here sets ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE or
# RMW_IMPLEMENTATION: pass them with `docker run -e` (see docker/README.md).
set -e
# The setup scripts read unset variables, so no `set -u` while sourcing them.
# shellcheck disable=SC1090,SC1091
source "/opt/ros/${ROS_DISTRO:?ROS_DISTRO is not set}/setup.bash"
# shellcheck disable=SC1091
source "${GATO_VENV:-/opt/gato-venv}/bin/activate"
# shellcheck disable=SC1091
source "${GATO_WS:-/opt/gato_ws}/install/setup.bash"
if [[ $# -eq 0 ]]; then
  set -- bash
fi
exec "$@"
