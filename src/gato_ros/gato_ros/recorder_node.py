"""A minimal rosbag2 recorder (MCAP by default) on rclpy raw subscriptions and ``rosbags``.

Parameters:
    bag_path (string): output folder (must not exist yet).
    topics (string[]): "topic" or "topic:pkg/msg/Type". A topic without a type is
        recorded once discovery reports its type.
    storage (string): "mcap" (default) or "sqlite3".
Messages are stored as received (serialized CDR), stamped with the node clock at
receipt (simulated time under use_sim_time). The bag is closed on SIGINT / SIGTERM.
The full recorder (QoS, splitting, compression) is a later issue; this one is what
the simulation bringup needs.
"""
from __future__ import annotations

import importlib
import sys

from rclpy.node import Node
from rclpy.parameter import Parameter

from .bag import typestore
from .node_util import qos, run

__all__ = ["RecorderNode", "main"]


def _msg_class(type_name: str):
    pkg, _, name = type_name.partition("/msg/")
    if not name:
        raise ValueError(f"message type {type_name!r}: expected pkg/msg/Type")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


class RecorderNode(Node):
    def __init__(self, **kwargs):
        super().__init__("gato_recorder", **kwargs)
        from rosbags.rosbag2 import StoragePlugin, Writer

        path = self.declare_parameter("bag_path", "gato_bag").value
        entries = self.declare_parameter("topics", Parameter.Type.STRING_ARRAY).value or []
        storage = self.declare_parameter("storage", "mcap").value
        if storage not in ("mcap", "sqlite3"):
            raise ValueError(f"storage: expected mcap or sqlite3, got {storage!r}")
        self._ts = typestore()
        self._writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP if storage == "mcap"
                              else StoragePlugin.SQLITE3)
        self._writer.open()
        self._closed = False
        self._pending = {}
        self.count = 0
        for e in entries:
            topic, _, type_name = e.partition(":")
            if type_name:
                self._subscribe(topic, type_name)
            else:
                self._pending[topic] = None
        if self._pending:
            self.create_timer(0.2, self._discover)
        self.get_logger().info(f"recording {len(entries)} topics to {path} ({storage})")

    def _subscribe(self, topic: str, type_name: str):
        conn = self._writer.add_connection(topic, type_name, typestore=self._ts)
        writer, clock = self._writer, self.get_clock()

        def on_msg(raw, conn=conn):
            if not self._closed:
                writer.write(conn, clock.now().nanoseconds, raw)
                self.count += 1

        self.create_subscription(_msg_class(type_name), topic, on_msg, qos(100), raw=True)

    def _discover(self):
        known = dict(self.get_topic_names_and_types())
        for topic in [t for t in self._pending if t in known]:
            del self._pending[topic]
            self._subscribe(topic, known[topic][0])

    def close(self):
        if not self._closed:
            self._closed = True
            self._writer.close()
            # print, not the ROS logger: on SIGINT the context (and /rosout) is already gone
            print(f"[gato_recorder] bag closed: {self.count} messages", flush=True)


def main(argv=None) -> int:
    return run(RecorderNode, argv)


if __name__ == "__main__":
    sys.exit(main())
