"""The floating-base simulation world node (go2 in MuJoCo; issue 34): a thin rclpy shell over
:class:`gato_ros.floating_sim_logic.FloatingSimLogic`. Lockstep only (as the arm bringup's default).

Publishes each tick (stamped with simulated time, period ``period_s``):
    /clock (rosgraph_msgs/Clock);
    ``odom_topic`` (nav_msgs/Odometry, default /odom): the base pose in ``odom_frame`` (the world)
        and its twist in ``base_frame`` (child_frame_id; nav_msgs' convention); zero covariances
        (a simulated, exact odometry); published before the joint state of the same tick;
    joint_states (sensor_msgs/JointState): the 12 actuated joints (URDF order), effort = the
        torques applied last.
Subscribes ``command_topic`` (gato_msgs/EffortCommand, default /gato_floating_controller/command)
and advances one period only when the command stamped with the current tick arrives (others are
ignored and counted; a bad one is refused and logged). Unanswered for ``lockstep_resend_s`` (wall
clock): the tick's odometry and joint state are sent again (discovery at start-up, a lost message).
The first tick goes out once ``start_subscribers`` nodes subscribe to joint_states (and to the
odometry when it is published). ``publish_odometry`` false: no odometry (the fallback test).

After ``duration_s`` of simulated time the node writes ``summary_file`` (JSON: the world's recorded
base height, tilt, foot loads and slip; :meth:`FloatingSimLogic.summary`) when set, and exits 0.
Parameters: the ``gato_floating_sim`` group of the one schema (:data:`gato_ros.param_floating.FLOATING_SIM`;
docs/parameters.md).
"""
from __future__ import annotations

import json
import sys
import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from . import conversions as cv
from .floating_sim_logic import FloatingSimLogic
from .node_util import declare_schema, qos, run
from .param_floating import FLOATING_SIM

__all__ = ["FloatingSimNode", "PARAMETERS", "main"]

#: The node's parameter names (their schema: gato_ros.param_floating.FLOATING_SIM).
PARAMETERS = tuple(p.name for p in FLOATING_SIM)


class FloatingSimNode(Node):
    def __init__(self, **kwargs):
        super().__init__("gato_floating_sim", **kwargs)
        from gato_msgs.msg import EffortCommand
        from nav_msgs.msg import Odometry
        from rosgraph_msgs.msg import Clock as ClockMsg
        from sensor_msgs.msg import JointState

        self._ClockMsg, self._Odometry = ClockMsg, Odometry
        cfg = declare_schema(self, FLOATING_SIM)
        self.cfg = cfg
        self.logic = FloatingSimLogic(cfg["robot"], cfg["period_s"], int(cfg["seed"]), cfg["settle_s"])
        self.done = False
        self.exit_code = 0
        self.ignored = self.rejected = 0
        self.pub_clock = self.create_publisher(ClockMsg, "/clock", qos())
        self.pub_js = self.create_publisher(JointState, "joint_states", qos())
        self.pub_odom = self.create_publisher(Odometry, cfg["odom_topic"], qos()) if cfg["publish_odometry"] else None
        self.create_subscription(EffortCommand, cfg["command_topic"], self._on_command, qos())
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self._started = False
        self._last_progress = time.monotonic()
        self.create_timer(0.05, self._resend, clock=self._wall)
        self.get_logger().info(
            f"gato floating sim: {cfg['robot']} in MuJoCo, lockstep, period {cfg['period_s']:g} s, "
            f"{cfg['duration_s']:g} s; odometry on {cfg['odom_topic'] if self.pub_odom else '(none)'} "
            f"({cfg['odom_frame']} -> {cfg['base_frame']})")

    def _publish_state(self):
        lg = self.logic
        stamp = cv.ns_to_time(lg.t_ns)
        self.pub_clock.publish(self._ClockMsg(clock=stamp))
        if self.pub_odom is not None:
            od, m = lg.odometry(), self._Odometry()
            m.header.stamp, m.header.frame_id, m.child_frame_id = stamp, self.cfg["odom_frame"], self.cfg["base_frame"]
            p, qq = m.pose.pose.position, m.pose.pose.orientation
            p.x, p.y, p.z = (float(v) for v in od["position"])
            qq.x, qq.y, qq.z, qq.w = (float(v) for v in od["quat_xyzw"])
            lin, ang = m.twist.twist.linear, m.twist.twist.angular
            lin.x, lin.y, lin.z = (float(v) for v in od["linear"])
            ang.x, ang.y, ang.z = (float(v) for v in od["angular"])
            self.pub_odom.publish(m)
        names, q, dq, u = lg.joint_state()
        from .types import JointStateSample
        self.pub_js.publish(cv.joint_state_to_msg(JointStateSample(lg.t_ns, names, q, dq, u)))

    def _on_command(self, msg):
        if self.done or not self._started:
            return
        if cv.time_to_ns(msg.header.stamp) != self.logic.t_ns:
            self.ignored += 1
            return
        try:
            u = self.logic.effort_from(msg.effort, list(msg.joint_names))
        except ValueError as e:
            self.rejected += 1
            self.get_logger().error(f"command rejected: {e}", throttle_duration_sec=1.0)
            return
        self.logic.advance(u)
        self._last_progress = time.monotonic()
        if self.logic.tick * self.cfg["period_s"] >= self.cfg["duration_s"] - 1e-9 and self.cfg["duration_s"] > 0:
            self._finish()
        else:
            self._publish_state()

    def _finish(self):
        self.get_logger().info(f"simulated {self.logic.t_ns / 1e9:.3f} s: done "
                               f"({self.ignored} commands ignored, {self.rejected} rejected)")
        if self.cfg["summary_file"]:
            s = self.logic.summary()
            s.update(commands_ignored=self.ignored, commands_rejected=self.rejected)
            with open(self.cfg["summary_file"], "w") as f:
                json.dump(s, f)
        self.done = True

    def _resend(self):
        if self.done:
            return
        if not self._started:
            n = self.pub_js.get_subscription_count()
            n_od = self.pub_odom.get_subscription_count() if self.pub_odom is not None else n
            if min(n, n_od) < self.cfg["start_subscribers"]:
                return
            self.get_logger().info(f"{n} joint-state subscribers: starting")
            self._started = True
        elif time.monotonic() - self._last_progress <= self.cfg["lockstep_resend_s"]:
            return
        self._last_progress = time.monotonic()
        self._publish_state()


def main(argv=None) -> int:
    return run(FloatingSimNode, argv)


if __name__ == "__main__":
    sys.exit(main())
