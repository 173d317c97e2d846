"""The ``LD_PRELOAD`` value the launch files give the C++ nodes (issue 32).

``python3 -m gato_ros.fastdds_preload`` prints (no newline) the ``LD_PRELOAD`` a non-gato ROS
process of a bringup (robot_state_publisher, ros2_control_node, the spawners, ``ros2 bag
record``) should run with: the current ``LD_PRELOAD`` plus gato_ros's
``libgato_fastdds_preload.so``, which turns Fast DDS's unbounded
``DomainParticipant::set_listener(listener)`` into the bounded overload (in the ros-fastdds 3.2.2
wheel the unbounded wait spins and can hang a node's shutdown for ever:
src/gato_ros/src/fastdds_set_listener_preload.cpp). The gato nodes detach their participant's
listener themselves (:func:`gato_ros.node_util.detach_participant_listener`).

The library is added only where the Fast DDS rmw is in use (``RMW_IMPLEMENTATION`` unset,
``rmw_fastrtps_cpp`` or ``rmw_fastrtps_dynamic_cpp``), where it is installed, and unless
``GATO_FASTDDS_PRELOAD=off``; otherwise the current ``LD_PRELOAD`` is printed unchanged (empty
when there is none). hardware.launch.xml: ``<env name="LD_PRELOAD" value="$(command 'python3 -m
gato_ros.fastdds_preload')"/>``.
"""
from __future__ import annotations

import os
import re
import sys

__all__ = ["FASTDDS_RMWS", "LIBRARY", "library_path", "preload_value"]

#: the rmw implementations built on Fast DDS (the Kilted default is rmw_fastrtps_cpp)
FASTDDS_RMWS = ("", "rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")
LIBRARY = "libgato_fastdds_preload.so"


def library_path() -> str | None:
    """The installed interposer (``<gato_ros prefix>/lib/libgato_fastdds_preload.so``), or None."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return None
    try:
        path = os.path.join(get_package_prefix("gato_ros"), "lib", LIBRARY)
    except PackageNotFoundError:
        return None
    return path if os.path.isfile(path) else None


def preload_value(environ=None, library: str | None = None) -> str:
    """``LD_PRELOAD`` for a C++ node: ``environ``'s own, plus the interposer where Fast DDS is the rmw."""
    env = os.environ if environ is None else environ
    current = env.get("LD_PRELOAD", "")
    if env.get("GATO_FASTDDS_PRELOAD", "").lower() in ("off", "0", "false"):
        return current
    if env.get("RMW_IMPLEMENTATION", "").strip() not in FASTDDS_RMWS:
        return current
    lib = library or library_path()
    if lib is None:
        return current
    parts = [p for p in re.split(r"[:\s]+", current) if p]
    if any(os.path.basename(p) == LIBRARY for p in parts):
        return current
    return ":".join(parts + [lib])


def main() -> int:
    sys.stdout.write(preload_value())      # no newline: the launch file takes stdout as the value
    return 0


if __name__ == "__main__":
    sys.exit(main())
