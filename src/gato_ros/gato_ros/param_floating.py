"""The floating-base nodes' parameters (go2, issue 34): ``gato_floating_controller``
(:mod:`gato_ros.floating_controller_node`) and ``gato_floating_sim``
(:mod:`gato_ros.floating_sim_node`), groups of the one schema (:mod:`gato_ros.params`).

They are not in the arms' per-robot YAML files (gato_bringup/config/<arm>.yaml): the floating
bringup passes its own (gato_bringup/launch/go2_sim.launch.yaml); docs/parameters.md lists them.
The defaults are :data:`gato_ros.floating_controller_logic.DEFAULTS` (the logic's, which it also
validates) and the world node's.
"""
from __future__ import annotations

from .param_spec import Param

#: ``gato_floating_controller``: FloatingMPC's standing task from joint states + odometry.
FLOATING_CONTROLLER = (
    Param("robot", "string", "go2", "registered floating-base robot (gato.robot_info: floating_base true)",
          read_only=True, group="structure"),
    Param("horizon", "integer", 20, "knots of FloatingMPC's horizon", "knots", range=(2, 512), read_only=True,
          group="structure"),
    Param("knot_dt", "double", 0.02, "knot spacing of the horizon", "s", range=(0.001, 1.0), read_only=True,
          group="structure"),
    Param("max_iters", "integer", 3, "SQP iterations of each replan (warm-started)", "iterations",
          range=(1, 100), read_only=True, group="solver"),
    Param("first_iters", "integer", 30, "SQP iterations of the first (cold) solve and of the solve after a hold",
          "iterations", range=(1, 1000), read_only=True, group="solver"),
    Param("replan_s", "double", 0.02, "replanning period (stamp time); between replans each joint state gets "
          "the plan's torques plus its Riccati gains on the state error", "s", range=(0.001, 1.0),
          read_only=True, group="solver"),
    Param("odom_timeout_s", "double", 0.05, "odometry stamped more than this before the joint state is stale: "
          "refused (counted as stale) and the answer is the damped joint hold", "s", range=(1e-4, 10.0),
          read_only=True, group="safety"),
    Param("odom_wait_s", "double", 2.0, "wall-clock wait for the odometry of a joint state's stamp before the "
          "hold answers it (longer than the world's 0.5 s re-send)", "s", range=(1e-3, 60.0), read_only=True,
          group="safety"),
    Param("hold_kp", "double", 60.0, "fallback joint hold: stiffness", "N*m/rad", range=(0.0, 1e4),
          read_only=True, group="safety"),
    Param("hold_kd", "double", 2.0, "fallback joint hold: damping", "N*m*s/rad", range=(0.0, 1e3),
          read_only=True, group="safety"),
    Param("base_height", "double", 0.0, "base height reference (0: the registry's stand pose height); "
          "~/base_reference (geometry_msgs/PoseStamped) replaces the whole pose", "m", range=(0.0, 2.0),
          read_only=True, group="reference"),
    Param("base_rpy", "double_array", [0.0, 0.0, 0.0], "base roll, pitch, yaw reference (world frame)", "rad",
          read_only=True, group="reference",
          check=lambda v: None if len(v) == 3 else f"expected 3 values (roll, pitch, yaw), got {len(v)}"),
    Param("yaw_from_odometry", "bool", True, "take the yaw reference from the first odometry instead of base_rpy",
          read_only=True, group="reference"),
    Param("odom_frame", "string", "odom", "the odometry's header.frame_id (the world); others are refused",
          read_only=True, group="topics"),
    Param("base_frame", "string", "base", "the odometry's child_frame_id (the twist's frame); others are refused",
          read_only=True, group="topics"),
    Param("odom_topic", "string", "/odom", "nav_msgs/Odometry input", read_only=True, group="topics"),
    Param("status_every", "integer", 100, "publish ~/status (JSON) every this many ticks (and at exit)", "ticks",
          range=(1, 100000), read_only=True, group="output"),
    Param("summary_file", "string", "", "at exit, write the last status as JSON here (empty = none)",
          read_only=True, group="output"),
)

#: ``gato_floating_sim``: go2 in MuJoCo, lockstep.
FLOATING_SIM = (
    Param("robot", "string", "go2", "registered floating-base robot", read_only=True),
    Param("duration_s", "double", 10.0, "simulated time, then the summary and exit 0", "s", range=(0.0, 1e6),
          read_only=True),
    Param("period_s", "double", 0.001, "physics step = control tick (lockstep)", "s", range=(1e-4, 0.1),
          read_only=True),
    Param("seed", "integer", -1, "seeded perturbation of the crouched start (-1: none)", range=(-1, 2**31 - 1),
          read_only=True),
    Param("settle_s", "double", 0.3, "joint PD landing the crouch before t = 0", "s", range=(0.0, 10.0),
          read_only=True),
    Param("command_topic", "string", "/gato_floating_controller/command",
          "gato_msgs/EffortCommand input; the world advances when the command stamped with its tick arrives",
          read_only=True),
    Param("odom_topic", "string", "/odom", "nav_msgs/Odometry output", read_only=True),
    Param("odom_frame", "string", "odom", "the odometry's header.frame_id (the world)", read_only=True),
    Param("base_frame", "string", "base", "the odometry's child_frame_id", read_only=True),
    Param("start_subscribers", "integer", 1, "the first tick goes out once this many nodes subscribe to "
          "joint_states (and the odometry)", "subscribers", range=(0, 100), read_only=True),
    Param("lockstep_resend_s", "double", 0.5, "re-send the tick's odometry and joint state when no command "
          "came for this long (wall clock)", "s", range=(0.01, 60.0), read_only=True),
    Param("summary_file", "string", "", "write the run's summary (JSON) here at the end (empty = none)",
          read_only=True),
    Param("publish_odometry", "bool", True, "false: no odometry (tests the controller's fallback)",
          read_only=True),
)

#: Node name -> schema of the floating-base nodes (docs/parameters.md; not in the arms' YAML files).
FLOATING_SCHEMAS = {"gato_floating_controller": FLOATING_CONTROLLER, "gato_floating_sim": FLOATING_SIM}
