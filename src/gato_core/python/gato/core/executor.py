"""The real-time plan executor of the ros2_control plugin (C++ ``gato::PlanExecutor``,
include/gato/plan_executor.hpp), for tests and tools.

The plugin (gato_ros, C++) runs the same code inside the controller_manager's loop:
it samples the latest MPC plan at the control rate (zero-order-hold torque of the
current knot interval, plus joint feedback toward the planned state interpolated
per the plan's integrator) and applies the safety rules (hold on no / stale /
exhausted plan, NaN state or output; effort clamp; position-limit cut; drop
out-of-order plans and stale epochs). Joint order: the URDF's (``joint_names``).
"""
from __future__ import annotations

from .native import core as _core
from .bsqp import INTEGRATORS, robot_info, robot_urdf

__all__ = ["plan_executor", "INTEGRATORS"]


def plan_executor(robot: str = "iiwa14", *, max_knots: int = 128, plan_timeout: float = 0.1, kp=None, kd=None,
                  hold_damping=None, limit_margin: float = 0.05, use_plan_gains: bool = True,
                  hold_frequency_hz: float = 4.0, feedback: str = "riccati", feedback_limit=None):
    """A ``gato._core.PlanExecutor`` for a registered robot.

    Args:
        robot: registered robot name (``gato.robot_info``).
        max_knots: longest plan accepted [knots] (everything is allocated here).
        plan_timeout: a plan older than this (now - its stamp) is not executed [s].
        kp, kd: (nv) joint feedback gains toward the planned position [N*m/rad] and
            velocity [N*m*s/rad]; None = 0.
        hold_damping: (nv) extra joint damping in the hold torque [N*m*s/rad].
        hold_frequency_hz: the hold keeps the position where it began, critically damped
            through the mass matrix: tau = g(q) + M(q) (w^2 (q_hold - q) - 2 w v)
            - hold_damping * v, w = 2 pi hold_frequency_hz [Hz]; 0 = gravity + hold_damping only.
        limit_margin: distance inside a URDF position limit where the cut acts [rad].
        use_plan_gains: add the plan's local feedback gains K when it carries them (False: as
            ``feedback="pd"``).
        feedback: "pd" (u_k + kp / kd toward the planned state), "riccati" (u_k +
            sat(K_k (x_plan - x)) when the plan carries usable gains, else the PD) or "riccati+pd"
            (both summed). The executor's K is the NEGATED BSQP.feedback_gains() (it adds
            K (x_plan - x)). Non-finite gains drop the gains, not the plan (``dropped_gains``).
        feedback_limit: (nv) saturation of the gain term per joint [N*m]; None = 0.25 x the
            URDF effort limit.

    Raises ValueError for an unknown robot or invalid settings (the message names them).
    """
    info = robot_info(robot)
    if not info:
        raise ValueError(f"robot: unknown robot {robot!r}")
    return _core.PlanExecutor(str(robot_urdf(robot)), info["ee_frame"], max_knots=max_knots,
                              plan_timeout=plan_timeout, kp=kp, kd=kd, hold_damping=hold_damping,
                              limit_margin=limit_margin, use_plan_gains=use_plan_gains,
                              hold_frequency_hz=hold_frequency_hz, feedback=feedback,
                              feedback_limit=feedback_limit)
