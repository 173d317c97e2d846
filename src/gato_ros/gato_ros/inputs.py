"""The message boundary of the gato ROS layer: :mod:`gato.core.messages` (the one validation of
every message the gato tools consume, shared with ``gato replay``) with the value types of
:mod:`gato_ros.types`: a JointState as a :class:`~gato_ros.types.JointStateSample`, a Plan as
a :class:`~gato_ros.types.Plan`. Every reader (the controller, estimator and reference nodes,
the bringup summary, :mod:`gato_ros.analysis`) turns each message into its value through the
functions here, once, and skips one it refuses (:class:`Rejected`), counted.
"""
from __future__ import annotations

import math

import numpy as np
from gato.core.messages import (FUTURE_TOLERANCE_S, MAX_KNOT_DT_S, MAX_KNOTS, MAX_POSITION_M,  # noqa: F401
                                MAX_WRENCH, MIN_KNOT_DT_S, NS_PER_S, POSITION_SLACK_RAD, VELOCITY_FACTOR,
                                Rejected, Skips, _array, _check_stamp, joint_state_arrays, joint_vector,
                                reference_window, stamp_ns, state_bounds, wrench)

from .types import JointStateSample, Plan

__all__ = ["Rejected", "Skips", "reference_window", "joint_state", "joint_vector", "plan", "plan_gains", "wrench",
           "stamp_ns", "state_bounds", "MAX_KNOTS", "MIN_KNOT_DT_S", "MAX_KNOT_DT_S", "MAX_POSITION_M",
           "FUTURE_TOLERANCE_S",
           "MAX_WRENCH", "INTEGRATORS", "POSITION_SLACK_RAD", "VELOCITY_FACTOR"]

INTEGRATORS = ("euler", "semi_implicit", "rk4")


def joint_state(m, now_ns: int | None = None) -> JointStateSample:
    """sensor_msgs/JointState -> JointStateSample, or :class:`Rejected`
    (:func:`gato.core.messages.joint_state_arrays`: distinct names, one position and velocity per
    name, effort empty or one per name, a stamp not before the epoch nor too far ahead of
    ``now_ns``). Values are the reader's to judge (:func:`joint_vector`)."""
    t, names, pos, vel, eff = joint_state_arrays(m, now_ns)
    return JointStateSample(stamp_ns=t, names=names, position=pos, velocity=vel, effort=eff)


def plan_gains(m, n_knots: int, nx: int, nu: int):
    """The gains of a gato_msgs/Plan as (n_knots - 1, nu, nx), or None: the field absent (a
    message from before it), empty, or not of that size (the caller decides whether that is
    an error; :func:`gato_ros.inputs.plan` drops them)."""
    g = getattr(m, "gains", None)
    if g is None or len(g) == 0:
        return None
    g = np.asarray(g, dtype=np.float64)
    if n_knots < 2 or g.size != (n_knots - 1) * nu * nx:
        return None
    return g.reshape(n_knots - 1, nu, nx)


def plan(m, now_ns: int | None = None) -> Plan:
    """gato_msgs/Plan -> Plan, or :class:`Rejected`: the ``xu`` layout, finite values,
    ``knot_dt`` finite > 0, a known integrator, a stamp not too far ahead of ``now_ns`` (the
    rules of the ros2_control plugin's plan intake and executor). Joint names are the reader's.
    ``gains`` (issue 33) of the wrong size or not finite are dropped (``K`` None), not the plan:
    the plugin runs such a plan with its PD."""
    integ = str(getattr(m, "integrator", "") or "euler")
    if integ not in INTEGRATORS:
        raise Rejected("type", f"Plan.integrator: {integ!r} is not one of {list(INTEGRATORS)}")
    dt = float(m.knot_dt)
    if not math.isfinite(dt) or dt <= 0:
        raise Rejected("range", f"Plan.knot_dt: expected a finite spacing > 0 s, got {dt}")
    xu = _array(m.xu, "Plan.xu")
    try:
        p = Plan(stamp_ns=stamp_ns(m.header), knot_dt=dt, nx=int(m.nx), nu=int(m.nu), n_knots=int(m.n_knots),
                 joint_names=list(m.joint_names), xu=xu, seq=int(getattr(m, "seq", 0)),
                 reset_epoch=int(getattr(m, "reset_epoch", 0)), integrator=integ)
    except ValueError as e:
        raise Rejected("shape", f"Plan.{e}") from None
    if not np.all(np.isfinite(p.xu)):
        raise Rejected("nonfinite", "Plan.xu: contains NaN or Inf")
    _check_stamp(p.stamp_ns, now_ns, "Plan")
    K = plan_gains(m, p.n_knots, p.nx, p.nu)
    p.K = K if K is not None and np.all(np.isfinite(K)) else None
    return p
