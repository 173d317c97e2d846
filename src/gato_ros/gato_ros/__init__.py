"""ROS 2 nodes and message conversions for the gato MPC stack."""
from .node_util import exit_on_startup_signal as _exit_on_startup_signal

# In a node executable, SIGINT / SIGTERM during the imports exit 0 (node_util.run takes over).
_exit_on_startup_signal()
