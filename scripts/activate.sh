# Source this to work in the gato workspace by hand:  source scripts/activate.sh
# (The README's two commands do it for you.)
_gato_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$_gato_root/scripts/env.sh"
source "$_gato_root/.venv/bin/activate"
# colcon's generated setup scripts reference unset variables; relax nounset.
_gato_nounset=$([[ $- == *u* ]] && echo 1 || echo 0); set +u
# The ROS 2 overlay (ros2 CLI, launch, ros2_control, rosbag2) that scripts/setup.sh
# extracted, between the venv and the workspace. GATO_ROS2_SDK: its root, or empty.
export GATO_ROS2_SDK=""
if [[ -f "$_gato_root/build/ros2_overlay" && -f "$(cat "$_gato_root/build/ros2_overlay")/setup.bash" ]]; then
  GATO_ROS2_SDK="$(cat "$_gato_root/build/ros2_overlay")"
  source "$GATO_ROS2_SDK/setup.bash"
fi
[[ -f "$_gato_root/install/setup.bash" ]] && source "$_gato_root/install/setup.bash"
[[ $_gato_nounset == 1 ]] && set -u
export GATO_ROOT="$_gato_root"
unset _gato_root _gato_nounset
