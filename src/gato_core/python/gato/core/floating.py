"""The floating-base (free-flyer) plant of the C++ core: :class:`FloatingPlant` (issue 34).

The first building block of the floating-base solver: the go2-style plant with a
quaternion free-flyer root, its semi-implicit Euler step on the manifold and the step's
tangent-space Jacobians, in double precision. It is ``gato._core.FloatingPlant``
(src/gato_core/cpp/include/gato/floating.hpp; pinocchio's free-flyer model in this first
version), re-exported here with :func:`for_robot`, which takes the URDF and the contact
frames from the robot registry. The solver (``gato.build(..., floating_base=True)``) does
not use it yet.

Conventions (the consumer contract's schema 2 states; n actuated joints, nc contact frames):

* ``q`` (``nq = 7 + n``): base position in the world (m), base quaternion ``(x, y, z, w)``
  (unit norm, to 1e-6), joint angles (rad).
* ``v`` (``nv = 6 + n``): base linear (m/s) and angular (rad/s) velocity in the base frame,
  joint velocities (rad/s). ``x = (q, v)``; tangent vectors ``dx = (dq, dv)`` have ``2 nv``
  entries; ``x1 (-) x0 = (difference(q0, q1), v1 - v0)``, ``x (+) dx = (integrate(q, dq), v + dv)``.
* ``u`` (``n``): joint torques (N m); the generalized force is ``(0_6, u)``.
* ``f`` (``(nc, 6)``, ``(6 nc,)`` or None): per contact frame a world-aligned wrench at the
  frame origin, ``(force N, torque N m)``, entering as ``J_c(q)^T f_c`` (``J_c`` the
  LOCAL_WORLD_ALIGNED frame Jacobian).
* ``step``: ``v' = v + dt a``, ``q' = integrate(q, dt v')``; ``linearize`` returns
  ``(x', A, B_u, B_f)`` with ``A`` (2nv, 2nv), ``B_u`` (2nv, n), ``B_f`` (2nv, 6 nc) in the
  tangent space (input ``x (+) dx``, output ``x'_pert (-) x'``).

Bad input raises ValueError naming the field (shape, NaN / inf, non-unit quaternion,
``dt <= 0``, unknown contact frame). test/test_floating_core.py checks it against the
NumPy oracle test/reference/numpy_floating.py and against finite differences on the manifold.
"""
from __future__ import annotations

from ..robots.registry import robot_info, robot_urdf
from .native import core

__all__ = ["FloatingPlant", "for_robot"]

FloatingPlant = core.FloatingPlant


def for_robot(name: str, contact_frames=None) -> "FloatingPlant":
    """The registered floating-base robot ``name`` (e.g. ``"go2"``) as a :class:`FloatingPlant`.

    ``contact_frames``: None takes the registry's (go2: the four ``*_foot_joint`` frames);
    a list overrides it (``[]``: no contact wrenches). ValueError when the robot is not a
    floating-base one.
    """
    info = robot_info(name)
    if not info:
        raise ValueError(f"name: no robot {name!r} in the registry")
    if not info.get("floating_base", False):
        raise ValueError(f"name: robot {name!r} is not a floating-base robot in the registry")
    frames = info.get("contact_frames", []) if contact_frames is None else list(contact_frames)
    return FloatingPlant(str(robot_urdf(name)), list(frames))
