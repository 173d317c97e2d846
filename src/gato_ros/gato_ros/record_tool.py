"""Which recorder the hardware bringup's ``record:=true recorder:=auto`` starts.

``ros2bag`` where the real recorder is installed (the ``ros2`` command and the rosbag2
packages with MCAP storage: a full ROS 2 install or the project's overlay): ``ros2 bag
record`` of the controller graph. ``gato`` otherwise (pip-only machines): the project's
recorder node (gato_ros.recorder_node), which writes the same rosbag2 format.

``python3 -m gato_ros.record_tool`` prints the choice without a newline (launch files read
it with ``$(command ...)``).
"""
from __future__ import annotations

import shutil
import sys

__all__ = ["available", "main"]

# What `ros2 bag record -s mcap` needs besides the ros2 command.
_PACKAGES = ("ros2bag", "rosbag2_transport", "rosbag2_storage_mcap")


def available() -> str:
    """"ros2bag" when ``ros2 bag record -s mcap`` can run here, else "gato"."""
    if shutil.which("ros2") is None:
        return "gato"
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return "gato"
    for pkg in _PACKAGES:
        try:
            get_package_prefix(pkg)
        except (PackageNotFoundError, LookupError, ValueError):
            return "gato"
    return "ros2bag"


def main() -> int:
    sys.stdout.write(available())
    return 0


if __name__ == "__main__":
    sys.exit(main())
