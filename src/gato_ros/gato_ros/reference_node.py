"""The gato reference node: a thin rclpy shell over :class:`gato_ros.reference_logic.ReferenceLogic`.

Publishes ee_reference (gato_msgs/EEReference): with ``clock_driven`` (the lockstep
bringup) one window per /clock message, stamped with that time, so the controller
(``reference_sync``) finds the window of every tick; otherwise on a timer at
``rate_hz`` on the node clock (simulated time under use_sim_time).
"""
from __future__ import annotations

import sys

from rclpy.node import Node

from . import conversions as cv
from . import params as schema
from .node_util import declare_schema, qos, run
from .reference_logic import ReferenceLogic

__all__ = ["ReferenceNode", "main"]


class ReferenceNode(Node):
    def __init__(self, **kwargs):
        super().__init__("gato_reference", **kwargs)
        from gato_msgs.msg import EEReference
        from rosgraph_msgs.msg import Clock

        values = declare_schema(self, schema.REFERENCE)
        self.logic = ReferenceLogic(values)
        self.pub = self.create_publisher(EEReference, "ee_reference", qos())
        self.bad_clocks = 0
        if values["clock_driven"]:
            self.create_subscription(Clock, "/clock", self._on_clock, qos())
        else:
            self.create_timer(1.0 / values["rate_hz"], self._on_timer)
        self.get_logger().info(f"gato reference: {values['mode']} for {values['robot']}, {values['n_knots']} knots "
                               f"of {values['knot_dt']:g} s, " + ("one window per /clock message"
                                                                 if values["clock_driven"]
                                                                 else f"{values['rate_hz']:g} Hz"))

    def _on_clock(self, msg):
        # The one input of this node: a /clock before the epoch (a foreign publisher: no ROS Time
        # can stamp its window) is skipped, counted and logged at most once a second.
        t = cv.time_to_ns(msg.clock)
        if t < 0:
            self.bad_clocks += 1
            self.get_logger().warning(f"/clock at {t / 1e9:.3f} s skipped (before the epoch; {self.bad_clocks} so far)",
                                      throttle_duration_sec=1.0)
            return
        self.pub.publish(cv.reference_to_msg(self.logic.window(t)))

    def _on_timer(self):
        now = self.get_clock().now().nanoseconds
        self.pub.publish(cv.reference_to_msg(self.logic.window(max(now, 0))))


def main(argv=None) -> int:
    return run(ReferenceNode, argv)


if __name__ == "__main__":
    sys.exit(main())
