"""rosbag2 files through the pure-Python ``rosbags`` library: a typestore that knows
the gato_msgs types, and a reader returning decoded messages per topic.

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
    decoded with :func:`typestore` (rosbags dataclasses, numpy arrays for numeric sequences)."""
    from rosbags.rosbag2 import Reader

    ts = typestore()
    out: dict = {}
    with Reader(Path(path)) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        for conn, t, raw in reader.messages(connections=conns):
            out.setdefault(conn.topic, []).append((t, ts.deserialize_cdr(raw, conn.msgtype)))
    return out
