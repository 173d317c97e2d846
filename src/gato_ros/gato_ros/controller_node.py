"""The gato controller node: a thin rclpy shell over :class:`gato_ros.controller_logic.ControllerLogic`.

Subscribes:
    joint_states (sensor_msgs/JointState): mapped by joint name, any order.
    ee_reference (gato_msgs/EEReference): the EE reference window.
    ``wrench_topic`` (geometry_msgs/WrenchStamped): the estimator's wrench (hypotheses=estimator;
        with estimate_sync a tick waits for the one stamped at its joint state).
Publishes:
    /<controller_name>/commands (std_msgs/Float64MultiArray): joint torques [N*m] in
        ``joint_names`` order (ros2_control JointGroupEffortController convention).
    ~/command (gato_msgs/EffortCommand): the same torques, stamped with the joint state
        they answer (lockstep simulation; recording).
    ~/step_result (gato_msgs/StepResult), ~/solver_stats (gato_msgs/SolverStats): per tick
        of a planner (planner sampling / osc and the OSC fallback: the fields that apply,
        :func:`gato_ros.conversions.planner_step_to_msgs`);
    ~/plan (gato_msgs/Plan): per bsqp MPC tick (seq, reset_epoch, integrator set: what the
        gato ros2_control plugin executes in follow mode; publish_commands=false then
        turns the two command topics above off).
    ~/solve_input (gato_msgs/SolveInput): per MPC tick, what the step solved from (measured
        state, reference window, warm start, configuration): what ``gato replay`` re-runs.
    ~/status (gato_msgs/ControllerStatus): every tick, and on state changes (active_planner,
        fallback_reason, fallback_switches: the OSC fallback, gato_ros.controller_logic).
Standard ROS 2 interfaces (gato_ros.standard_io, README "Standard interfaces"): ~/goal_pose,
~/delta_twist_cmds, ~/joint_trajectory, the ~/follow_joint_trajectory action, /tf and /tf_static
in; ~/plan_path, ~/reference_path, ~/batch_paths/row_<b>, ~/markers, the gato_ee_target TF, /diagnostics
out.
Parameters: the controller schema of :mod:`gato_ros.params` (docs/parameters.md);
tunables are validated in an on-set callback and applied between ticks.
Parameter ``start_recorder`` (hardware.launch.xml ``record:=true`` with ``ros2 bag record``:
rosbag2_recorder): joint_states is subscribed, so the first command or plan goes out, only once that
recorder has subscribed to this node's topics (:mod:`gato_ros.recorder_gate`; at most
``start_recorder_timeout_s``, 60 s; issue 32).

Run: ``ros2 run gato_ros controller_node --ros-args --params-file <robot>.yaml``.
"""
from __future__ import annotations

import sys
import time

from rclpy.node import Node

from . import conversions as cv
from . import params as schema
from .controller_logic import ControllerLogic
from .node_util import declare_schema, param_value, qos, run
from .standard_io import StandardInterfaces

__all__ = ["ControllerNode", "main"]


class ControllerNode(Node):
    def __init__(self, **kwargs):
        super().__init__("gato_controller", **kwargs)
        from gato_msgs.msg import ControllerStatus, EEReference, EffortCommand, Plan, SolveInput, SolverStats, StepResult
        from rcl_interfaces.msg import SetParametersResult
        from std_msgs.msg import Float64MultiArray

        self._SetParametersResult = SetParametersResult
        self._ControllerStatus = ControllerStatus
        values = declare_schema(self, schema.CONTROLLER)
        log = self.get_logger()
        # the logic reads the node clock and hands its joint-state outputs to _on_state_output itself:
        # its message entry is the subscription callback (see below)
        self.logic = ControllerLogic(values, log=self._log, clock=self._now_ns, sink=self._on_state_output)
        cname = values["controller_name"].strip("/")
        self.pub_cmd = self.create_publisher(Float64MultiArray, f"/{cname}/commands", qos())
        self.pub_cmd_stamped = self.create_publisher(EffortCommand, "~/command", qos())
        self.pub_step = self.create_publisher(StepResult, "~/step_result", qos())
        self.pub_stats = self.create_publisher(SolverStats, "~/solver_stats", qos())
        self.pub_plan = self.create_publisher(Plan, "~/plan", qos())
        self.pub_input = self.create_publisher(SolveInput, "~/solve_input", qos())
        self.pub_status = self.create_publisher(ControllerStatus, "~/status", qos())
        # Depth 1: a tick that falls behind solves from the newest joint state, not a queued one
        # (queueing would add every late tick's delay to the next). Lockstep has one in flight.
        # The callback is the logic's entry itself: a joint state reaches the C++ solver in five Python
        # frames from it (issue 29, test/test_tick_path.py).
        self._start_gate = None
        recorder = values["start_recorder"].strip()
        if recorder:                   # record:=true: the recorder's subscriptions first (issue 32)
            from .recorder_gate import RecorderGate

            topics = [p.topic_name for p in (self.pub_cmd, self.pub_cmd_stamped, self.pub_step, self.pub_plan,
                                             self.pub_input)]
            self._start_gate = RecorderGate(self, recorder, topics,
                                            float(values["start_recorder_timeout_s"]),
                                            log.info, log.error)
            from rclpy.clock import Clock, ClockType

            # wall clock: with use_sim_time no /clock may come before the first command (mujoco:=true)
            self._start_timer = self.create_timer(0.1, self._on_start_gate,
                                                  clock=Clock(clock_type=ClockType.STEADY_TIME))
        else:
            self._subscribe_joint_states()
        self.create_subscription(EEReference, "ee_reference", self._on_reference, qos())
        from geometry_msgs.msg import WrenchStamped

        # hypotheses=estimator: the estimator node's wrench (depth 1: only the newest matters)
        self.create_subscription(WrenchStamped, values["wrench_topic"], self._on_wrench, qos(1))
        self.timer = self.create_timer(1.0 / values["control_rate_hz"], self._on_timer)
        # issue 31: pose / twist / joint-trajectory targets, the FollowJointTrajectory action, plan paths, the
        # EE target TF and /diagnostics (gato_ros.standard_io over ROS-free logic classes)
        self.io = StandardInterfaces(self, self.logic, qos)
        self.add_on_set_parameters_callback(self._on_set)
        self.add_post_set_parameters_callback(self._post_set)
        self._t_recv = None        # perf_counter at receipt of the latest joint state
        # publish_commands=false: plans only, the gato ros2_control plugin (follow mode) executes them
        self._publish_commands = bool(values["publish_commands"])
        self._epoch_base = int(time.time()) & 0x7FFFFFFF
        self._last_status_ns = 0
        out_to = f"commands on /{cname}/commands" if self._publish_commands else "plans only (~/plan)"
        log.info(f"gato controller for {values['robot']}: planner {values['planner']} (fallback "
                 f"{values['fallback']}), N={values['N']}, dt={values['dt']} s, "
                 f"{values['control_rate_hz']:g} Hz, trigger={values['trigger']}, {out_to}")

    def _subscribe_joint_states(self):
        from sensor_msgs.msg import JointState

        self.create_subscription(JointState, "joint_states", self.logic.on_joint_state_msg, qos(1))

    def _on_start_gate(self):
        if self._start_gate.ready():
            self.destroy_timer(self._start_timer)
            self._subscribe_joint_states()

    def _log(self, level: str, text: str) -> None:
        # One call site per severity: rclpy refuses a severity change at the same call site.
        log = self.get_logger()
        if level == "error":
            log.error(text)
        elif level == "warn":
            log.warning(text)
        else:
            log.info(text)

    # ------------------------------------------------------------------ parameters
    def _values(self, parameters) -> dict:
        kinds = {p.name: p.type for p in schema.CONTROLLER}
        return {p.name: param_value(kinds.get(p.name, ""), p.value) for p in parameters}

    def _on_set(self, parameters):
        reason = self.logic.validate_changes(self._values(parameters))
        return self._SetParametersResult(successful=reason is None, reason=reason or "")

    def _post_set(self, parameters):
        values = self._values(parameters)
        self.logic.request_changes(values)
        self.io.targets.update_config(values)

    # ------------------------------------------------------------------ callbacks
    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    # Every message is validated once, by the logic's message boundary (gato_ros.inputs): a refused
    # one is counted in ~/status (rejected_*, dropped_out_of_order) and logged once a second.
    def _on_state_output(self, out, t_recv):
        """The logic's output for a joint state received at ``t_recv`` (perf_counter), None included."""
        self._t_recv = t_recv
        self._publish(out, t_recv)

    def _on_reference(self, msg):
        self._publish(self.logic.on_reference_msg(msg, self._now_ns()), self._t_recv)

    def _on_wrench(self, msg):
        # estimate_sync: the output is the tick that waited for this estimate
        self._publish(self.logic.on_wrench_msg(msg, self._now_ns()), self._t_recv)

    def _on_timer(self):
        out = self.logic.on_timer(self._now_ns())
        if out is not None:
            self._publish(out, self._t_recv if self.logic.cfg["trigger"] == "timer" else time.perf_counter())
        elif self._now_ns() - self._last_status_ns > 500_000_000:
            self._publish_status()  # keep the status alive while idle (waiting, or between ticks)

    # ------------------------------------------------------------------ output
    def _publish(self, out, t_recv):
        if out is None:
            return
        if out.effort is not None and self._publish_commands:
            self.pub_cmd.publish(cv.effort_to_multiarray(out.effort))
            self.pub_cmd_stamped.publish(cv.effort_command_to_msg(out.effort, self.logic.joint_names, out.stamp_ns,
                                                                  out.source, out.tick))
            if not out.duplicate and t_recv is not None:
                self.logic.record_publish(time.perf_counter() - t_recv)
        if out.solve_input is not None and not out.duplicate:
            self.pub_input.publish(cv.solve_input_to_msg(out.solve_input))
        if out.step is not None and not out.duplicate:
            if self.logic.cfg["publish_step_result"]:
                self.pub_step.publish(cv.step_result_to_msg(out.step, out.stamp_ns))
            self.pub_stats.publish(cv.solver_stats_to_msg(out.step.solve.stats, out.stamp_ns))
        elif out.planner_step is not None and not out.duplicate:   # sampling, osc, the OSC fallback
            step, stats = cv.planner_step_to_msgs(out.planner_step, out.planner, out.stamp_ns)
            if self.logic.cfg["publish_step_result"]:
                self.pub_step.publish(step)
            self.pub_stats.publish(stats)
        if out.plan is not None and not out.duplicate:
            m = cv.plan_to_msg(out.plan)
            # Epochs count from this node's start time, so a restarted node outranks its predecessor.
            m.reset_epoch = (self._epoch_base + out.plan.reset_epoch) & 0xFFFFFFFF
            self.pub_plan.publish(m)
            if not self._publish_commands and t_recv is not None:
                self.logic.record_publish(time.perf_counter() - t_recv)
        if not out.duplicate:
            self._publish_status()
            self.io.after_tick(out)

    def _publish_status(self):
        st = self.logic.status
        m = self._ControllerStatus()
        now = self._now_ns()
        m.header.stamp = cv.ns_to_time(max(now, 0))
        for name in ("state", "reason", "ticks", "deadline_misses", "dropped_out_of_order", "rejected_nonfinite",
                     "rejected_names", "rejected_range", "rejected_stamps", "rejected_references", "rejected_wrenches",
                     "stale_events", "fallbacks", "clamped", "holds", "latency_us", "solve_us",
                     "params_json", "active_planner", "fallback_reason", "fallback_switches", "ee_position_error",
                     "ee_orientation_error"):
            setattr(m, name, getattr(st, name))
        self.pub_status.publish(m)
        self._last_status_ns = now


def main(argv=None) -> int:
    return run(ControllerNode, argv)


if __name__ == "__main__":
    sys.exit(main())
