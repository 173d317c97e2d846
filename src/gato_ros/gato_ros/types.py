"""ROS-free value types of the gato ROS layer: what the nodes' logic classes consume
and produce, and what :mod:`gato_ros.conversions` turns into messages.

Times are integer nanoseconds (``stamp_ns``) on whatever clock the producer used
(simulation time in the simulation bringup, the robot's clock on hardware).
Positions in metres (world frame), joint positions in rad, velocities in rad/s,
torques in N*m.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# The reference window, the plan and the ns clock helpers live in the ROS-free core (gato replay and
# the planners use them too): one Plan type in the project (gato.planner.Plan, gato_msgs/Plan's fields).
from gato.core.references import NS_PER_S, ReferenceWindow, ns_to_sec, sec_to_ns  # noqa: F401
from gato.planners.planner import Plan

__all__ = ["JointStateSample", "ReferenceWindow", "Plan", "SolveInput", "sec_to_ns", "ns_to_sec"]


@dataclass
class JointStateSample:
    """One joint-state reading as it arrived (sensor_msgs/JointState without the ROS types).

    ``names`` (n,) in the sender's order; ``position`` / ``velocity`` / ``effort`` (n,) or
    empty (a JointState may leave any of them empty). No validation here: the controller
    logic decides what is acceptable.
    """

    stamp_ns: int
    names: list
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass
class SolveInput:
    """What one MPC tick solved from (gato_msgs/SolveInput): enough, with ``config_json``,
    to re-run the tick offline.

    ``x_measured`` (nx,) [q; qd] in ``joint_names`` (solver) order; ``reference`` (6N,) [m];
    ``xu_warm`` (rows, S) the warm start the step started from (rows 1 when all batch
    entries share it, else B); ``dt_elapsed`` / ``budget_s`` [s], 0 = None; ``reset``: the
    controller was reset and warmed up at ``x_measured`` before the step. ``solver_state``
    (B, K) the solver state the step started from (:meth:`gato.BSQP.get_solver_state`),
    or None when not carried; ``capped_out`` / ``force_reseed``: the controller's flags
    (:meth:`gato.MPCController.carried_state`). ``wrench_hypotheses`` (B, 6) the external
    wrenches the step solved under (world axes at the EE frame origin [N, N*m], one row per
    batch entry: ``hypotheses=estimator``), or None without wrench hypotheses.
    ``orientation_weight`` [1/rad^2]: the EE orientation weight the step solved with (rot_cost =
    N_rot_cost; slots [3:6] of ``reference`` the target rotation vectors), 0 = position only.
    ``posture_q`` / ``posture_weight`` (rows, nq) [rad, 1/rad^2]: the joint posture targets and
    weights the step solved with (rows N, one per knot, or 1; a joint trajectory or joint hold,
    issue 31), both None when the posture term was off.
    """

    stamp_ns: int
    tick: int
    joint_names: list
    x_measured: np.ndarray
    reference: np.ndarray
    xu_warm: np.ndarray
    dt_elapsed: float = 0.0
    budget_s: float = 0.0
    reset: bool = False
    config_json: str = ""
    solver_state: np.ndarray | None = None
    capped_out: bool = False
    force_reseed: bool = False
    wrench_hypotheses: np.ndarray | None = None
    orientation_weight: float = 0.0
    posture_q: np.ndarray | None = None
    posture_weight: np.ndarray | None = None

    def __post_init__(self):
        self.x_measured = np.asarray(self.x_measured, dtype=np.float64).reshape(-1)
        self.reference = np.asarray(self.reference, dtype=np.float64).reshape(-1)
        w = np.asarray(self.xu_warm, dtype=np.float64)
        self.xu_warm = w.reshape(1, -1) if w.ndim == 1 else w
        if self.solver_state is not None:
            st = np.asarray(self.solver_state, dtype=np.float64)
            self.solver_state = st.reshape(1, -1) if st.ndim == 1 else st
        if self.wrench_hypotheses is not None:
            self.wrench_hypotheses = np.asarray(self.wrench_hypotheses, dtype=np.float64).reshape(-1, 6)
        if (self.posture_q is None) != (self.posture_weight is None):
            raise ValueError("posture_q / posture_weight: give both (the posture term on) or neither")
        if self.posture_q is not None:   # one (rows, nq) shape for both: (nq,) / scalar spread over the rows
            try:
                q, w = np.broadcast_arrays(np.atleast_2d(np.asarray(self.posture_q, dtype=np.float64)),
                                           np.asarray(self.posture_weight, dtype=np.float64))
            except ValueError as e:
                raise ValueError(f"posture_weight: shape {np.shape(self.posture_weight)} does not fit posture_q's "
                                 f"{np.shape(self.posture_q)}") from e
            self.posture_q, self.posture_weight = np.array(q), np.array(w)
