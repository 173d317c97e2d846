"""The one parameter schema of the gato nodes, and everything generated from it.

Every parameter of the controller node (and of the simulation-world and reference
nodes) is declared ONCE here: type, default, unit, description, range or choices,
and whether it is read-only (structural: fixed at start-up) or tunable at run time.
From this schema come:

- the rclpy ``ParameterDescriptor`` of each parameter, with its
  ``FloatingPointRange`` / ``IntegerRange`` and description (what rqt_reconfigure
  and ``ros2 param describe`` show): :func:`descriptor`;
- the validation of a requested change (range, choices, read-only, type):
  :func:`validate`; the controller adds a capability check (limit mechanisms);
- the per-robot YAML parameter files in ``gato_bringup/config/``, the
  ros2_control controller-manager files next to them and the ros2_control robot
  descriptions in ``gato_bringup/urdf/``: :func:`robot_yaml`,
  :func:`controllers_yaml`, :func:`ros2_control_xacro`;
- the Markdown reference ``docs/parameters.md``: :func:`markdown`.

``python -m gato_ros.params --write`` regenerates the YAML files and the Markdown
from this module (``--check`` exits 1 when a committed file differs; the tests
run the same comparison). ROS-free except :func:`descriptor` (imports rclpy).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Param", "CONTROLLER", "SIM", "REFERENCE", "ESTIMATOR", "VIEW", "SCHEMAS", "NODE_NAMES", "ROBOTS", "by_name",
           "defaults",
           "validate", "coerce", "descriptor", "robot_yaml", "controllers_yaml", "ros2_control_xacro", "markdown",
           "main"]

TYPES = ("double", "integer", "bool", "string", "string_array", "double_array")


@dataclass(frozen=True)
class Param:
    """One parameter.

    ``default`` is a value or a callable ``robot -> value`` (robot-specific defaults:
    joint names, start pose). ``range`` (lo, hi) is inclusive, for double/integer;
    ``choices`` lists the allowed strings; ``read_only`` parameters are fixed after
    start-up (structural: changing them needs a new solver or new connections).
    ``check``: optional ``value -> reason or None``, the value's own structure (e.g. an
    obstacle array's length), run by :func:`validate` after the type and range checks.
    """

    name: str
    type: str
    default: Any
    description: str
    unit: str = ""
    range: tuple | None = None
    choices: tuple | None = None
    read_only: bool = False
    group: str = ""
    check: Any = None

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"{self.name}: type {self.type!r} not in {TYPES}")
        if self.range is not None and self.type not in ("double", "integer"):
            raise ValueError(f"{self.name}: a range needs a double or integer parameter")

    def default_for(self, robot: str):
        return self.default(robot) if callable(self.default) else self.default


# ---------------------------------------------------------------- robot-specific defaults
# (gato_ros.param_defaults: what the schema takes from the robot registry and the core; the
# underscore aliases keep the schema's entries short)
from .param_defaults import (COLLISION_MECHS, ROBOTS, SOLVER as _SOLVER, LIMITS as _LIMITS,  # noqa: E402
                             LINSYS as _LINSYS, COLLISION_DEFAULTS as _COLLISION,
                             DEFAULT_LINSYS as _DEFAULT_LINSYS, ee_frame as _ee_frame,
                             goals as _goals, joint_names as _joint_names, obstacle_check as _obstacles,
                             q_ready as _q_ready, registry_entry as _registry)


# ---------------------------------------------------------------- the controller node
CONTROLLER = (
    # structural (read-only)
    Param("robot", "string", lambda r: r, "registered robot (gato.robot_info); selects URDF, EE frame and limits",
          read_only=True, group="structure"),
    Param("joint_names", "string_array", _joint_names,
          "joints the solver controls, in the order of the command arrays; /joint_states is mapped by name "
          "(any order, extra joints ignored)", read_only=True, group="structure"),
    Param("controller_name", "string", "effort_controller",
          "ros2_control forward controller: commands go to /<controller_name>/commands (Float64MultiArray)",
          read_only=True, group="structure"),
    Param("N", "integer", 32, "horizon length in knots", "knots", range=(2, 512), read_only=True,
          group="structure"),
    Param("dt", "double", 0.03125, "knot spacing of the horizon", "s", range=(0.001, 1.0), read_only=True,
          group="structure"),
    Param("batch_size", "integer", 1, "batched solves per tick (best of batch wins)", "problems",
          range=(1, 512), read_only=True, group="structure"),
    Param("backend", "string", "cpu", "solver backend (the CPU backend runs everywhere)", choices=("cpu",),
          read_only=True, group="structure"),
    Param("control_rate_hz", "double", 100.0,
          "control rate: the deadline of a tick is 1/control_rate_hz; the timer rate when trigger=timer", "Hz",
          range=(1.0, 2000.0), read_only=True, group="structure"),
    Param("trigger", "string", "state",
          "what starts a tick: 'state' solves on every new joint state (lowest latency; lockstep), 'timer' "
          "solves at control_rate_hz on the latest state", choices=("state", "timer"), read_only=True,
          group="structure"),
    Param("reference_sync", "bool", False,
          "wait for the EE reference stamped at the joint state's time before solving (lockstep "
          "reproducibility); false: use the latest reference, resampled at the state's time",
          read_only=True, group="structure"),
    Param("warm_start", "string", "shift", "warm start of the next tick: the plan shifted one knot, or as solved",
          choices=("shift", "hold"), read_only=True, group="structure"),
    # solver costs (tunable)
    Param("q_cost", "double", _SOLVER.q_cost, "running end-effector position weight", range=(0.0, 1e4), group="cost"),
    Param("qd_cost", "double", _SOLVER.qd_cost, "joint velocity weight", range=(0.0, 1e3), group="cost"),
    Param("u_cost", "double", _SOLVER.u_cost, "joint torque weight", range=(0.0, 1.0), group="cost"),
    Param("N_cost", "double", _SOLVER.N_cost, "terminal end-effector position weight", range=(0.0, 1e5),
          group="cost"),
    Param("q_lim_cost", "double", _SOLVER.q_lim_cost, "joint position limit barrier weight (0 = off)", range=(0.0, 1e3),
          group="cost"),
    Param("vel_lim_cost", "double", _SOLVER.vel_lim_cost, "joint velocity limit barrier weight (0 = off)",
          range=(0.0, 1e3),
          group="cost"),
    Param("ctrl_lim_cost", "double", _SOLVER.ctrl_lim_cost, "torque limit barrier weight (0 = off)", range=(0.0, 1e3),
          group="cost"),
    Param("u_ref", "string", _SOLVER.u_ref, "reference of the torque cost: zero (penalise u, the reference's "
          "cost: holding the arm up costs, the plan sags under gravity) or gravity (penalise u - g(q) at every "
          "knot: gravity compensation is free; docs/solver_method.md)", choices=("zero", "gravity"),
          group="cost"),
    # solver settings (tunable)
    Param("mu", "double", _SOLVER.mu, "merit-function weight of the L1 defect norm", range=(0.0, 1e4),
          group="solver"),
    Param("rho", "double", _SOLVER.rho, "initial trust-region weight on the position block", "1/rad^2",
          range=(1e-9, 1e3), group="solver"),
    Param("max_sqp_iters", "integer", _SOLVER.max_sqp_iters, "SQP iterations per tick (1 = real-time iteration)",
          "iterations",
          range=(1, 100), group="solver"),
    Param("max_pcg_iters", "integer", _SOLVER.max_pcg_iters, "PCG iteration cap per SQP iteration", "iterations",
          range=(1, 10000), group="solver"),
    Param("pcg_tol", "double", _SOLVER.pcg_tol, "PCG relative tolerance", range=(0.0, 1.0), group="solver"),
    Param("linsys", "string", _DEFAULT_LINSYS,
          "Schur-system path: pcg | bdsv (exact block-tridiagonal) | bdsv_first | auto (cold steps exact, "
          "warm steps PCG)", choices=_LINSYS, group="solver"),
    Param("budget_s", "double", 0.0, "wall-clock budget of a tick's SQP loop (0 = off: max_sqp_iters run)", "s",
          range=(0.0, 1.0), group="solver"),
    Param("limits", "string", "admm",
          "URDF joint-limit rows (position, velocity, torque boxes) on the solver: off | telemetry | barrier | al "
          "| admm (the library's default for fixed-base arms, with its measured settings); needs the solver's "
          "row-group layer: refused when the solver has no enable_limit_<mechanism>", choices=_LIMITS,
          group="solver"),
    Param("reseed_threshold", "double", 0.0,
          "re-seed the warm start to a hold when ||x_measured - x_predicted|| exceeds this (0 = off)",
          range=(0.0, 1e3), group="solver"),
    # collision clearance rows (tunable, like limits): docs/constraints.md "Collision clearance rows"
    Param("collision_spheres", "double_array", [],
          "world obstacles of the BSQP planner's collision rows: flat [x, y, z, r] per sphere, world frame "
          "(empty with collision_planes empty = rows off); every collision sphere of the arm keeps "
          "collision_margin from them at knots 1..N-1; needs limits other than off (the collision group comes "
          "after the limit groups); the OSC fallback and the sampling / osc planners ignore obstacles, the "
          "simulated world does not model them", "m", group="collision", check=_obstacles("collision_spheres")),
    Param("collision_planes", "double_array", [],
          "world half-space obstacles of the collision rows: flat [nx, ny, nz, offset] per plane, the obstacle "
          "is n.p <= offset (e.g. [0, 0, 1, 0]: below the floor z = 0); normal non-zero (normalized)", "m",
          group="collision", check=_obstacles("collision_planes")),
    Param("collision_margin", "double", _COLLISION["collision_margin"],
          "clearance every collision sphere keeps from every obstacle", "m", range=(0.0, 1.0), group="collision"),
    Param("collision_mech", "string", _COLLISION["collision_mech"],
          "mechanism of the collision rows, with its measured weight (admm rho 10, al rho 100, barrier mu 0.01; "
          "admm held the margin within 1 mm in closed loop, barrier keeps a wide berth and biases tracking; "
          "telemetry: clearances in the stats only)", choices=COLLISION_MECHS,
          group="collision"),
    # safety (tunable)
    Param("joint_state_timeout_s", "double", 0.1,
          "joint states older than this (by receipt time) are stale: the controller holds "
          "(gravity compensation at the last good state)", "s", range=(0.001, 10.0), group="safety"),
    Param("resume_speed_mps", "double", 0.2,
          "after a warm-start reset (start-up, restart, recovery from a hold or a lost reference) the EE "
          "reference is blended from the measured EE position into the live one (minimum jerk) over "
          "distance / resume_speed_mps, so the first commands stay near the hold torque (0 = off)", "m/s",
          range=(0.0, 10.0), group="safety"),
    Param("publish_step_result", "bool", True, "publish gato_msgs/StepResult every tick (the largest message)",
          group="output"),
    Param("publish_commands", "bool", True,
          "publish the torques (/<controller_name>/commands, ~/command); false: plans only (~/plan), which the "
          "gato ros2_control plugin executes in follow mode", read_only=True, group="output"),
    # planner and OSC fallback (gato.planner registry; controller_logic)
    Param("planner", "string", "bsqp",
          "planner of the node (gato.planner registry): bsqp (batched SQP MPC, plans with knots), sampling "
          "(sampling MPC over MuJoCo rollouts: the sampling_* parameters) or osc (operational-space controller, "
          "the torque of the tick: the osc_* parameters); the N / dt reference window is built for every planner",
          choices=("bsqp", "sampling", "osc"), read_only=True, group="planner"),
    Param("fallback", "string", "osc",
          "osc: the node switches to the OSC (tracking the last reference window, osc_* gains) when the planner "
          "misses fallback_after_misses deadlines in a row, diverges (non-finite or diverged solve, solver error) "
          "or re-seeds its warm start, and back to the planner (cold start at the measured state) after "
          "fallback_recover_ticks; off: the planner's own gravity fallback and a hold on solver errors; no effect "
          "with planner=osc", choices=("osc", "off"), group="planner"),
    Param("fallback_after_misses", "integer", 3,
          "consecutive deadline misses (receipt to publish > 1/control_rate_hz) that switch to the OSC fallback "
          "(0 = deadline misses never switch); not with reference_sync (lockstep: the world waits for the "
          "command, so a late tick costs no tracking and a switch would make the run machine-dependent)", "ticks",
          range=(0, 1000), group="planner"),
    Param("fallback_grace_ticks", "integer", 10,
          "planner ticks after each cold start (start-up, return from the OSC fallback or a hold) in which only a "
          "tick later than two periods counts toward fallback_after_misses: the first solves without a warm start "
          "take several times longer, and counting every late one sent the planner straight back to the fallback "
          "on a loaded machine; a stalled solver still switches at once",
          "ticks", range=(0, 100000), group="planner"),
    Param("fallback_recover_ticks", "integer", 50,
          "hysteresis: ticks the OSC fallback keeps control before the planner is tried again (cold start at the "
          "measured state)", "ticks", range=(1, 100000), group="planner"),
    Param("osc_stiffness", "double", 400.0, "OSC (planner osc and the fallback): EE position stiffness per axis, "
          "inertia-decoupled; the default (with osc_damping 40) stays stable with up to 25 ms of state-to-command "
          "latency at 100 Hz, 900 / 60 (the 1 kHz gains) up to 15 ms only (docs/benchmarks_ros.md)", "1/s^2",
          range=(0.0, 1e5), group="osc"),
    Param("osc_damping", "double", 40.0, "OSC: EE position damping per axis, inertia-decoupled", "1/s",
          range=(0.0, 1e4), group="osc"),
    Param("osc_orientation_stiffness", "double", 400.0, "OSC: stiffness holding the tool orientation the OSC "
          "started with (the measured one when it takes over)", "1/s^2", range=(0.0, 1e5), group="osc"),
    Param("osc_orientation_damping", "double", 40.0, "OSC: tool orientation damping", "1/s", range=(0.0, 1e4),
          group="osc"),
    Param("osc_null_space_stiffness", "double", 25.0, "OSC, robots with more than 6 joints: null-space stiffness "
          "toward the posture the OSC started with", "1/s^2", range=(0.0, 1e4), group="osc"),
    Param("osc_null_space_damping", "double", 10.0, "OSC, robots with more than 6 joints: null-space damping",
          "1/s", range=(0.0, 1e4), group="osc"),
    Param("sampling_num_samples", "integer", 64, "planner sampling: candidate control sequences per iteration",
          "samples", range=(2, 4096), read_only=True, group="sampling"),
    Param("sampling_iterations", "integer", 2, "planner sampling: sampling iterations per tick", "iterations",
          range=(1, 100), read_only=True, group="sampling"),
    Param("sampling_horizon_s", "double", 0.5, "planner sampling: rollout horizon", "s", range=(0.01, 10.0),
          read_only=True, group="sampling"),
    Param("sampling_timestep_s", "double", 0.005, "planner sampling: timestep of the MuJoCo planning scene",
          "s", range=(1e-4, 0.1), read_only=True, group="sampling"),
    Param("sampling_ctrl_std", "double", 0.01, "planner sampling: noise of the joint-target nodes", "rad",
          range=(0.0, 10.0), read_only=True, group="sampling"),
    Param("sampling_ee_weight", "double", 2000.0, "planner sampling: EE tracking weight per rollout step",
          "1/m^2", range=(0.0, 1e7), read_only=True, group="sampling"),
    Param("sampling_ctrl_weight", "double", 1.0, "planner sampling: weight of the joint targets' distance to "
          "the IK reference", "1/rad^2", range=(0.0, 1e6), read_only=True, group="sampling"),
    Param("sampling_threads", "integer", 0, "planner sampling: mujoco.rollout threads (0 = all CPUs)", "threads",
          range=(0, 256), read_only=True, group="sampling"),
    Param("sampling_seed", "integer", 0, "planner sampling: noise seed (a lockstep run is reproducible for a seed "
          "and thread count)", range=(0, 2**31 - 1), read_only=True, group="sampling"),
    Param("sampling_method", "string", "mppi", "planner sampling: mppi (exponentially weighted elites), cem "
          "(cross-entropy: equal elite weights) or ilqr (iLQR over the same rollouts, sampling_iterations per plan)",
          choices=("mppi", "cem", "ilqr"), read_only=True, group="sampling"),
    Param("fault_solver_delay_s", "double", 0.0, "fault injection for tests: every planner step sleeps this long "
          "first (a stalled solver: deadline misses on demand; 0 = off)", "s", range=(0.0, 1.0),
          group="testing"),
    # external-wrench hypotheses from the estimator node (tunable: switched between ticks)
    Param("hypotheses", "string", "none",
          "external-wrench hypotheses of the solve: none (the robot-only model) | estimator (the latest "
          "geometry_msgs/WrenchStamped on wrench_topic, world axes at the EE frame origin, is programmed into "
          "every batch entry's dynamics; with batch_size > 1 the entries also try zero and wrenches "
          "hypothesis_spread_n around it and the one-step rollout picks the winner); switched between ticks",
          choices=("none", "estimator"), group="hypotheses"),
    Param("wrench_topic", "string", "/gato_estimator/wrench",
          "hypotheses=estimator: the wrench estimate topic (geometry_msgs/WrenchStamped, the estimator node's)",
          read_only=True, group="hypotheses"),
    Param("estimate_timeout_s", "double", 0.5,
          "hypotheses=estimator: an estimate older than this (receipt time, node clock) is dropped and the "
          "solve uses zero wrench until a fresh one arrives", "s", range=(0.001, 60.0), group="hypotheses"),
    Param("hypothesis_spread_n", "double", 5.0,
          "hypotheses=estimator, batch_size > 1: radius of the wrench hypotheses around the estimate", "N",
          range=(0.0, 1000.0), group="hypotheses"),
    Param("estimate_sync", "bool", False,
          "hypotheses=estimator, lockstep (trigger=state): wait for the estimate stamped at the joint state's "
          "time (the estimator's fit of the interval that state closes) before solving, so the run is "
          "reproducible; when the world has re-sent the state 3 times without it, the tick solves under the "
          "last estimate received (logged, ~/status reason) and ticks stop waiting until one arrives again; "
          "false: the latest estimate received (asynchronous)", read_only=True, group="hypotheses"),
    # standard ROS 2 interfaces (issue 31: gato_ros.standard_io, target_logic, trajectory_logic, health)
    Param("target_frame", "string", "",
          "frame of the EE positions the targets resolve into (~/goal_pose, ~/delta_twist_cmds; a target in "
          "another frame is transformed through /tf); empty = the URDF root link", read_only=True, group="targets"),
    Param("goal_speed_mps", "double", 0.1,
          "~/goal_pose: average EE speed of the minimum-jerk path to a goal (duration = distance / speed, at "
          "least goal_min_duration_s)", "m/s", range=(0.001, 2.0), group="targets"),
    Param("goal_min_duration_s", "double", 0.5, "~/goal_pose: shortest minimum-jerk path", "s",
          range=(0.0, 600.0), group="targets"),
    Param("target_max_distance_m", "double", 1.0,
          "~/goal_pose: a goal farther than this from the measured EE is refused (logged, counted)", "m",
          range=(0.0, 10.0), group="targets"),
    Param("servo_max_speed_mps", "double", 0.25,
          "~/delta_twist_cmds: a faster linear twist is scaled down to this speed (logged, counted)", "m/s",
          range=(0.0, 2.0), group="targets"),
    Param("servo_timeout_s", "double", 0.1,
          "~/delta_twist_cmds: a twist moves the target for this long after it arrived (then it stops: a stream "
          "that ends stops the arm)", "s", range=(0.001, 10.0), group="targets"),
    Param("traj_posture_weight", "double", 20.0,
          "joint trajectories (~/follow_joint_trajectory, ~/joint_trajectory) and a cancelled goal's hold: weight "
          "of the per-knot joint posture targets (the EE term tracks the forward kinematics of the same "
          "samples)", "1/rad^2", range=(0.0, 1e5), group="targets"),
    Param("traj_path_tolerance_rad", "double", 0.2,
          "joint trajectories: path tolerance of a joint whose goal gives none (0); -1 in a goal = none", "rad",
          range=(0.0, 10.0), group="targets"),
    Param("traj_goal_tolerance_rad", "double", 0.02,
          "joint trajectories: goal tolerance of a joint whose goal gives none (0)", "rad", range=(0.0, 10.0),
          group="targets"),
    Param("traj_goal_time_s", "double", 1.0,
          "joint trajectories: time after the last point for the joints to settle within the goal tolerance "
          "when the goal gives none (0); then GOAL_TOLERANCE_VIOLATED", "s", range=(0.0, 600.0), group="targets"),
    Param("viz_rate_hz", "double", 10.0,
          "rate of ~/plan_path, ~/reference_path, ~/batch_paths/row_<b> and the gato_ee_target TF (the plan's ticks, "
          "by their stamps; at or above control_rate_hz: every plan; 0 = off)", "Hz", range=(0.0, 2000.0),
          read_only=True, group="output"),
    Param("viz_batch_rows", "integer", 4,
          "batch_size > 1: EE paths of this many batch rows on ~/batch_paths/row_<b> (one forward-kinematics pass "
          "of N knots each per published view)", "rows", range=(0, 512), read_only=True, group="output"),
    Param("diagnostics_period_s", "double", 1.0, "period of /diagnostics (diagnostic_msgs/DiagnosticArray)", "s",
          range=(0.01, 60.0), read_only=True, group="output"),
    Param("diagnostics_error_after_s", "double", 2.0,
          "/diagnostics: a planner degraded (deadline misses, OSC fallback) this long in a row is an ERROR "
          "(WARN before)", "s", range=(0.0, 600.0), read_only=True, group="output"),
    Param("diagnostics_recover_s", "double", 1.0,
          "/diagnostics: the degraded spell ends after this long without a missed or fallback tick", "s",
          range=(0.0, 600.0), read_only=True, group="output"),
)

# ---------------------------------------------------------------- the simulation-world node
SIM = (
    Param("robot", "string", lambda r: r, "registered robot (URDF from gato_description)", read_only=True),
    Param("world", "string", "mujoco", "simulator: mujoco (gato.worlds.MuJoCoWorld, independent of the solver's "
          "model) or pinocchio (gato.worlds.PinocchioWorld, RK4)", choices=("mujoco", "pinocchio"),
          read_only=True),
    Param("lockstep", "bool", True, "true: advance one control period only when the stamped command for the "
          "current tick has arrived (reproducible); false: free-running at wall-clock pace, zero-order hold of "
          "the latest command", read_only=True),
    Param("control_rate_hz", "double", 100.0, "tick rate: joint states and /clock are published every "
          "1/control_rate_hz of simulated time", "Hz", range=(1.0, 2000.0), read_only=True),
    Param("physics_dt", "double", 0.001, "simulator step; must divide the control period", "s",
          range=(1e-5, 0.1), read_only=True),
    Param("duration_s", "double", 0.0, "simulated time after which the node exits 0 (0 = run until stopped)", "s",
          range=(0.0, 1e6), read_only=True),
    Param("q0", "double_array", _q_ready, "start joint positions (gato.tasks.Q_READY)", "rad", read_only=True),
    Param("joint_names", "string_array", _joint_names, "joint names published in /joint_states (the URDF's)",
          read_only=True),
    Param("controller_name", "string", "effort_controller",
          "realtime mode: efforts are read from /<controller_name>/commands", read_only=True),
    Param("command_topic", "string", "/gato_controller/command",
          "lockstep mode: the stamped gato_msgs/EffortCommand topic", read_only=True),
    Param("start_subscribers", "integer", 0, "lockstep: publish the first joint state only once /joint_states "
          "has this many subscribers (the controller, a recorder), so that nobody misses the start (0 = at once)",
          "subscribers", range=(0, 100), read_only=True),
    Param("lockstep_resend_s", "double", 0.5, "lockstep: re-publish the current joint state and clock when no "
          "command arrived for this long (wall clock): covers start-up and lost messages", "s",
          range=(0.01, 60.0), read_only=True),
    Param("command_timeout_s", "double", 0.05, "command watchdog: no command for this long is a timeout; "
          "realtime (simulated time: the world's own cycles): the world applies command_timeout_action until "
          "commands resume; lockstep (wall clock, at least lockstep_resend_s): the world keeps waiting and reports "
          "that the controller stopped answering (~/status, log)", "s",
          range=(0.001, 10.0), read_only=True),
    Param("command_timeout_action", "string", "hold", "realtime: what the world applies without fresh commands "
          "(before the first one and after a timeout): hold (PD to the joint positions at the timeout, critically "
          "damped through the mass matrix at hold_frequency_hz, plus gravity compensation, within the effort "
          "limits) or brake (motor torque zero, joint brakes stop the joints with up to the effort limit)",
          choices=("hold", "brake"), read_only=True),
    Param("hold_frequency_hz", "double", 4.0, "natural frequency of the timeout hold's PD (damping ratio 1)", "Hz",
          range=(0.1, 50.0), read_only=True),
    Param("payload_mass_kg", "double", 0.0, "rigid payload at the EE frame origin: its weight is applied as an "
          "EE force (inertia neglected)", "kg", range=(0.0, 100.0), read_only=True),
    Param("external_wrench", "double_array", [0.0] * 6, "constant wrench at the EE frame origin, world axes "
          "[fx, fy, fz, tx, ty, tz]", "N, N*m", read_only=True),
    Param("link_mass_scale", "string", "", "model error of the world: comma-separated LINK:FACTOR entries (URDF "
          "link names, e.g. L4:1.2,L6:0.9): each link's mass and rotational inertia are multiplied by FACTOR "
          "(finite, > 0; COM unchanged) in the simulator's model only, the controller's model stays nominal "
          "(empty = none)", read_only=True),
    Param("pendulum_mass_kg", "double", 0.0, "pinocchio world only: a pendulum payload hanging from the EE "
          "(0 = none)", "kg", range=(0.0, 100.0), read_only=True),
    Param("pendulum_length_m", "double", 0.3, "pinocchio world only: pendulum length", "m", range=(0.01, 5.0),
          read_only=True),
)

# ---------------------------------------------------------------- the reference node
REFERENCE = (
    Param("robot", "string", lambda r: r, "registered robot (EE frame, task tables)", read_only=True),
    Param("mode", "string", "fig8", "fig8: a figure-8 around the EE position at q0; goals: a sequence of EE "
          "goals; hold: the EE position at q0", choices=("fig8", "goals", "hold"), read_only=True),
    Param("n_knots", "integer", 32, "knots per published window (>= the controller's N)", "knots",
          range=(1, 4096), read_only=True),
    Param("knot_dt", "double", 0.03125, "knot spacing of the window", "s", range=(0.001, 1.0), read_only=True),
    Param("rate_hz", "double", 100.0, "publish rate when not clock-driven", "Hz", range=(0.1, 2000.0),
          read_only=True),
    Param("clock_driven", "bool", True, "publish one window per /clock message, stamped with that time "
          "(lockstep); false: a timer at rate_hz", read_only=True),
    Param("q0", "double_array", _q_ready, "pose whose EE position centres the figure-8 / is held", "rad",
          read_only=True),
    Param("fig8_amplitude_x", "double", 0.1, "figure-8 horizontal half-amplitude", "m", range=(0.0, 1.0),
          read_only=True),
    Param("fig8_amplitude_z", "double", 0.1, "figure-8 vertical half-amplitude", "m", range=(0.0, 1.0),
          read_only=True),
    Param("fig8_theta", "double", 1.5707963267948966, "figure-8 plane rotation about world z (pi/2: the y-z "
          "plane)", "rad", range=(-math.pi, math.pi), read_only=True),
    Param("fig8_period_s", "double", 4.0, "figure-8 period", "s", range=(0.1, 1000.0), read_only=True),
    Param("goals", "double_array", _goals, "goals mode: flat [x, y, z] * n EE goals, world frame", "m",
          read_only=True),
    Param("goal_seed", "integer", -1, "goals mode: >= 0 draws the goals from gato.tasks.pickplace_scenarios "
          "with this seed instead of 'goals'", range=(-1, 2**31 - 1), read_only=True),
    Param("goal_hold_s", "double", 2.0, "goals mode: time at each goal (ramp included)", "s",
          range=(0.01, 1000.0), read_only=True),
    Param("goal_ramp_s", "double", 0.6, "goals mode: minimum-jerk travel time between goals (0 = steps)", "s",
          range=(0.0, 1000.0), read_only=True),
)

# ---------------------------------------------------------------- the estimator node
ESTIMATOR = (
    Param("robot", "string", lambda r: r, "registered robot (URDF and EE frame of the identification model)",
          read_only=True),
    Param("joint_names", "string_array", _joint_names, "joints of the model; /joint_states and the effort "
          "commands are mapped by name (any order, extra joints ignored)", read_only=True),
    Param("effort_source", "string", "command",
          "where the applied torque of an interval comes from: command (gato_msgs/EffortCommand on "
          "effort_topic, stamped with the joint state it answers: applied from that state to the next; exact "
          "in lockstep) | joint_states (the effort field of /joint_states: the torque applied since the "
          "previous state, as the simulation world and effort state interfaces report it)",
          choices=("command", "joint_states"), read_only=True),
    Param("effort_topic", "string", "/gato_controller/command",
          "effort_source=command: the stamped effort command topic", read_only=True),
    Param("mode", "string", "wrench", "wrench: the full 6-D EE wrench (EMA alpha); weight: the payload weight "
          "only (gravity-aligned force, low-passed over weight_tau_s, floored at 0)", choices=("wrench", "weight"),
          read_only=True),
    Param("alpha", "double", 0.5, "EMA weight of a new fit (1 = raw per-interval fits)", range=(0.001, 1.0),
          read_only=True),
    Param("damping", "double", 0.001, "Tikhonov damping of the least-squares fit J^T w = tau_residual "
          "(added to J J^T)", "m^2", range=(0.0, 10.0), read_only=True),
    Param("weight_tau_s", "double", 0.1, "mode=weight: time constant of the weight filter", "s",
          range=(0.001, 100.0), read_only=True),
    Param("max_wrench", "double", 500.0, "divergence guard: the force and torque halves of every fit are "
          "clamped to this norm, counted and reported (~/stats, log); the estimate is never NaN", "N, N*m",
          range=(0.001, 1e5), read_only=True),
    Param("max_interval_s", "double", 0.1, "a gap between consecutive joint states longer than this (lost "
          "messages, a pause) is not fitted (the finite difference would be meaningless)", "s",
          range=(1e-4, 10.0), read_only=True),
    Param("frame_id", "string", "world", "header.frame_id of the published wrench (the world frame; the point "
          "of application is the EE frame origin)", read_only=True),
)

# ---------------------------------------------------------------- the live view node
VIEW = (
    Param("robot", "string", lambda r: r, "registered robot (URDF visuals and meshes, EE frame)", read_only=True),
    Param("host", "string", "127.0.0.1", "address the page and the Foxglove server bind to (127.0.0.1: this "
          "machine only; 0.0.0.0: every interface)", read_only=True),
    Param("port", "integer", 8080, "HTTP port of the browser page (0 = a free port, logged)", "port",
          range=(0, 65535), read_only=True),
    Param("foxglove", "bool", True, "also serve the Foxglove WebSocket protocol (foxglove-sdk): the scene and "
          "the graph's topics with their schemas", read_only=True),
    Param("foxglove_port", "integer", 8765, "port of the Foxglove WebSocket server (0 = a free port, logged)",
          "port", range=(0, 65535), read_only=True),
    Param("rate_hz", "double", 10.0, "frames per second the view computes and sends (its own thread; the "
          "subscriptions only store the newest message)", "Hz", range=(0.5, 120.0), read_only=True),
    Param("plot_window_s", "double", 10.0, "history of the scrolling plot (EE error, solve time)", "s",
          range=(0.5, 3600.0), read_only=True),
    Param("controller_node", "string", "/gato_controller", "node whose plan, step_result, status, "
          "solver_stats and command topics are shown (the gato plugin in embedded mode: /gato_plugin_embedded)",
          read_only=True),
)

#: Node name -> schema. The node names are the keys of the per-robot YAML files.
SCHEMAS = {"gato_controller": CONTROLLER, "gato_sim": SIM, "gato_reference": REFERENCE, "gato_estimator": ESTIMATOR,
           "gato_view": VIEW}
NODE_NAMES = tuple(SCHEMAS)


# ---------------------------------------------------------------- the ros2_control plugin
def _effort_scaled(factor: float):
    """Per-joint gains proportional to the URDF effort limits (a stiff default for a strong
    joint, a soft one for a wrist): ``factor * effort_limit`` per joint."""
    def default(robot: str) -> list:
        import pinocchio as pin

        model = pin.buildModelFromUrdf(_registry(robot)["urdf"])
        return [round(factor * float(v), 6) for v in model.effortLimit]
    return default


#: Controller name and pluginlib type of the C++ plugin (gato_ros/src/gato_controller.cpp).
PLUGIN_NAME = "gato_plugin"
PLUGIN_TYPE = "gato_ros/GatoController"

# The dynamics (hold torque) and the effort / position limits come from the controller
# manager's robot_description (the URDF the hardware runs), not from a parameter.
PLUGIN = (
    Param("joints", "string_array", _joint_names, "joints commanded through <joint>/effort, read through "
          "<joint>/position and <joint>/velocity (and <joint>/effort when the hardware has it)", read_only=True,
          group="structure"),
    Param("mode", "string", "follow", "follow: execute gato_msgs/Plan from the gato controller node "
          "(publish_commands=false); embedded: run BSQP in the plugin's own solver thread (no Python) toward "
          "the EE reference topic", choices=("follow", "embedded"), read_only=True, group="structure"),
    Param("plan_topic", "string", "/gato_controller/plan", "follow mode: the gato_msgs/Plan topic",
          read_only=True, group="structure"),
    Param("reference_topic", "string", "/ee_reference", "embedded mode: the gato_msgs/EEReference topic "
          "(without one, the EE position at activation is held)", read_only=True, group="structure"),
    Param("ee_frame", "string", _ee_frame, "embedded mode: the URDF frame whose origin tracks the EE reference "
          "(the robot's registered EE frame; empty: the child link of the last joint)", read_only=True,
          group="structure"),
    Param("N", "integer", 32, "embedded mode: horizon length", "knots", range=(2, 512), read_only=True,
          group="structure"),
    Param("dt", "double", 0.03125, "embedded mode: knot spacing of the horizon", "s", range=(0.001, 1.0),
          read_only=True, group="structure"),
    Param("solve_rate_hz", "double", 100.0, "embedded mode: rate of the solver thread (each solve starts from "
          "the newest state of the control loop)", "Hz", range=(1.0, 1000.0), read_only=True, group="structure"),
    Param("warmup_solves", "integer", 5, "embedded mode: solves on a cold start (activation, after a failed "
          "solve) before the first plan", "solves", range=(0, 100), read_only=True, group="structure"),
    Param("max_knots", "integer", 128, "longest plan accepted (buffers are allocated for it at configure)",
          "knots", range=(2, 4096), read_only=True, group="structure"),
    Param("status_rate_hz", "double", 20.0, "rate of ~/status (gato_msgs/ControllerStatus) from the control loop",
          "Hz", range=(0.1, 1000.0), read_only=True, group="output"),
    Param("plan_timeout", "double", 0.1, "a plan older than this (control time - its stamp) is not executed: "
          "hold", "s", range=(0.001, 10.0), group="safety"),
    Param("kp", "double_array", _effort_scaled(0.1), "joint stiffness toward the planned position, per joint "
          "(default: 0.1 x the URDF effort limit)", "N*m/rad", group="feedback"),
    Param("kd", "double_array", _effort_scaled(0.01), "joint damping toward the planned velocity, per joint "
          "(default: 0.01 x the URDF effort limit)", "N*m*s/rad", group="feedback"),
    Param("use_plan_gains", "bool", True, "add the plan's local feedback gains when it carries them",
          group="feedback"),
    Param("hold_frequency_hz", "double", 4.0, "a hold (no / stale plan, NaN) keeps the position where it began: "
          "tau = gravity(q) + M(q) (w^2 (q_hold - q) - 2 w v) - hold_damping * v, w = 2 pi hold_frequency_hz "
          "(critically damped through the mass matrix: every joint settles alike; 0 = gravity + hold_damping "
          "only, the arm coasts)", "Hz", range=(0.0, 50.0), group="safety"),
    Param("hold_damping", "double_array", lambda robot: [0.0] * len(_joint_names(robot)), "extra joint damping "
          "in the hold torque and toward a position limit, per joint (joint-local: keep it small against the "
          "wrist's inertia, a control lag makes a large one unstable)", "N*m*s/rad", group="safety"),
    Param("limit_margin", "double", 0.05, "within this distance of a URDF position limit, no torque beyond the "
          "gravity-holding one pushes the joint further", "rad", range=(0.0, 1.0), group="safety"),
    # embedded mode: the solver tunables, the controller node's parameters (same names, ranges,
    # defaults), applied between two solves; linsys without the node's "auto" policy
    *(dataclasses.replace(p, description="embedded mode: " + p.description) for p in CONTROLLER
      if p.name in ("q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "mu", "rho", "max_sqp_iters",
                    "max_pcg_iters", "pcg_tol")),
    Param("linsys", "string", _DEFAULT_LINSYS, "embedded mode: Schur-system path: pcg | bdsv (exact "
          "block-tridiagonal) | "
          "bdsv_first", choices=("pcg", "bdsv", "bdsv_first"), group="solver"),
)

_GPL_TYPES = {"double": "double", "integer": "int", "bool": "bool", "string": "string",
              "string_array": "string_array", "double_array": "double_array"}


def by_name(schema) -> dict:
    return {p.name: p for p in schema}


def defaults(schema, robot: str) -> dict:
    """{name: default} of a schema for ``robot``."""
    return {p.name: p.default_for(robot) for p in schema}


# ---------------------------------------------------------------- validation
def coerce(p: Param, value):
    """``value`` as the Python type of parameter ``p``, or raise ValueError (type check only)."""
    t = p.type
    if t == "double":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{p.name}: expected a number, got {value!r}")
        return float(value)
    if t == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{p.name}: expected an integer, got {value!r}")
        return int(value)
    if t == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{p.name}: expected true or false, got {value!r}")
        return value
    if t == "string":
        if not isinstance(value, str):
            raise ValueError(f"{p.name}: expected a string, got {value!r}")
        return value
    try:
        seq = list(value)
    except TypeError:
        raise ValueError(f"{p.name}: expected a list, got {value!r}") from None
    if t == "string_array":
        if not all(isinstance(v, str) for v in seq):
            raise ValueError(f"{p.name}: expected a list of strings, got {value!r}")
        return seq
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seq):
        raise ValueError(f"{p.name}: expected a list of numbers, got {value!r}")
    return [float(v) for v in seq]


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def validate(schema, name: str, value, *, allow_read_only: bool = False) -> str | None:
    """Why setting ``name`` to ``value`` is refused (a one-line reason), or None if it is valid.

    Checks: known name, read-only (unless ``allow_read_only``: start-up values), type,
    finiteness, range (inclusive; the reason names it) and choices.
    """
    p = by_name(schema).get(name)
    if p is None:
        return f"{name}: unknown parameter"
    if p.read_only and not allow_read_only:
        return f"{name}: read-only (structural; set it in the parameter file and restart the node)"
    try:
        v = coerce(p, value)
    except ValueError as e:
        return str(e)
    if p.type in ("double", "integer") and not math.isfinite(v):
        return f"{name}: expected a finite value, got {value!r}"
    if p.type == "double_array" and not all(math.isfinite(x) for x in v):
        return f"{name}: contains NaN or Inf"
    if p.range is not None and not p.range[0] <= v <= p.range[1]:
        return f"{name}: {_fmt(v)} is out of range [{_fmt(p.range[0])}, {_fmt(p.range[1])}]"
    if p.choices is not None and v not in p.choices:
        return f"{name}: {v!r} is not one of {', '.join(p.choices)}"
    if p.check is not None:
        return p.check(v)
    return None


# ---------------------------------------------------------------- rclpy descriptors
def resolve_config(schema, config: dict, what: str) -> dict:
    """A node's start-up configuration: ``config`` over the schema's defaults for
    ``config["robot"]``, every value validated like a parameter file (read-only
    parameters allowed) and coerced to its type. ValueError names the parameter
    (``what`` names the node kind in the unknown-parameter message)."""
    cfg = defaults(schema, config.get("robot", "iiwa14"))
    unknown = set(config) - set(cfg)
    if unknown:
        raise ValueError(f"unknown {what} parameter(s): {sorted(unknown)}")
    cfg.update(config)
    specs = by_name(schema)
    for name, value in cfg.items():
        reason = validate(schema, name, value, allow_read_only=True)
        if reason:
            raise ValueError(reason)
        cfg[name] = coerce(specs[name], value)
    return cfg


def descriptor(p: Param):
    """The rclpy ParameterDescriptor of ``p``: type, description (with unit and choices),
    read_only, and a FloatingPointRange / IntegerRange (step 0: continuous)."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType

    types = {"double": ParameterType.PARAMETER_DOUBLE, "integer": ParameterType.PARAMETER_INTEGER,
             "bool": ParameterType.PARAMETER_BOOL, "string": ParameterType.PARAMETER_STRING,
             "string_array": ParameterType.PARAMETER_STRING_ARRAY,
             "double_array": ParameterType.PARAMETER_DOUBLE_ARRAY}
    desc = p.description + (f" [{p.unit}]" if p.unit else "")
    d = ParameterDescriptor(name=p.name, type=types[p.type], description=desc, read_only=p.read_only)
    if p.choices is not None:
        d.additional_constraints = "one of: " + ", ".join(p.choices)
    if p.range is not None:
        if p.type == "double":
            d.floating_point_range = [FloatingPointRange(from_value=float(p.range[0]), to_value=float(p.range[1]),
                                                         step=0.0)]
        else:
            d.integer_range = [IntegerRange(from_value=int(p.range[0]), to_value=int(p.range[1]), step=0)]
    return d


# ---------------------------------------------------------------- generated files
_HEADER = ("# GENERATED by `python -m gato_ros.params --write` from src/gato_ros/gato_ros/params.py.\n"
           "# Do not edit: change the schema and regenerate (test/test_ros_params.py checks this file).\n")


def _yaml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        r = repr(v)
        if "e" in r and "." not in r.split("e")[0]:
            r = r.replace("e", ".0e")  # YAML 1.1 (PyYAML) reads 2e-06 as a string, 2.0e-06 as a float
        return r if ("." in r or "inf" in r or "nan" in r) else r + ".0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    raise TypeError(f"no YAML form for {v!r}")


def robot_yaml(robot: str) -> str:
    """The per-robot parameter file (gato_bringup/config/<robot>.yaml): every parameter of the
    nodes with its default for ``robot``, one comment line each (description, unit,
    range / choices, read-only)."""
    lines = [_HEADER, f"# Parameters of the gato nodes for {robot}.\n"]
    for node, schema in SCHEMAS.items():
        lines.append(f"{node}:\n  ros__parameters:\n")
        for p in schema:
            notes = [p.unit] if p.unit else []
            if p.range is not None:
                notes.append(f"range [{_fmt(p.range[0])}, {_fmt(p.range[1])}]")
            if p.choices is not None:
                notes.append("one of " + "|".join(p.choices))
            notes.append("read-only" if p.read_only else "tunable")
            lines.append(f"    # {p.description} ({'; '.join(notes)})\n")
            lines.append(f"    {p.name}: {_yaml_value(p.default_for(robot))}\n")
    return "".join(lines)


def controllers_yaml(robot: str, controller_name: str = "effort_controller", update_rate: int = 1000,
                     state_rate: int = 100) -> str:
    """ros2_control controller-manager configuration (gato_bringup/config/<robot>_controllers.yaml):
    joint_state_broadcaster (publishing at ``state_rate`` Hz, the gato controller's rate: it
    solves on every joint state) plus an effort_controllers/JointGroupEffortController over
    the robot's joints, which the gato controller node commands on /<controller_name>/commands,
    and the gato ros2_control plugin (``PLUGIN_NAME``, the alternative to that forward
    controller: both claim the effort interfaces, so one of them is active) with its
    parameters for ``robot`` (the PLUGIN schema), in follow mode and, as
    ``<PLUGIN_NAME>_embedded``, in embedded mode."""
    joints = _yaml_value(_joint_names(robot))
    plugin = "".join(f"    # {p.description}{f' [{p.unit}]' if p.unit else ''}\n"
                     f"    {p.name}: {_yaml_value(p.default_for(robot))}\n" for p in PLUGIN)
    return (f"{_HEADER}# ros2_control controllers for {robot}: the gato controller node publishes joint torques to\n"
            f"# /{controller_name}/commands (Float64MultiArray, joints in the order below) and reads\n"
            "# /joint_states from the broadcaster. Or: the gato plugin executes the node's plans inside\n"
            f"# the control loop ({PLUGIN_NAME}; hardware.launch.xml controller:=plugin).\n"
            "controller_manager:\n  ros__parameters:\n"
            f"    update_rate: {update_rate}  # Hz\n"
            "    joint_state_broadcaster:\n      type: joint_state_broadcaster/JointStateBroadcaster\n"
            f"    {controller_name}:\n      type: effort_controllers/JointGroupEffortController\n"
            f"    {PLUGIN_NAME}:\n      type: {PLUGIN_TYPE}\n"
            f"    {PLUGIN_NAME}_embedded:\n      type: {PLUGIN_TYPE}\n"
            "joint_state_broadcaster:\n  ros__parameters:\n"
            f"    update_rate: {state_rate}  # Hz: every /joint_states message starts a gato MPC tick\n"
            f"{controller_name}:\n  ros__parameters:\n    joints: {joints}\n"
            f"{PLUGIN_NAME}:\n  ros__parameters:\n{plugin}"
            f"# The same plugin in embedded mode (hardware.launch.xml controller:=plugin mode:=embedded).\n"
            f"{PLUGIN_NAME}_embedded:\n  ros__parameters:\n"
            + plugin.replace('    mode: "follow"\n', '    mode: "embedded"\n'))


def ros2_control_xacro(robot: str) -> str:
    """The robot description for ros2_control (gato_bringup/urdf/<robot>.urdf.xacro): the robot's
    URDF from gato_description plus a ``<ros2_control>`` system block with an effort command
    interface (bounded by the URDF effort limit) and position / velocity / effort state
    interfaces per joint. The hardware plugin is a xacro argument (default: ros2_control's
    mock_components/GenericSystem, which starts at gato.tasks.Q_READY); a non-empty
    ``mujoco_model`` argument (an MJCF path, gato_ros.mjcf) adds the ``mujoco_model``,
    ``headless`` and ``initial_keyframe`` parameters of mujoco_ros2_control/MujocoSystemInterface."""
    import pinocchio as pin

    info = _registry(robot)
    model = pin.buildModelFromUrdf(info["urdf"])
    names = list(model.names)[1:]
    q0 = _q_ready(robot)
    rel = Path(info["urdf"]).resolve().relative_to(Path(info["urdf"]).resolve().parents[1])
    out = ['<?xml version="1.0"?>\n',
           # No colon-space or space-hash in comments: xacro keeps them, and launch_ros reads
           # the expanded description through YAML (hardware.launch.xml).
           "<!-- GENERATED from src/gato_ros/gato_ros/params.py (python -m gato_ros.params, write option),\n"
           "     do not edit (test/test_ros_params.py checks this file). -->\n",
           f"<!-- {robot} for ros2_control, the gato_description URDF plus an effort-controlled system.\n"
           f"     xacro {robot}.urdf.xacro hardware_plugin:=(your driver plugin)\n"
           f"     MuJoCo, xacro {robot}.urdf.xacro hardware_plugin:=mujoco_ros2_control/MujocoSystemInterface\n"
           "       mujoco_model:=(MJCF path, python3 -m gato_ros.mjcf) [headless:=true initial_keyframe:=home] -->\n",
           f'<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="{model.name}">\n',
           '  <xacro:arg name="hardware_plugin" default="mock_components/GenericSystem"/>\n',
           # mujoco_ros2_control/MujocoSystemInterface reads these from the hardware block
           # (hardware.launch.xml mujoco true sets them; empty mujoco_model = no MuJoCo params).
           '  <xacro:arg name="mujoco_model" default=""/>\n',
           '  <xacro:arg name="headless" default="true"/>\n',
           '  <xacro:arg name="initial_keyframe" default="home"/>\n',
           f'  <xacro:include filename="$(find gato_description)/robots/{rel.as_posix()}"/>\n',
           f'  <ros2_control name="gato_{robot}" type="system">\n',
           "    <hardware>\n      <plugin>$(arg hardware_plugin)</plugin>\n",
           "      <xacro:if value=\"${'$(arg mujoco_model)' != ''}\">\n"
           '        <param name="mujoco_model">$(arg mujoco_model)</param>\n'
           '        <param name="headless">$(arg headless)</param>\n'
           '        <param name="initial_keyframe">$(arg initial_keyframe)</param>\n'
           "      </xacro:if>\n",
           "    </hardware>\n"]
    for i, n in enumerate(names):
        lim = float(model.effortLimit[model.joints[model.getJointId(n)].idx_v])
        out.append(f'    <joint name="{n}">\n'
                   f'      <command_interface name="effort">\n'
                   f'        <param name="min">{-lim!r}</param>\n        <param name="max">{lim!r}</param>\n'
                   f"      </command_interface>\n"
                   f'      <state_interface name="position">\n'
                   f'        <param name="initial_value">{q0[i]!r}</param>\n      </state_interface>\n'
                   f'      <state_interface name="velocity"/>\n      <state_interface name="effort"/>\n'
                   "    </joint>\n")
    out.append("  </ros2_control>\n</robot>\n")
    return "".join(out)


def plugin_parameter_yaml() -> str:
    """The generate_parameter_library definition of the plugin's parameters
    (src/gato_ros/src/gato_controller_parameters.yaml): robot-independent defaults (empty
    strings and arrays; the per-robot values are in the controllers files), ranges as
    ``bounds<>``, choices as ``one_of<>``, read-only flags; array gains must be empty
    (= 0) or have one value per joint (checked by the plugin at configure)."""
    lines = [_HEADER, f"{PLUGIN_NAME}:\n"]
    for p in PLUGIN:
        dflt = p.default
        if callable(dflt):
            dflt = [] if p.type.endswith("_array") else ""
        desc = p.description + (f" [{p.unit}]" if p.unit else "")
        lines.append(f"  {p.name}:\n    type: {_GPL_TYPES[p.type]}\n    default_value: {_yaml_value(dflt)}\n"
                     f"    description: {_yaml_value(desc)}\n    read_only: {_yaml_value(p.read_only)}\n")
        checks = []
        if p.range is not None:
            checks.append(f"      bounds<>: [{_yaml_value(p.range[0])}, {_yaml_value(p.range[1])}]\n")
        if p.choices is not None:
            checks.append(f"      one_of<>: [{_yaml_value(list(p.choices))}]\n")
        if p.type == "double_array":
            checks.append("      lower_element_bounds<>: [0.0]\n")
        if checks:
            lines.append("    validation:\n" + "".join(checks))
    return "".join(lines)


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def markdown() -> str:
    """docs/parameters.md: one table per node (defaults shown for iiwa14 where robot-specific)."""
    out = ["<!-- GENERATED by `python -m gato_ros.params --write` from src/gato_ros/gato_ros/params.py; "
           "do not edit (test/test_ros_params.py checks it). -->\n",
           "# Parameters of the gato nodes\n\n",
           "One schema (`gato_ros/params.py`) declares every parameter once; the nodes' rclpy descriptors "
           "(ranges and descriptions shown by rqt_reconfigure and `ros2 param describe`), the per-robot files "
           "`gato_bringup/config/<robot>.yaml` and this page are generated from it.\n\n",
           "*Read-only* parameters are structural: they are fixed when the node starts (a change is refused "
           "with a reason). *Tunable* ones can be changed at run time (rqt_reconfigure, `ros2 param set`, "
           "the `/set_parameters` service); the controller validates a change against the range or choices "
           "below and applies it between two ticks. Robot-specific defaults are shown for iiwa14.\n\n",
           "The limit mechanisms other than `off` need the solver's constraint row-group layer: on a "
           "solver without `enable_limit_<mechanism>` the change is refused with that reason. YAML reads an "
           "unquoted `off` as a boolean: in parameter files and launch arguments the nodes accept it for "
           "`limits` at start-up; at run time quote it (`ros2 param set /gato_controller limits \"'off'\"`).\n"]
    tables = dict(SCHEMAS)
    tables[f"{PLUGIN_NAME} ({PLUGIN_TYPE}, ros2_control plugin)"] = PLUGIN
    for node, schema in tables.items():
        out.append(f"\n## `{node}`\n\n| name | type | default | unit | range / choices | access | description |\n"
                   "|---|---|---|---|---|---|---|\n")
        for p in schema:
            dflt = p.default_for("iiwa14")
            if callable(p.default):
                dflt_s = f"{_yaml_value(dflt)} (per robot)"
            else:
                dflt_s = _yaml_value(dflt)
            rng = (f"[{_fmt(p.range[0])}, {_fmt(p.range[1])}]" if p.range is not None
                   else ", ".join(p.choices) if p.choices is not None else "")
            out.append(f"| `{p.name}` | {p.type} | `{_md_escape(dflt_s)}` | {_md_escape(p.unit)} | "
                       f"{_md_escape(rng)} | {'read-only' if p.read_only else 'tunable'} | "
                       f"{_md_escape(p.description)} |\n")
    return "".join(out)


def generated_files(root: Path) -> dict:
    """{path: text} of every file generated from the schema, paths under the workspace ``root``."""
    cfg = root / "src" / "gato_bringup" / "config"
    files = {root / "docs" / "parameters.md": markdown(),
             root / "src" / "gato_ros" / "src" / "gato_controller_parameters.yaml": plugin_parameter_yaml()}
    for r in ROBOTS:
        files[cfg / f"{r}.yaml"] = robot_yaml(r)
        files[cfg / f"{r}_controllers.yaml"] = controllers_yaml(r)
        files[root / "src" / "gato_bringup" / "urdf" / f"{r}.urdf.xacro"] = ros2_control_xacro(r)
    return files


def _workspace_root() -> Path:
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for d in (start, *start.parents):
            if (d / "src" / "gato_ros" / "gato_ros" / "params.py").is_file():
                return d
    raise FileNotFoundError("no gato workspace (src/gato_ros) above the current directory; pass --root")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gato_ros.params", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the generated files")
    ap.add_argument("--check", action="store_true", help="exit 1 if a committed file differs from the schema")
    ap.add_argument("--root", type=Path, default=None, help="workspace root (default: found from the cwd)")
    a = ap.parse_args(argv)
    root = a.root or _workspace_root()
    stale = []
    for path, text in generated_files(root).items():
        current = path.read_text() if path.is_file() else None
        if current != text:
            stale.append(path)
            if a.write:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    for path in stale:
        print(("wrote " if a.write else "differs: ") + str(path.relative_to(root)))
    if a.check and stale and not a.write:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
