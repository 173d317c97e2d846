# Sourced by every gato script (setup, tests, CI, the simulation bringup).
# One place for the environment every ROS process of this project starts with.

# DDS discovery stays on this machine: Fast DDS otherwise multicasts discovery
# out of every interface. On a robot, set the range yourself; launch files never
# hard-code it.
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
# A domain id per shell session unless the caller picked one, so parallel test
# runs on one machine cannot hear each other.
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( ($$ % 100) + 1 ))}"
export PYTHONUNBUFFERED=1
# Headless MuJoCo / matplotlib.
export MPLBACKEND="${MPLBACKEND:-Agg}"
