"""rosbag2 files through the pure-Python ``rosbags`` library: a typestore that knows
the gato_msgs types (what the recorder writes with), and a reader returning decoded
messages per topic.

gato_msgs definitions come from the installed ``share/gato_msgs/msg/*.msg`` (ament
index), so a bag stores the same definition text and RIHS01 type hash rclpy uses.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["typestore", "gato_msgs_dir", "read_bag"]


def gato_msgs_dir() -> Path:
    """share/gato_msgs/msg of the sourced workspace (AMENT_PREFIX_PATH)."""
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        d = Path(prefix) / "share" / "gato_msgs" / "msg"
        if prefix and d.is_dir():
            return d
    raise FileNotFoundError("gato_msgs not found on AMENT_PREFIX_PATH: source install/setup.bash")


def typestore():
    """A rosbags Typestore of ROS 2 Kilted plus every gato_msgs message."""
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg

    ts = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for f in sorted(gato_msgs_dir().glob("*.msg")):
        types.update(get_types_from_msg(f.read_text(), f"gato_msgs/msg/{f.stem}"))
    ts.register(types)
    return ts


def read_bag(path, topics=None) -> dict:
    """{topic: [(log_time_ns, message), ...]} of a rosbag2 folder (MCAP or sqlite3), messages
    decoded with the bag's own definitions (rosbags dataclasses, numpy arrays for numeric
    sequences). The project's one bag reader, :func:`gato.bagio.read_bag`, does the work:
    a damaged bag gives what could be read (its problems are in that function's result)."""
    from gato.bagio import read_bag as read

    return read(path, topics).messages
