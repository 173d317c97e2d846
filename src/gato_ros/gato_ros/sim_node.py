"""The gato simulation-world node: a thin rclpy shell over :class:`gato_ros.sim_logic.SimWorldLogic`.

Publishes /clock (rosgraph_msgs/Clock, simulated time) and joint_states
(sensor_msgs/JointState, stamped with simulated time) once per control period.

lockstep=true: subscribes ``command_topic`` (gato_msgs/EffortCommand, default
/gato_controller/command) and advances one period only when the command stamped
with the current tick's joint-state stamp has arrived. While it waits, it re-sends
the current clock and joint state every ``lockstep_resend_s`` (wall clock): that
covers discovery at start-up and a lost message; the controller answers a repeated
stamp with the command it already computed, so re-sending never changes the run.
No command for max(``command_timeout_s``, ``lockstep_resend_s``) (wall clock) after the
first one: the world keeps waiting, and reports once that the controller stopped
answering (log warning, ~/status).

lockstep=false (realtime): subscribes /<controller_name>/commands (std_msgs/Float64MultiArray,
joint_names order) and advances on a wall-clock timer at control_rate_hz with the
latest command held while it is fresh. Before the first command and after
``command_timeout_s`` of its own (simulated) time without one, the world applies ``command_timeout_action`` (hold:
damped PD to the joint positions at the timeout plus gravity compensation; brake: zero
motor torque, joint brakes), logged and reported on ~/status, until commands resume
(:class:`gato_ros.watchdog.CommandWatchdog`).

~/status (gato_msgs/SimStatus): the command watchdog's state, on every change and once
per second (wall clock), stamped with simulated time.

start_subscribers > 0 (lockstep): the first joint state goes out only once that many
subscribers (controller, recorder) listen, so a recording starts at t = 0.
start_recorder (lockstep; node names separated by spaces or commas, e.g. "gato_recorder rosbag2_recorder": the
bringup's recorder and a `ros2 bag record` started beside): the first joint state also waits until
each of those nodes has subscribed to each of
start_recorder_topics that has a publisher (`ros2 bag record` subscribes to a topic only once it
has discovered its publisher: without the wait it missed the controller's first, volatile,
commands; issue 32), then 0.5 s more for the publishers to match it (gato_ros.recorder_gate).
After start_recorder_timeout_s the world starts anyway and logs an error naming the topics.

With duration_s > 0 the node exits 0 once that much time has been simulated (use
``on_exit="shutdown"`` in a launch file to end the whole bringup with it).
"""
from __future__ import annotations

import sys
import time

import numpy as np
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from . import conversions as cv
from . import params as schema
from .node_util import declare_schema, qos, run
from .recorder_gate import RecorderGate
from .sim_logic import SimWorldLogic
from .watchdog import CommandWatchdog

__all__ = ["SimNode", "main"]


class SimNode(Node):
    def __init__(self, **kwargs):
        super().__init__("gato_sim", **kwargs)
        from gato_msgs.msg import EffortCommand, SimStatus
        from rosgraph_msgs.msg import Clock as ClockMsg
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        self._ClockMsg = ClockMsg
        self._SimStatus = SimStatus
        values = declare_schema(self, schema.SIM)
        self.logic = SimWorldLogic(values)
        self.done = False
        self.exit_code = 0
        self.pub_clock = self.create_publisher(ClockMsg, "/clock", qos())
        self.pub_js = self.create_publisher(JointState, "joint_states", qos())
        self.pub_status = self.create_publisher(SimStatus, "~/status", qos())
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        cfg = values
        self.lockstep = cfg["lockstep"]
        # Lockstep waits are only reported, after the world re-sent the state unanswered at the earliest:
        # a lockstep round trip through DDS on a loaded machine often takes longer than a few periods.
        self.watchdog = CommandWatchdog(max(cfg["command_timeout_s"], cfg["lockstep_resend_s"]), "wait") \
            if self.lockstep else CommandWatchdog(cfg["command_timeout_s"], cfg["command_timeout_action"])
        self.create_timer(1.0, self._publish_status, clock=self._wall)
        if self.lockstep:
            self.create_subscription(EffortCommand, cfg["command_topic"], self._on_stamped_command, qos())
            self._last_progress = time.monotonic()
            self._resend_s = cfg["lockstep_resend_s"]
            self._started = cfg["start_subscribers"] == 0 and not cfg["start_recorder"].strip(" ,\t")
            log = self.get_logger()
            self._recorder_gate = RecorderGate(self, cfg["start_recorder"], cfg["start_recorder_topics"],
                                               cfg["start_recorder_timeout_s"], log.info, log.error)
            self.create_timer(min(0.05, self._resend_s / 2), self._resend, clock=self._wall)
        else:
            cname = cfg["controller_name"].strip("/")
            self.create_subscription(Float64MultiArray, f"/{cname}/commands", self._on_command, qos(1))
            self._u = np.zeros(len(self.logic.urdf_joints))
            self.create_timer(1.0 / cfg["control_rate_hz"], self._realtime_tick, clock=self._wall)
        self.get_logger().info(
            f"gato sim: {cfg['robot']} in {cfg['world']}, {'lockstep' if cfg['lockstep'] else 'realtime'}, {cfg['control_rate_hz']:g} Hz, "
            f"physics {self.logic.physics_dt:g} s x {self.logic.substeps}"
            + (f", {cfg['duration_s']:g} s" if cfg["duration_s"] > 0 else "")
            + "".join(f", model error: {link} mass x{f:g}" for link, f in self.logic.mass_scale.items())
            + (f", payload {cfg['payload_mass_kg']:g} kg" if cfg["payload_mass_kg"] > 0 else "")
            + f"; command timeout {self.watchdog.timeout_s:g} s: "
            + ("report (the world waits)" if self.lockstep else cfg["command_timeout_action"]))
        if not self.lockstep or self._started:
            self._publish_state()

    def _publish_state(self):
        js = self.logic.joint_state()
        self.pub_clock.publish(self._ClockMsg(clock=cv.ns_to_time(js.stamp_ns)))
        self.pub_js.publish(cv.joint_state_to_msg(js))

    def _watchdog_now(self) -> float:
        """The watchdog's clock [s]: realtime, the world's own time (its cycles, like a drive's
        watchdog: a world that stalls on a loaded machine does not time its input out);
        lockstep, the wall clock (the world does not advance while it waits)."""
        return time.monotonic() if self.lockstep else self.logic.t_ns / 1e9

    def _publish_status(self):
        wd = self.watchdog
        m = self._SimStatus()
        m.header.stamp = cv.ns_to_time(self.logic.t_ns)
        m.state, m.reason = wd.state, wd.reason
        m.action = "" if wd.fresh else wd.action
        m.command_timeouts = wd.timeouts
        m.last_timeout_sim_s = wd.last_timeout_sim_ns / 1e9
        m.command_age_s = wd.age_s(self._watchdog_now())
        m.commands_applied, m.commands_rejected = wd.applied, wd.rejected
        m.commands_ignored = self.logic.ignored_commands
        self.pub_status.publish(m)

    def _watchdog_event(self, text, timeout: bool):
        if text is None:
            return
        if timeout:
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)
        self._publish_status()

    def _finish_if_done(self) -> bool:
        if self.logic.done and not self.done:
            self.get_logger().info(f"simulated {self.logic.t_ns / 1e9:.3f} s: done")
            self.done = True
        return self.done

    # ------------------------------------------------------------------ lockstep
    def _on_stamped_command(self, msg):
        if self.done or not self.logic.lockstep_accepts(cv.time_to_ns(msg.header.stamp)):
            return
        try:
            u = self.logic.effort_from(msg.effort, list(msg.joint_names))
        except ValueError as e:
            self.watchdog.rejected += 1
            self.get_logger().error(f"command rejected: {e}; re-sending the joint state", throttle_duration_sec=1.0)
            return
        self._watchdog_event(self.watchdog.command(self._watchdog_now(), self.logic.t_ns), False)
        self._advance(u)
        self._last_progress = time.monotonic()

    def _advance(self, u):
        """Apply ``u`` (URDF order) for one period; a command beyond the effort limits saturates (logged)."""
        before = self.logic.saturated_periods
        self.logic.advance(u)
        if self.logic.saturated_periods > before:
            self.get_logger().warning(f"command beyond the URDF effort limits: saturated ({self.logic.saturated_periods} "
                                      "periods so far)", throttle_duration_sec=1.0)
        if not self._finish_if_done():
            self._publish_state()

    def _resend(self):
        if not self._started:
            n = self.pub_js.get_subscription_count()
            if n < self.logic.cfg["start_subscribers"] or not self._recorder_gate.ready():
                return
            self.get_logger().info(f"{n} joint-state subscribers: starting")
            self._started = True
            self._last_progress = time.monotonic()
            self._publish_state()
            return
        if not self.done:
            self._watchdog_event(self.watchdog.check(self._watchdog_now(), self.logic.t_ns), True)
        if not self.done and time.monotonic() - self._last_progress > self._resend_s:
            self._last_progress = time.monotonic()
            self._publish_state()

    # ------------------------------------------------------------------ realtime
    def _on_command(self, msg):
        if self.done:
            return
        try:
            self._u = self.logic.effort_from(msg.data)
        except ValueError as e:
            self.watchdog.rejected += 1
            self.get_logger().error(f"command rejected: {e}", throttle_duration_sec=1.0)
            return
        self._watchdog_event(self.watchdog.command(self._watchdog_now(), self.logic.t_ns), False)

    def _realtime_tick(self):
        if self.done:
            return
        ev = self.watchdog.check(self._watchdog_now(), self.logic.t_ns)
        if ev is not None:
            self.logic.engage_safe()      # hold where the arm is now
            self._watchdog_event(ev, True)
        if self.watchdog.fresh:
            self._advance(self._u)
        else:
            self.logic.advance_safe()     # before the first command, and after a timeout
        if not self._finish_if_done():
            self._publish_state()


def main(argv=None) -> int:
    return run(SimNode, argv)


if __name__ == "__main__":
    sys.exit(main())
