"""The gato estimator node: a thin rclpy shell over :class:`gato_ros.estimator_logic.EstimatorLogic`.

Subscribes:
    joint_states (sensor_msgs/JointState): mapped by name, any order; with effort_source
        ``command`` only once a publisher of ``effort_topic`` is matched (a lockstep world,
        which starts when its joint-state subscribers listen, then cannot run ahead of it).
    ``effort_topic`` (gato_msgs/EffortCommand, default /gato_controller/command) when
        ``effort_source`` is ``command``: the applied torque, stamped with the state it answers.
Publishes:
    ~/wrench (geometry_msgs/WrenchStamped): the external wrench estimate [N, N*m], world axes
        (header.frame_id = ``frame_id``), acting at the EE frame origin, stamped with the joint
        state that closed the fitted interval; one per fitted interval.
    ~/stats (std_msgs/String): the estimator's statistics as JSON (n_updates, n_clamped,
        clamped, ignored_stamps, skipped_gaps, rejected, force_norm, raw, ...), with every estimate.
    A joint state that repeats the stamp of the latest estimate (a lockstep world re-sending it)
    publishes that estimate again (estimate_sync controllers wait for it).
Parameters: the estimator schema of :mod:`gato_ros.params` (docs/parameters.md), read-only.

Bad input (a missing joint, wrong array lengths, NaN) is ignored, counted (``rejected`` in
~/stats) and logged at most once per second. A fit that hits ``max_wrench`` is clamped and
logged (throttled); the estimate is never NaN.

Run: ``ros2 run gato_ros estimator_node --ros-args --params-file <robot>.yaml``.
"""
from __future__ import annotations

import json
import sys

from rclpy.node import Node

from . import conversions as cv
from . import params as schema
from .estimator_logic import EstimatorLogic
from .node_util import declare_schema, qos, run

__all__ = ["EstimatorNode", "main"]


class EstimatorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("gato_estimator", **kwargs)
        from gato_msgs.msg import EffortCommand
        from geometry_msgs.msg import WrenchStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        self._WrenchStamped, self._String = WrenchStamped, String
        values = declare_schema(self, schema.ESTIMATOR)
        self.logic = EstimatorLogic(values)
        self.frame_id = values["frame_id"]
        self.pub_wrench = self.create_publisher(WrenchStamped, "~/wrench", qos())
        self.pub_stats = self.create_publisher(String, "~/stats", qos())
        self._JointState = JointState
        self._js_sub = self._wait_timer = None
        if values["effort_source"] == "command":
            self._cmd_sub = self.create_subscription(EffortCommand, values["effort_topic"], self._on_effort, qos(100))
            # Joint states only once the command publisher is matched: a lockstep world starts when
            # its subscribers (this one among them) listen, so the first commands cannot be lost to
            # discovery (a lost command leaves an interval unfitted, and a controller waiting for
            # that estimate, estimate_sync, gives up). Wall clock: sim time stands still until then.
            from rclpy.clock import Clock, ClockType

            self._wait_timer = self.create_timer(0.02, self._subscribe_states,
                                                 clock=Clock(clock_type=ClockType.STEADY_TIME))
        else:
            self._subscribe_states()
        src = values["effort_topic"] if values["effort_source"] == "command" else "/joint_states effort"
        self.get_logger().info(f"gato estimator for {values['robot']}: mode={values['mode']}, applied torque from "
                               f"{src}, max_wrench={values['max_wrench']:g}")

    def _subscribe_states(self):
        if self._wait_timer is not None:
            if self._cmd_sub.get_publisher_count() < 1:
                return
            self._wait_timer.cancel()
            self.destroy_timer(self._wait_timer)
            self._wait_timer = None
            self.get_logger().info(f"{self.logic.cfg['effort_topic']} connected: subscribing to joint_states")
        self._js_sub = self.create_subscription(self._JointState, "joint_states", self._on_joint_state, qos(100))

    # Every message is validated once, by the logic's message boundary (gato_ros.inputs); a refused
    # one is counted (``rejected`` in ~/stats) and logged at most once a second. A lockstep world
    # re-sending a state nobody answered gets its estimate again (on_joint_state_msg), so one lost
    # on the way (DDS discovery at start-up) does not stall a controller waiting for it.
    def _on_joint_state(self, msg):
        n = self.logic.rejected
        out = self.logic.on_joint_state_msg(msg, self.get_clock().now().nanoseconds)
        if self.logic.rejected > n:
            self.get_logger().warning(f"joint state ignored: {self.logic.last_rejection}", throttle_duration_sec=1.0)
        self._publish(out)

    def _on_effort(self, msg):
        n = self.logic.rejected
        out = self.logic.on_effort_msg(msg)
        if self.logic.rejected > n:
            self.get_logger().warning(f"effort command ignored: {self.logic.last_rejection}",
                                      throttle_duration_sec=1.0)
        self._publish(out)

    def _publish(self, out) -> None:
        if out is None:
            return
        m = self._WrenchStamped()
        m.header.stamp = cv.ns_to_time(max(out.stamp_ns, 0))
        m.header.frame_id = self.frame_id
        w = [float(v) for v in out.wrench]
        m.wrench.force.x, m.wrench.force.y, m.wrench.force.z = w[:3]
        m.wrench.torque.x, m.wrench.torque.y, m.wrench.torque.z = w[3:]
        self.pub_wrench.publish(m)
        if out.clamped:
            self.get_logger().warning(f"wrench fit clamped to max_wrench = {self.logic.cfg['max_wrench']:g} "
                                      f"({out.stats['n_clamped']} clamps so far)", throttle_duration_sec=1.0)
        st = dict(out.stats, rejected=self.logic.rejected, stamp_ns=int(out.stamp_ns))
        self.pub_stats.publish(self._String(data=json.dumps(st, sort_keys=True)))


def main(argv=None) -> int:
    return run(EstimatorNode, argv)


if __name__ == "__main__":
    sys.exit(main())
