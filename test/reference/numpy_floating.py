"""Pure NumPy/pinocchio reference of a floating-base plant (issue 34, groundwork).

The oracle the later C++ free-flyer dynamics will be checked against: written
for clarity, not speed; float64; one problem, no batching. It lives next to
``numpy_bsqp`` (the fixed-base reference) because it is a test oracle, not
shipped API: gato_core is installed non-editable, and nothing in the package
may depend on a reference.

Conventions (pinocchio's, and the consumer contract's schema 2 states):

* ``q`` (``nq = 7 + n``): base position in the world (m), base orientation as a
  unit quaternion ``(x, y, z, w)``, then the ``n`` joint angles (rad).
* ``v`` (``nv = 6 + n``): base linear velocity (m/s) and angular velocity
  (rad/s), both expressed in the *base* frame (pinocchio's free-flyer
  convention), then the joint velocities (rad/s).
* ``x = concat(q, v)``, length ``nq + nv``; tangent vectors ``dx = (dq, dv)``
  have length ``2 nv``, ``dq`` in the tangent space of ``q``.
* ``x1 (-) x0 = (difference(q0, q1), v1 - v0)`` and
  ``x (+) dx = (integrate(q, dq), v + dv)``.
* ``u`` (``n``): actuated joint torques (N m); the generalized force is
  ``tau = (0_6, u)`` (the base is unactuated).
* ``f`` (``n_c x 6``, or flat ``6 n_c``): one wrench per contact frame, world
  aligned and applied at the frame origin, ``(force N, torque N m)``; it adds
  ``J_c(q)^T f`` to ``tau`` with ``J_c`` the ``LOCAL_WORLD_ALIGNED`` frame
  Jacobian (6 x nv).
* Dynamics ``a = M(q)^-1 (tau + sum_c J_c^T f_c - h(q, v))`` (rad/s^2, m/s^2).
* Semi-implicit Euler on the manifold: ``v' = v + dt a``,
  ``q' = integrate(q, dt v')`` (``dt`` in s).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

#: Largest accepted ``| |quat| - 1 |`` of an input configuration.
QUAT_NORM_TOL = 1e-6


class FloatingPlant:
    """Free-flyer plant built from a URDF; ``contact_frames`` names the frames taking wrenches."""

    def __init__(self, urdf_path, contact_frames=()):
        self.model = pin.buildModelFromUrdf(str(urdf_path), pin.JointModelFreeFlyer())
        self.data = self.model.createData()
        self.nq, self.nv = self.model.nq, self.model.nv
        self.nu = self.nv - 6
        self.contact_frames = tuple(contact_frames)
        self.frame_ids = []
        for name in self.contact_frames:
            if not self.model.existFrame(name):
                raise ValueError(f"contact_frames: no frame named {name!r} in the model")
            self.frame_ids.append(self.model.getFrameId(name))
        self.nc = len(self.frame_ids)

    # ------------------------------------------------------------------ checks
    def _vec(self, name, arr, n):
        arr = np.asarray(arr, dtype=float)
        if arr.shape != (n,):
            raise ValueError(f"{name}: expected shape ({n},), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}: contains NaN or inf")
        return arr

    def _q(self, q, name="q"):
        q = self._vec(name, q, self.nq)
        norm = np.linalg.norm(q[3:7])
        if abs(norm - 1.0) > QUAT_NORM_TOL:
            raise ValueError(f"{name}: base quaternion q[3:7] has norm {norm:.9g}, expected 1")
        return q

    def _x(self, x, name="x"):
        x = self._vec(name, x, self.nq + self.nv)
        self._q(x[: self.nq], name=f"{name}[:nq] (q)")
        return x

    def _f(self, f):
        if f is None:
            return np.zeros((self.nc, 6))
        f = np.asarray(f, dtype=float)
        if f.shape not in ((self.nc, 6), (6 * self.nc,)):
            raise ValueError(f"f: expected shape ({self.nc}, 6) or ({6 * self.nc},), got {f.shape}")
        if not np.all(np.isfinite(f)):
            raise ValueError("f: contains NaN or inf")
        return f.reshape(self.nc, 6)

    @staticmethod
    def _dt(dt):
        if not (np.isscalar(dt) and np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt: expected a finite positive number of seconds, got {dt!r}")
        return float(dt)

    # ------------------------------------------------------------- manifold ops
    def difference(self, x0, x1):
        """``x1 (-) x0``, shape ``(2 nv,)``: ``(pin.difference(q0, q1), v1 - v0)``."""
        x0, x1 = self._x(x0, "x0"), self._x(x1, "x1")
        nq = self.nq
        return np.concatenate([pin.difference(self.model, x0[:nq], x1[:nq]), x1[nq:] - x0[nq:]])

    def integrate(self, x, dx):
        """``x (+) dx``, shape ``(nq + nv,)``: ``(pin.integrate(q, dq), v + dv)``."""
        x = self._x(x)
        dx = self._vec("dx", dx, 2 * self.nv)
        nq, nv = self.nq, self.nv
        return np.concatenate([pin.integrate(self.model, x[:nq], dx[:nv]), x[nq:] + dx[nv:]])

    # ----------------------------------------------------------------- dynamics
    def contact_jacobians(self, q):
        """``J_c`` per contact frame, shape ``(nc, 6, nv)``, LOCAL_WORLD_ALIGNED at the frame origin."""
        q = self._q(q)
        pin.computeJointJacobians(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        return np.array([pin.getFrameJacobian(self.model, self.data, fid, pin.LOCAL_WORLD_ALIGNED)
                         for fid in self.frame_ids]).reshape(self.nc, 6, self.nv)

    def generalized_force(self, q, u, f=None):
        """``tau = (0_6, u) + sum_c J_c(q)^T f_c``, shape ``(nv,)`` (N, N m)."""
        q = self._q(q)
        u = self._vec("u", u, self.nu)
        f = self._f(f)
        tau = np.concatenate([np.zeros(6), u])
        for Jc, fc in zip(self.contact_jacobians(q), f):
            tau += Jc.T @ fc
        return tau

    def aba(self, q, v, u, f=None):
        """Acceleration ``a = M^-1 (tau - h)``, shape ``(nv,)``, from crba and nonLinearEffects.

        Deliberately not pin.aba: the tests check this formula against it.
        """
        q = self._q(q)
        v = self._vec("v", v, self.nv)
        tau = self.generalized_force(q, u, f)
        M = pin.crba(self.model, self.data, q)
        M = np.triu(M) + np.triu(M, 1).T  # crba fills the upper triangle only
        h = pin.nonLinearEffects(self.model, self.data, q, v)
        return np.linalg.solve(M, tau - h)

    def step(self, x, u, f=None, dt=0.01):
        """Semi-implicit Euler on the manifold: ``x' = (integrate(q, dt v'), v')``, ``v' = v + dt a``."""
        x = self._x(x)
        dt = self._dt(dt)
        q, v = x[: self.nq], x[self.nq:]
        v1 = v + dt * self.aba(q, v, u, f)
        return np.concatenate([pin.integrate(self.model, q, dt * v1), v1])

    # -------------------------------------------------------------- derivatives
    def aba_derivatives(self, q, v, u, f=None):
        """``(da/ddq, da/dv, da/du, da/df)``: shapes ``(nv, nv)``, ``(nv, nv)``, ``(nv, n)``, ``(nv, 6 nc)``.

        ``ddq`` is the tangent perturbation ``q (+) ddq``. pin.computeABADerivatives
        gives the derivatives at fixed ``tau``; the contact term ``J_c(q)^T f``
        also moves with ``q``: its derivative along tangent direction ``e_k`` is
        ``dJ_c/dt^T f`` for the velocity ``e_k`` (the Jacobian time variation is
        linear in the velocity), one sweep per column.
        """
        q = self._q(q)
        v = self._vec("v", v, self.nv)
        u = self._vec("u", u, self.nu)
        f = self._f(f)
        tau = self.generalized_force(q, u, f)
        Jc = self.contact_jacobians(q)
        da_dq, da_dv, Minv = pin.computeABADerivatives(self.model, self.data, q, v, tau)
        da_dq, da_dv = np.array(da_dq), np.array(da_dv)
        Minv = np.triu(Minv) + np.triu(Minv, 1).T  # only the upper triangle is filled
        if self.nc:
            dtau_dq = np.zeros((self.nv, self.nv))
            for k in range(self.nv):
                ek = np.zeros(self.nv)
                ek[k] = 1.0
                pin.computeJointJacobiansTimeVariation(self.model, self.data, q, ek)
                pin.updateFramePlacements(self.model, self.data)
                for fid, fc in zip(self.frame_ids, f):
                    dJ = pin.getFrameJacobianTimeVariation(self.model, self.data, fid, pin.LOCAL_WORLD_ALIGNED)
                    dtau_dq[:, k] += dJ.T @ fc
            da_dq = da_dq + Minv @ dtau_dq
        da_du = Minv[:, 6:]
        da_df = Minv @ np.concatenate([J.T for J in Jc], axis=1) if self.nc else np.zeros((self.nv, 0))
        return da_dq, da_dv, da_du, da_df

    def step_jacobians(self, x, u, f=None, dt=0.01):
        """Tangent-space Jacobians of :meth:`step`: ``(A, B_u, B_f)``.

        ``A = d x' / d dx`` is ``(2 nv, 2 nv)``, ``B_u`` is ``(2 nv, n)``, ``B_f`` is
        ``(2 nv, 6 nc)``; input perturbation ``x (+) dx``, output ``x'_pert (-) x'``.
        With ``v' = v + dt a`` and ``q' = integrate(q, dt v')``:
        ``dq'/d* = dInt/dq [for dq] + dInt/dv * dt * dv'/d*`` (pin.dIntegrate, ARG0 / ARG1).
        """
        x = self._x(x)
        dt = self._dt(dt)
        nq, nv = self.nq, self.nv
        q, v = x[:nq], x[nq:]
        da_dq, da_dv, da_du, da_df = self.aba_derivatives(q, v, u, f)
        v1 = v + dt * self.aba(q, v, u, f)
        D0 = pin.dIntegrate(self.model, q, dt * v1, pin.ArgumentPosition.ARG0)
        D1 = pin.dIntegrate(self.model, q, dt * v1, pin.ArgumentPosition.ARG1)
        dv1 = np.hstack([dt * da_dq, np.eye(nv) + dt * da_dv])  # d v' / d (dq, dv)
        A = np.vstack([D1 @ (dt * dv1) + np.hstack([D0, np.zeros((nv, nv))]), dv1])
        B_u = np.vstack([D1 @ (dt * dt * da_du), dt * da_du])
        B_f = np.vstack([D1 @ (dt * dt * da_df), dt * da_df])
        return A, B_u, B_f


def random_state(plant, rng):
    """A seeded test state of ``plant`` (a FloatingPlant, this oracle's or the core's, with
    ``model`` a pinocchio Model or the sizes nq / nv / nu / nc): a random base pose, joints inside
    the URDF limits, random velocities, torques (N m) and foot wrenches (N, N m), about a quarter of
    go2's weight on each foot. Returns (q (nq,), v (nv,), u (nu,), f (nc, 6))."""
    m = plant.model
    q = np.zeros(plant.nq)
    q[:3] = rng.normal(size=3)
    quat = rng.normal(size=4)
    q[3:7] = quat / np.linalg.norm(quat)
    q[7:] = rng.uniform(m.lowerPositionLimit[7:], m.upperPositionLimit[7:])
    v = rng.normal(size=plant.nv)
    u = 5.0 * rng.normal(size=plant.nu)
    f = 10.0 * rng.normal(size=(plant.nc, 6))
    f[:, 2] += 37.0  # about a quarter of go2's weight on each foot
    return q, v, u, f


def manifold_fd(plant, x1, perturbed_step, n, eps):
    """Central differences on the manifold, (2 nv, n): column i is
    (x'(+eps e_i) (-) x1 - x'(-eps e_i) (-) x1) / (2 eps), ``perturbed_step(d)`` the step's result
    for the tangent / input perturbation d (n,), (-) ``plant.difference``."""
    J = np.zeros((2 * plant.nv, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps
        J[:, i] = (plant.difference(x1, perturbed_step(e)) - plant.difference(x1, perturbed_step(-e))) / (2 * eps)
    return J
