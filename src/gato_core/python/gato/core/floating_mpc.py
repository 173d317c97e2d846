"""The floating-base contact-force trajectory optimizer as an MPC solver (issue 34).

:class:`FloatingMPC` wraps ``gato._core.FloatingSQP`` (src/gato_core/cpp/include/gato/
floating_sqp.hpp): a Gauss-Newton SQP over N knots of the C++ :class:`~gato.core.floating.FloatingPlant`
(semi-implicit Euler on the manifold) with a Riccati backward pass and a rollout line search.
Controls per knot ``w = (u, fc)``: ``u`` the actuated joint torques (N m), ``fc`` the contact
wrenches in the consumer contract's layout, per contact frame a world-aligned 6-wide block
``[n (N m); f (N)]`` about the frame origin (:meth:`FloatingMPC.fc_slots`).

This is the class the ``gato.build(..., floating_base=True, contact_forces=True)`` / BSQP wiring
is to use; that wiring does not exist yet (``gato.build(..., floating_base=True)`` still raises).

What is a penalty and what is a constraint: the dynamics and the initial state are the only
constraints (single shooting); the contact-position term (feet kept at their targets), the
friction pyramid / unilateral term and every tracking term are quadratic penalties.
"""
from __future__ import annotations

import numpy as np

from ..robots.registry import robot_info, robot_urdf
from .native import core

__all__ = ["FloatingMPC", "FloatingSolveResult", "FloatingSQP"]

FloatingSQP = core.FloatingSQP
GRAVITY = 9.81


class FloatingSolveResult:
    """One solve: ``X`` (N, nx) states, ``W`` (N-1, nw) controls (u, fc), ``K`` (N-1, nw, ndx)
    feedback gains of the returned trajectory, ``cost``, ``iters``, ``converged``."""

    def __init__(self, d: dict, nu: int):
        self.X, self.W, self.K = d["X"], d["W"], d["K"]
        self.cost, self.cost0 = float(d["cost"]), float(d["cost0"])
        self.iters, self.converged = int(d["iters"]), bool(d["converged"])
        self.line_search_fails = int(d["line_search_fails"])
        self.cold = bool(d["cold"])
        self._nu = nu

    @property
    def xu(self) -> np.ndarray:
        """The reference's layout: [x_0, w_0, x_1, w_1, ..., x_{N-1}], length N (nx + nw) - nw."""
        parts = []
        for k in range(len(self.W)):
            parts += [self.X[k], self.W[k]]
        parts.append(self.X[-1])
        return np.concatenate(parts)

    def u0(self) -> np.ndarray:
        """The applied (actuated) control of knot 0, (nu,) N m."""
        return self.W[0, :self._nu].copy()

    def control_at(self, k: int) -> np.ndarray:
        return self.W[k, :self._nu].copy()

    def fc_at(self, k: int) -> np.ndarray:
        """The contact wrenches of knot k, (nf,) in [n; f] blocks per frame."""
        return self.W[k, self._nu:].copy()

    def fc_traj(self) -> np.ndarray:
        """All knots' contact wrenches, (N-1, nf)."""
        return self.W[:, self._nu:].copy()


class FloatingMPC:
    """A floating-base robot's contact-force MPC solver (``gato._core.FloatingSQP``).

    ``FloatingMPC("go2", N=20, dt=0.02)``: the registry's URDF and contact frames (go2: the four
    ``*_foot_joint`` frames). :meth:`set_standing` sets the standing task's costs; :meth:`solve`
    runs the SQP from a state; :meth:`step` is one MPC tick (warm-started from the previous
    tick's plan shifted by one knot). ``sqp`` is the C++ solver for the other cost setters.
    """

    def __init__(self, robot: str = "go2", N: int = 20, dt: float = 0.02, *, max_iters: int = 3,
                 tol: float = 1e-8):
        info = robot_info(robot)
        if not info or not info.get("floating_base", False):
            raise ValueError(f"robot: {robot!r} is not a floating-base robot of the registry")
        if isinstance(max_iters, bool) or not isinstance(max_iters, int) or max_iters < 1:
            raise ValueError(f"max_iters: expected an int >= 1, got {max_iters!r}")
        self.robot = robot
        self.frames = list(info.get("contact_frames", []))
        self.sqp = FloatingSQP(str(robot_urdf(robot)), self.frames, N, dt)
        self.plant = core.FloatingPlant(str(robot_urdf(robot)), self.frames)
        self.N, self.dt = self.sqp.N, self.sqp.dt
        self.nu, self.nf, self.nw = self.sqp.nu, self.sqp.nf, self.sqp.nw
        self.max_iters, self.tol = max_iters, tol
        self.info = info
        self.foot_weight = 0.0
        self._warm = None

    # ------------------------------------------------------------------ fc layout
    def fc_slots(self, frame, part=None) -> list:
        """Indices into the fc block of one contact frame (index or name): the 6-wide [n; f]
        block, or its ``"n"`` (moment) / ``"f"`` (force) half."""
        if isinstance(frame, str):
            if frame not in self.frames:
                raise ValueError(f"frame: {frame!r} is not a contact frame; frames: {self.frames}")
            c = self.frames.index(frame)
        elif isinstance(frame, (int, np.integer)) and not isinstance(frame, bool) and 0 <= frame < len(self.frames):
            c = int(frame)
        else:
            raise ValueError(f"frame: expected a contact frame name or index < {len(self.frames)}, got {frame!r}")
        lo = {None: 0, "n": 0, "f": 3}.get(part, -1)
        if lo < 0:
            raise ValueError(f"part: expected None, 'n' or 'f', got {part!r}")
        return list(range(6 * c + lo, 6 * c + lo + (6 if part is None else 3)))

    # --------------------------------------------------------------- the task
    def set_standing(self, x_ref, feet, *, w_base_pos=(1e3, 1e3, 3e3), w_base_rot=3e3, w_joint=10.0,
                     w_base_vel=30.0, w_base_angvel=30.0, w_joint_vel=0.1, terminal_scale=5.0,
                     u_cost=1e-3, fc_cost=1e-2, fc_moment_cost=1e4, foot_weight=1e5, mu=0.6, fz_min=5.0,
                     friction_weight=1e3) -> None:
        """The standing task: track ``x_ref`` (nx,) (base pose, joints at the nominal pose, zero
        twist) with the feet held at ``feet`` (nc, 3) m (penalty), fc regularized to an even
        share of m g on each frame's f_z (the contract's default fc weight 1e-2 on the forces; the
        moments of point feet priced out by fc_moment_cost), friction via a pyramid penalty. Weights in units of the tangent entries (m, rad, m/s, rad/s)."""
        nv = self.sqp.ndx // 2
        nj = nv - 6
        w = np.concatenate([np.broadcast_to(np.asarray(w_base_pos, float), 3),
                            np.broadcast_to(np.asarray(w_base_rot, float), 3),
                            np.broadcast_to(np.asarray(w_joint, float), nj),
                            np.broadcast_to(np.asarray(w_base_vel, float), 3),
                            np.broadcast_to(np.asarray(w_base_angvel, float), 3),
                            np.broadcast_to(np.asarray(w_joint_vel, float), nj)])
        self.sqp.set_state_weights(w, terminal_scale * w)
        self.sqp.set_x_ref(np.asarray(x_ref, float))
        self.sqp.set_u_cost(u_cost)
        nc = len(self.frames)
        fref = np.zeros((nc, 6))
        fref[:, 5] = self.plant.total_mass * GRAVITY / max(nc, 1)
        self.sqp.set_fc_ref(fref)
        wf = np.full((nc, 6), float(fc_cost))
        wf[:, :3] = fc_moment_cost      # point feet: the moment half [n] priced out (a penalty, not a pin)
        self.sqp.set_fc_cost(wf.ravel())
        self.foot_weight = float(foot_weight)
        self.sqp.set_contact_pos_cost(foot_weight, np.asarray(feet, float))
        self.sqp.set_friction(mu, fz_min, friction_weight)
        self._warm = None

    def set_feet(self, feet) -> None:
        """Retarget the contact-position penalty (feet (nc, 3), (3 nc,) or (N, 3 nc) m), e.g. to the
        measured feet each tick: the penalty then holds the feet where they are (no foot velocity)
        instead of pulling a slipped foot back."""
        self.sqp.set_contact_pos_cost(self.foot_weight, np.asarray(feet, float))

    def set_base_wrench(self, w=None, knots: int = -1) -> None:
        """Plan under a known external wrench on the base: ``w`` (6,) = world-aligned force (N) and
        torque (N m) at the base frame origin, in the dynamics of the first ``knots`` intervals
        (-1: the whole horizon). None or zeros: none (the plans are then bit for bit those of a
        solver that never had one). ValueError naming base_wrench / knots on bad input."""
        if isinstance(knots, bool) or not isinstance(knots, (int, np.integer)) or knots < -1:
            raise ValueError(f"knots: expected -1 (all) or an int >= 0, got {knots!r}")
        self.sqp.set_base_wrench(w, int(knots))

    def contact_positions(self, q) -> np.ndarray:
        return self.plant.contact_positions(q)

    # ------------------------------------------------------------------ solves
    def solve(self, x0, W=None, max_iters=None, X=None, K=None, try_cold=False) -> FloatingSolveResult:
        """The SQP from x0 (nx,); W (N-1, nw) warm controls (None: the cold start), with X (N, nx)
        and K (N-1, nw, ndx) rolled out as the policy W_k + K_k (x_k (-) X_k)."""
        d = self.sqp.solve(np.asarray(x0, float), W, self.max_iters if max_iters is None else max_iters, self.tol,
                           X, K, try_cold)
        return FloatingSolveResult(d, self.nu)

    def step(self, x, max_iters=None) -> FloatingSolveResult:
        """One MPC tick from the measured state x (nx,): warm-started from the previous plan
        shifted by one knot (its last knot repeated) rolled out with its gains as a policy, or the
        cold start where that costs less; the first tick cold-starts."""
        if self._warm is None:
            res = self.solve(x, None, max_iters)
        else:
            Xp, Wp, Kp = self._warm
            res = self.solve(x, np.vstack([Wp[1:], Wp[-1:]]), max_iters, np.vstack([Xp[1:], Xp[-1:]]),
                             np.concatenate([Kp[1:], Kp[-1:]]), try_cold=True)
        self._warm = (res.X, res.W, res.K)
        return res

    def reset(self) -> None:
        """Forget the warm start (the next :meth:`step` cold-starts)."""
        self._warm = None
