"""The ros2_control plugin's parameters (``PLUGIN``: gato_ros/src/gato_controller.cpp, its
generate_parameter_library file and the controllers files are generated from it), a group of the
schema; in embedded mode it shares the controller node's solver tunables."""
from __future__ import annotations

import dataclasses

from .param_controller import CONTROLLER, SHIPPED_NOTE
from .param_defaults import (DEFAULT_LINSYS as _DEFAULT_LINSYS, SOLVER as _SOLVER, ee_frame as _ee_frame,
                             joint_names as _joint_names, registry_entry as _registry)
from .param_spec import Param


# ---------------------------------------------------------------- the ros2_control plugin
def _effort_scaled(factor: float):
    """Per-joint gains proportional to the URDF effort limits (a stiff default for a strong
    joint, a soft one for a wrist): ``factor * effort_limit`` per joint."""
    def default(robot: str) -> list:
        import pinocchio as pin

        model = pin.buildModelFromUrdf(_registry(robot)["urdf"])
        return [round(factor * float(v), 6) for v in model.effortLimit]
    return default


#: Embedded mode: the descriptions of the controller node's pose parameters as the plugin uses them.
_EMBEDDED_POSE = {
    "orientation_weight": "embedded mode: EE orientation weight (rot_cost = N_rot_cost, every knot) of the solves "
                          "toward an EE reference window that carries orientations (gato_msgs/EEReference."
                          "orientations, slerped onto the knots); position-only windows solve without the term "
                          "(default: gato.planners.shipped_weights.ORIENTATION_WEIGHTS)",
    "pose_ee_weight_scale": "embedded mode: factor on the EE position weights (q_cost, N_cost) of the solves toward "
                            "a window that carries orientations; position-only windows solve with q_cost / N_cost "
                            "as set (1 = off, the default: the plugin's weights are the struct's, not the shipped "
                            "ones the arms' factor was chosen with)",
}

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
    Param("use_plan_gains", "bool", True, "add the plan's local feedback gains when it carries them (false: "
          "as feedback pd)", group="feedback"),
    Param("feedback", "string", "riccati", "how a plan runs between two plans: pd (plan torque + kp / kd toward "
          "the planned state), riccati (plan torque + the plan's own gains sat(K_k (x - x_k)) when it carries "
          "them, else the PD: the controller node's plan_gains, or the embedded solver's), riccati+pd (both "
          "summed); plan gains that are not finite or of the wrong size are dropped (counted: gains_dropped on "
          "/diagnostics) and the plan runs with the PD", choices=("pd", "riccati", "riccati+pd"), group="feedback"),
    Param("embedded_gains", "bool", False, "embedded mode: the solver thread computes each plan's feedback gains "
          "(BSQP's Riccati gains of the solved plan: one KKT assembly and sweep per solve), which feedback riccati "
          "/ riccati+pd apply; false: embedded plans carry none (the PD)", group="feedback"),
    Param("feedback_limit", "double_array", _effort_scaled(0.25), "saturation of the plan-gain term "
          "|K_k (x - x_k)| per joint (default: 0.25 x the URDF effort limit)", "N*m", group="feedback"),
    Param("hold_frequency_hz", "double", 4.0, "a hold (no / stale plan, NaN) keeps the position where it began: "
          "tau = gravity(q) + M(q) (w^2 (q_hold - q) - 2 w v) - hold_damping * v, w = 2 pi hold_frequency_hz "
          "(critically damped through the mass matrix: every joint settles alike; 0 = gravity + hold_damping "
          "only, the arm coasts)", "Hz", range=(0.0, 50.0), group="safety"),
    Param("hold_damping", "double_array", lambda robot: [0.0] * len(_joint_names(robot)), "extra joint damping "
          "in the hold torque and toward a position limit, per joint (joint-local: keep it small against the "
          "wrist's inertia, a control lag makes a large one unstable)", "N*m*s/rad", group="safety"),
    Param("limit_margin", "double", 0.05, "within this distance of a URDF position limit, no torque beyond the "
          "gravity-holding one pushes the joint further", "rad", range=(0.0, 1.0), group="safety"),
    # embedded mode: the solver tunables, the controller node's parameters (same names and ranges),
    # applied between two solves; linsys without the node's "auto" policy. Defaults: the struct's
    # (the plugin's solver has no u_ref, so the arms' shipped weights, tuned with it, are not its own)
    *(dataclasses.replace(p, description="embedded mode: " + p.description.replace(SHIPPED_NOTE, ""),
                          default=getattr(_SOLVER, p.name)) for p in CONTROLLER
      if p.name in ("q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "mu", "rho", "max_sqp_iters",
                    "max_pcg_iters", "pcg_tol")),
    # issue 30: the EEReference windows' orientations (optional): the controller node's weight and its
    # default (ORIENTATION_WEIGHTS); the pose-window EE factor off by default (the plugin's weights are
    # the struct's, not the shipped ones it was chosen with)
    *(dataclasses.replace(p, description=_EMBEDDED_POSE[p.name], default=1.0 if p.name == "pose_ee_weight_scale"
                          else p.default) for p in CONTROLLER if p.name in _EMBEDDED_POSE),
    Param("linsys", "string", _DEFAULT_LINSYS, "embedded mode: Schur-system path: pcg | bdsv (exact "
          "block-tridiagonal) | "
          "bdsv_first", choices=("pcg", "bdsv", "bdsv_first"), group="solver"),
)
