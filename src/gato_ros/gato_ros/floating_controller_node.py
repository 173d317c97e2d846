"""The floating-base controller node (go2; issue 34): a thin rclpy shell over
:class:`gato_ros.floating_controller_logic.FloatingControllerLogic` (FloatingMPC, the standing task).

Subscribes:
    joint_states (sensor_msgs/JointState): mapped by name, any order;
    ``odom_topic`` (nav_msgs/Odometry, default /odom): the base pose (header.frame_id ``odom_frame``)
        and twist (child_frame_id ``base_frame``); stale, out-of-order, non-finite, non-unit or
        wrongly framed messages are refused and counted by name (the logic's docstring);
    ~/base_reference (geometry_msgs/PoseStamped): a new base-pose reference (world frame).
Publishes:
    ~/command (gato_msgs/EffortCommand): the joint torques answering each joint state, stamped
        with it (source "mpc", or "hold": the damped joint hold of the fallback);
    ~/status (std_msgs/String): JSON of the logic's status (ticks, solves, solve times, holds and
        refusals by name, the plan's foot loads), every ``status_every`` ticks and at exit.
A joint state whose odometry has not come waits for it up to ``odom_wait_s`` (wall clock), then
is answered with the hold. At exit ``summary_file`` (when set) gets the last status as JSON.
Parameters: the ``gato_floating_controller`` group of the one schema
(:data:`gato_ros.param_floating.FLOATING_CONTROLLER`; docs/parameters.md): the logic's
(:data:`gato_ros.floating_controller_logic.DEFAULTS`) plus this node's own, :data:`NODE_PARAMETERS`.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from . import conversions as cv
from .floating_controller_logic import FloatingControllerLogic, Odometry
from .node_util import declare_schema, qos, run
from .param_floating import FLOATING_CONTROLLER

__all__ = ["FloatingControllerNode", "NODE_PARAMETERS", "main"]

#: The schema's parameters of the node itself (the others configure the logic).
NODE_PARAMETERS = ("odom_topic", "status_every", "summary_file")


class FloatingControllerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("gato_floating_controller", **kwargs)
        from gato_msgs.msg import EffortCommand
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry as OdometryMsg
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        self._String = String
        cfg = declare_schema(self, FLOATING_CONTROLLER)
        cfg["base_rpy"] = [float(v) for v in cfg["base_rpy"]]
        self.node_cfg = {k: cfg.pop(k) for k in NODE_PARAMETERS}
        self.logic = FloatingControllerLogic(cfg)
        self.done, self.exit_code = False, 0
        self.pub_cmd = self.create_publisher(EffortCommand, "~/command", qos())
        self.pub_status = self.create_publisher(String, "~/status", qos())
        self.create_subscription(OdometryMsg, self.node_cfg["odom_topic"], self._on_odom, qos(100))
        self.create_subscription(JointState, "joint_states", self._on_js, qos())
        self.create_subscription(PoseStamped, "~/base_reference", self._on_reference, qos())
        self._pending = None            # (stamp_ns, wall time) of a joint state waiting for its odometry
        self.create_timer(0.05, self._check_wait, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(f"gato floating controller: {cfg['robot']}, FloatingMPC N={cfg['horizon']} "
                               f"x {cfg['knot_dt']:g} s, replan {cfg['replan_s']:g} s; odometry from "
                               f"{self.node_cfg['odom_topic']}; base height {self.logic.base_height:.4f} m")

    def _publish(self, cmd):
        if cmd is None:
            return
        self._pending = None
        self.pub_cmd.publish(cv.effort_command_to_msg(cmd.effort, self.logic.joint_names, cmd.stamp_ns,
                                                      cmd.source, self.logic.ticks))
        if cmd.source != "mpc":
            self.get_logger().warning(f"hold: {cmd.reason}", throttle_duration_sec=1.0)
        if self.logic.ticks % int(self.node_cfg["status_every"]) == 0:
            self._publish_status()

    def _publish_status(self):
        self.pub_status.publish(self._String(data=json.dumps(self.logic.status())))

    def _on_odom(self, m):
        p, o = m.pose.pose.position, m.pose.pose.orientation
        lin, ang = m.twist.twist.linear, m.twist.twist.angular
        od = Odometry(cv.time_to_ns(m.header.stamp), m.header.frame_id, m.child_frame_id,
                      np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w]),
                      np.array([lin.x, lin.y, lin.z]), np.array([ang.x, ang.y, ang.z]))
        reason = self.logic.on_odometry(od)
        if reason is not None:
            self.get_logger().warning(f"odometry refused ({reason}); {dict(self.logic.refusals)} so far",
                                      throttle_duration_sec=1.0)
            return
        self._publish(self.logic.on_odometry_for_pending())

    def _on_js(self, m):
        js = cv.joint_state_from_msg(m)
        cmd = self.logic.on_joint_state(js.stamp_ns, js.names, js.position, js.velocity)
        if cmd is None and (self._pending is None or self._pending[0] != js.stamp_ns):
            self._pending = (js.stamp_ns, time.monotonic())
        self._publish(cmd)

    def _on_reference(self, m):
        p, o = m.pose.position, m.pose.orientation
        try:
            self.logic.set_reference([p.x, p.y, p.z], [o.x, o.y, o.z, o.w])
            self.get_logger().info(f"base reference: position ({p.x:.3f}, {p.y:.3f}, {p.z:.3f})")
        except ValueError as e:
            self.get_logger().error(f"base reference refused: {e}")

    def _check_wait(self):
        if self._pending is not None and time.monotonic() - self._pending[1] > self.logic.cfg["odom_wait_s"]:
            self._publish(self.logic.hold_for(self._pending[0]))
            self._pending = None

    def close(self):
        self._publish_status()
        if self.node_cfg["summary_file"]:
            with open(self.node_cfg["summary_file"], "w") as f:
                json.dump(self.logic.status(), f)


def main(argv=None) -> int:
    return run(FloatingControllerNode, argv)


if __name__ == "__main__":
    sys.exit(main())
