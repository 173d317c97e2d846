"""Pure-NumPy reference implementation of gato's BSQP method (one problem, no batching).

This module follows ``docs/solver_method.md`` literally; it is written for
clarity, not speed, and is the oracle the tests use to check the fast solver.
Everything is float64.

Conventions (see the spec for the full text):

* ``nq = nv``, ``nx = 2 nv``, ``nu = nv``; knots ``k = 0..N-1``, controls
  ``k = 0..N-2``.
* Flat layout ``xu = [x_0, u_0, x_1, u_1, ..., x_{N-1}]``, length
  ``N nx + (N-1) nu``.
* ``ref`` is ``6N`` numbers (or an ``(N, 6)`` array), ``[px, py, pz, 0, 0, 0]``
  per knot; only xyz is used.
* Defects ``c_0 = x_0 - x_s``, ``c_{k+1} = x_{k+1} - f(x_k, u_k)``.
* KKT system ``[[G, C^T], [C, 0]] [dz; lam] = [-g; c]`` with
  ``G = blkdiag(Q_k + rho*Ibar_k, R_k + Rbar_k)``, ``Ibar_k = diag(I_nv, 0)`` and
  ``Rbar_k = 0`` unless a velocity / control weight is zero (``_ibar``, ``_rbar``); row 0 of C is
  ``-I`` on ``x_0``, row ``k+1`` is ``[A_k, B_k, -I]`` on ``(x_k, u_k, x_{k+1})``.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pinocchio as pin

#: Margin by which every URDF box is shrunk on both sides (rad, m, rad/s, m/s, N*m).
LIMIT_MARGIN = 0.1
#: Switch point of the C^2 quadratic extension of the log barrier.
BARRIER_EPS = 1e-3
#: Line-search step sizes alpha = 2^-i, i = 0..7 (largest first).
ALPHAS = tuple(2.0 ** -i for i in range(8))
RHO_MIN = 1e-8
RHO_MAX = 10.0
RHO_RESET = 1e-3
#: Floor of a control weight in the step (float64; docs/solver_method.md, "Zero weights").
ZERO_CONTROL_PROX = 1e-8

IterRecord = namedtuple("IterRecord", ["alpha", "merit_before", "merit_after", "rho"])
IterRecord.__doc__ = """One SQP iteration: accepted alpha (or -1 on rejection), the merit
at the start of the iteration, the merit of the iterate after it (equal to
merit_before on rejection) and rho after the trust-region update."""


def line_search(merit, xu, dz):
    """Step 4 of docs/solver_method.md: ``merit(xu + alpha dz)`` for every alpha of ALPHAS;
    (alpha*, merit there) with alpha* the lowest, ties kept at the larger alpha."""
    best_alpha, best_phi = None, np.inf
    for alpha in ALPHAS:  # largest first: strict '<' keeps ties at the larger alpha
        phi = merit(xu + alpha * dz)
        if phi < best_phi:
            best_alpha, best_phi = alpha, phi
    return best_alpha, best_phi


def trust_region(rho, drho, f, accepted):
    """Step 5 of docs/solver_method.md (adapt_rho): the next (rho, drho) after a step that
    was ``accepted`` or rejected, with the factor f."""
    drho = min(drho / f, 1.0 / f) if accepted else max(drho * f, f)
    rho = min(max(rho * drho, RHO_MIN), RHO_MAX)
    if not accepted and rho >= RHO_MAX:
        rho = RHO_RESET
    return rho, drho


# --------------------------------------------------------------------------
# Barrier
# --------------------------------------------------------------------------

def barrier_b(d):
    """Scalar barrier b(d) (elementwise on an array d).

    b(d) = -log d                                  for d >= eps
    b(d) = -log eps - (d-eps)/eps + (d-eps)^2/(2 eps^2)  for d < eps
    """
    d = np.asarray(d, dtype=np.float64)
    eps = BARRIER_EPS
    out = np.empty_like(d)
    hi = d >= eps
    out[hi] = -np.log(d[hi])
    e = d[~hi] - eps
    out[~hi] = -np.log(eps) - e / eps + e * e / (2.0 * eps * eps)
    return out


def barrier_db(d):
    """b'(d): -1/d for d >= eps, -1/eps + (d-eps)/eps^2 below (elementwise)."""
    d = np.asarray(d, dtype=np.float64)
    eps = BARRIER_EPS
    return np.where(d >= eps, -1.0 / np.maximum(d, eps), -1.0 / eps + (d - eps) / (eps * eps))


def barrier_d2b(d):
    """b''(d): 1/d^2 for d >= eps, 1/eps^2 below (elementwise)."""
    d = np.asarray(d, dtype=np.float64)
    eps = BARRIER_EPS
    return np.where(d >= eps, 1.0 / np.maximum(d, eps) ** 2, 1.0 / (eps * eps))


def box_barrier(x, lo, hi):
    """Box barrier beta(x) = sum_j b(x_j - lo_j) + b(hi_j - x_j).

    x, lo, hi: (n,). Coordinates with a non-finite bound (continuous joints)
    contribute nothing on that side.
    Returns (value: float, gradient: (n,), Hessian diagonal: (n,)).
    """
    x = np.asarray(x, dtype=np.float64)
    val = 0.0
    grad = np.zeros_like(x)
    hess = np.zeros_like(x)
    mlo = np.isfinite(lo)
    mhi = np.isfinite(hi)
    d_lo = x[mlo] - lo[mlo]
    d_hi = hi[mhi] - x[mhi]
    val += barrier_b(d_lo).sum() + barrier_b(d_hi).sum()
    grad[mlo] += barrier_db(d_lo)
    grad[mhi] -= barrier_db(d_hi)
    hess[mlo] += barrier_d2b(d_lo)
    hess[mhi] += barrier_d2b(d_hi)
    return float(val), grad, hess


# --------------------------------------------------------------------------
# Problem
# --------------------------------------------------------------------------

class RefProblem:
    """One BSQP tracking problem for a fixed-base arm, in plain NumPy + pinocchio.

    Parameters
    ----------
    urdf_path, ee_frame : robot URDF and the name of the end-effector frame.
    N, dt : number of knots and knot spacing h.
    q_cost, N_cost : EE weight on running knots / on the last knot.
    qd_cost, u_cost : velocity weight, control weight (every joint).
    q_lim_cost, vel_lim_cost, ctrl_lim_cost : barrier weights (0 = term skipped).
    mu : L1 penalty weight of the defects in the merit.
    rho, adapt_rho, drho_factor : trust region (initial rho; persists across
        ``sqp`` calls in ``self.rho`` until ``reset_rho``).
    integrator : "euler" (constant acceleration), "semi_implicit" or "rk4".
    knot_weights : optional (N, 3) table, columns [ee, qd, u], overriding the
        scalars at every knot.
    u_cost_vec : optional (nu,) per-joint control weights, replacing the control
        weight at every knot (most specific).
    q_pos_cost : posture anchor weight, scalar or (nq,); q_nom : (nq,) anchor
        (default zeros).
    f_ext : None or (N-1, njoints-1, 6): per knot interval, per body (pinocchio
        joints 1..njoints-1), a spatial force in the joint-local frame, ordered
        [angular; linear].
    rot_cost, N_rot_cost : EE orientation weight on running knots / on the last knot
        (1/rad^2; 0 = no term); rot_axis : (3,) per-axis factors (tool frame);
        rot_knot_weights : optional (N,) per-knot orientation weights replacing both.
        The term is 1/2 w_k sum_a c_a e_a^2, e = log3(exp3(ref[3:6])' R_ee(q)), Gauss-Newton
        with J_e = Jlog3(E) R' J_w (pinocchio's log3 / Jlog3 / exp3).
    u_ref : "zero" (the control term is 1/2 s u^2) or "gravity" (1/2 s (u - g(q_k))^2,
        g the generalized gravity, no f_ext); with "gravity" the KKT blocks gain the
        cross blocks S (N-1, nu, nx) = d2l/du dx and the Gauss-Newton q-block G' diag(s) G.
    """

    def __init__(self, urdf_path, ee_frame, N, dt, *, q_cost=2.0, qd_cost=0.01,
                 u_cost=2e-6, N_cost=50.0, q_lim_cost=0.01, vel_lim_cost=0.0,
                 ctrl_lim_cost=0.0, mu=10.0, rho=0.01, adapt_rho=True,
                 drho_factor=1.2, integrator="euler", knot_weights=None,
                 u_cost_vec=None, q_pos_cost=0.0, q_nom=None, f_ext=None, u_ref="zero",
                 rot_cost=0.0, N_rot_cost=0.0, rot_axis=(1.0, 1.0, 1.0), rot_knot_weights=None):
        self.model = pin.buildModelFromUrdf(str(urdf_path))
        self.data = self.model.createData()
        if self.model.nq != self.model.nv:
            raise ValueError("only nq == nv (fixed base, revolute/prismatic) is supported")
        if not self.model.existFrame(ee_frame):
            raise ValueError(f"no frame named {ee_frame!r}")
        self.ee_frame = ee_frame
        self.ee_id = self.model.getFrameId(ee_frame)
        self.nq = self.model.nq
        self.nv = self.model.nv
        self.nx = 2 * self.nv
        self.nu = self.nv
        self.N = int(N)
        self.dt = float(dt)
        if integrator not in ("euler", "semi_implicit", "rk4"):
            raise ValueError(f"unknown integrator {integrator!r}")
        self.integrator = integrator
        if u_ref not in ("zero", "gravity"):
            raise ValueError(f"unknown u_ref {u_ref!r}")
        self.u_ref = u_ref
        self.w_rot = np.full(int(N), float(rot_cost))
        self.w_rot[int(N) - 1] = float(N_rot_cost)
        if rot_knot_weights is not None:
            self.w_rot = np.asarray(rot_knot_weights, dtype=np.float64).reshape(int(N)).copy()
        self.rot_axis = np.asarray(rot_axis, dtype=np.float64).reshape(3).copy()

        m = LIMIT_MARGIN
        self.q_lo = np.asarray(self.model.lowerPositionLimit, dtype=np.float64) + m
        self.q_hi = np.asarray(self.model.upperPositionLimit, dtype=np.float64) - m
        vel = np.asarray(self.model.velocityLimit, dtype=np.float64)
        eff = np.asarray(self.model.effortLimit, dtype=np.float64)
        self.v_lo, self.v_hi = -vel + m, vel - m
        self.u_lo, self.u_hi = -eff + m, eff - m

        N_ = self.N
        # Per-knot weights, precedence: scalars < knot_weights table < u_cost_vec.
        self.w_ee = np.full(N_, float(q_cost))
        self.w_ee[N_ - 1] = float(N_cost)
        self.w_qd = np.full(N_, float(qd_cost))
        self.s_u = np.full((N_, self.nu), float(u_cost))  # row N-1 unused
        if knot_weights is not None:
            T = np.asarray(knot_weights, dtype=np.float64).reshape(N_, 3)
            self.w_ee = T[:, 0].copy()
            self.w_qd = T[:, 1].copy()
            self.s_u = np.repeat(T[:, 2:3], self.nu, axis=1)
        if u_cost_vec is not None:
            self.s_u = np.tile(np.asarray(u_cost_vec, dtype=np.float64).reshape(1, self.nu), (N_, 1))
        self.a_pos = np.broadcast_to(np.asarray(q_pos_cost, dtype=np.float64), (self.nq,)).copy()
        self.q_nom = np.zeros(self.nq) if q_nom is None else np.asarray(q_nom, dtype=np.float64).reshape(self.nq).copy()

        self.q_lim_cost = float(q_lim_cost)
        self.vel_lim_cost = float(vel_lim_cost)
        self.ctrl_lim_cost = float(ctrl_lim_cost)
        self.mu = float(mu)
        self.rho0 = float(rho)
        self.rho = float(rho)
        self.adapt_rho = bool(adapt_rho)
        self.drho_factor = float(drho_factor)

        if f_ext is None:
            self.f_ext = None
        else:
            self.f_ext = np.asarray(f_ext, dtype=np.float64).reshape(N_ - 1, self.model.njoints - 1, 6).copy()

    # ---------------------------------------------------------------- layout
    @property
    def n_xu(self):
        """Length of the flat trajectory, N nx + (N-1) nu."""
        return self.N * self.nx + (self.N - 1) * self.nu

    def x_index(self, k):
        """Slice of x_k in the flat xu vector."""
        s = k * (self.nx + self.nu)
        return slice(s, s + self.nx)

    def u_index(self, k):
        """Slice of u_k (k <= N-2) in the flat xu vector."""
        s = k * (self.nx + self.nu) + self.nx
        return slice(s, s + self.nu)

    def split(self, xu):
        """Flat xu (N nx + (N-1) nu,) -> (xs (N, nx), us (N-1, nu)) copies."""
        xu = np.asarray(xu, dtype=np.float64)
        xs = np.array([xu[self.x_index(k)] for k in range(self.N)])
        us = np.array([xu[self.u_index(k)] for k in range(self.N - 1)]).reshape(self.N - 1, self.nu)
        return xs, us

    def join(self, xs, us):
        """(xs (N, nx), us (N-1, nu)) -> flat xu."""
        xu = np.zeros(self.n_xu)
        for k in range(self.N):
            xu[self.x_index(k)] = xs[k]
        for k in range(self.N - 1):
            xu[self.u_index(k)] = us[k]
        return xu

    def cold_start(self, x_s):
        """Every knot holds x_s, zero controls. Returns flat xu."""
        x_s = np.asarray(x_s, dtype=np.float64)
        return self.join(np.tile(x_s, (self.N, 1)), np.zeros((self.N - 1, self.nu)))

    def ref_point(self, ref, k):
        """EE reference position (3,) of knot k from ref (6N,) or (N, 6)."""
        return np.asarray(ref, dtype=np.float64).reshape(self.N, 6)[k, :3]

    def reset_rho(self):
        """Restore rho to the constructor value."""
        self.rho = self.rho0

    # ------------------------------------------------------------ kinematics
    def ee_pos(self, q):
        """EE frame origin in world coordinates, (3,)."""
        pin.forwardKinematics(self.model, self.data, np.asarray(q, dtype=np.float64))
        pin.updateFramePlacements(self.model, self.data)
        return self.data.oMf[self.ee_id].translation.copy()

    def ee_jac(self, q):
        """3 x nv position Jacobian of the EE point (LOCAL_WORLD_ALIGNED linear rows)."""
        q = np.asarray(q, dtype=np.float64)
        pin.forwardKinematics(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        J = pin.computeFrameJacobian(self.model, self.data, q, self.ee_id,
                                     pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        return np.array(J[:3, :])

    def ee_rot(self, q):
        """EE frame rotation (3, 3), world <- EE."""
        pin.forwardKinematics(self.model, self.data, np.asarray(q, dtype=np.float64))
        pin.updateFramePlacements(self.model, self.data)
        return self.data.oMf[self.ee_id].rotation.copy()

    def ee_jac_angular(self, q):
        """3 x nv world angular-velocity Jacobian of the EE frame (LOCAL_WORLD_ALIGNED angular rows)."""
        q = np.asarray(q, dtype=np.float64)
        pin.forwardKinematics(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        J = pin.computeFrameJacobian(self.model, self.data, q, self.ee_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        return np.array(J[3:, :])

    def rot_error(self, q, ref, k):
        """(e (3,), E (3, 3)): e = log3(R_ref' R(q)), R_ref = exp3(ref[k, 3:6])."""
        Rt = pin.exp3(np.asarray(ref, dtype=np.float64).reshape(self.N, 6)[k, 3:6].copy())
        E = Rt.T @ self.ee_rot(q)
        return np.array(pin.log3(E)), E

    def gravity(self, q):
        """(g (nv,), dg/dq (nv, nv)): generalized gravity at q and its Jacobian."""
        q = np.asarray(q, dtype=np.float64)
        g = np.array(pin.computeGeneralizedGravity(self.model, self.data, q))
        G = np.array(pin.computeGeneralizedGravityDerivatives(self.model, self.data, q))
        return g, G

    def control_ref(self, q):
        """The control reference at configuration q: zeros or g(q) (u_ref)."""
        if self.u_ref == "gravity":
            return self.gravity(q)[0]
        return np.zeros(self.nu)

    # -------------------------------------------------------------- dynamics
    def _fext(self, k):
        """pinocchio StdVec_Force for knot interval k (None when f_ext is None).

        Entry 0 (universe) is zero; entry j is Force(linear=f[j-1,3:], angular=f[j-1,:3]).
        """
        if self.f_ext is None:
            return None
        fk = self.f_ext[k]
        fv = pin.StdVec_Force()
        fv.append(pin.Force.Zero())
        for j in range(self.model.njoints - 1):
            fv.append(pin.Force(fk[j, 3:6].copy(), fk[j, 0:3].copy()))
        return fv

    def forward_dynamics(self, q, qd, u, k):
        """qdd = ABA(q, qd, u, f_ext[k]), (nv,)."""
        fe = self._fext(k)
        if fe is None:
            return np.array(pin.aba(self.model, self.data, q, qd, u))
        return np.array(pin.aba(self.model, self.data, q, qd, u, fe))

    def forward_dynamics_derivs(self, q, qd, u, k):
        """(qdd, Qq = dqdd/dq, Qv = dqdd/dqd, Minv = dqdd/du), each (nv,) / (nv, nv).

        Minv is symmetrized from its upper triangle.
        """
        qdd = self.forward_dynamics(q, qd, u, k)
        fe = self._fext(k)
        if fe is None:
            res = pin.computeABADerivatives(self.model, self.data, q, qd, u)
        else:
            res = pin.computeABADerivatives(self.model, self.data, q, qd, u, fe)
        Qq, Qv, Minv = (np.array(m) for m in res)
        Minv = np.triu(Minv) + np.triu(Minv, 1).T
        return qdd, Qq, Qv, Minv

    def _xdot(self, x, u, k):
        """Continuous dynamics xdot = [qd; qdd], (nx,)."""
        nv = self.nv
        return np.concatenate([x[nv:], self.forward_dynamics(x[:nv], x[nv:], u, k)])

    def _xdot_derivs(self, x, u, k):
        """(xdot (nx,), dxdot/dx (nx, nx), dxdot/du (nx, nu))."""
        nv = self.nv
        qdd, Qq, Qv, Minv = self.forward_dynamics_derivs(x[:nv], x[nv:], u, k)
        Fx = np.zeros((self.nx, self.nx))
        Fx[:nv, nv:] = np.eye(nv)
        Fx[nv:, :nv] = Qq
        Fx[nv:, nv:] = Qv
        Fu = np.zeros((self.nx, self.nu))
        Fu[nv:, :] = Minv
        return np.concatenate([x[nv:], qdd]), Fx, Fu

    def dynamics(self, x, u, k):
        """Discrete step f(x_k, u_k) over h = dt with f_ext[k]; returns x_next (nx,)."""
        x = np.asarray(x, dtype=np.float64)
        u = np.asarray(u, dtype=np.float64)
        h, nv = self.dt, self.nv
        q, qd = x[:nv], x[nv:]
        if self.integrator == "euler":
            qdd = self.forward_dynamics(q, qd, u, k)
            return np.concatenate([q + h * qd + 0.5 * h * h * qdd, qd + h * qdd])
        if self.integrator == "semi_implicit":
            qdd = self.forward_dynamics(q, qd, u, k)
            qd_n = qd + h * qdd
            return np.concatenate([q + h * qd_n, qd_n])
        # rk4
        k1 = self._xdot(x, u, k)
        k2 = self._xdot(x + 0.5 * h * k1, u, k)
        k3 = self._xdot(x + 0.5 * h * k2, u, k)
        k4 = self._xdot(x + h * k3, u, k)
        return x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

    def linearize(self, x, u, k):
        """(x_next (nx,), A = df/dx (nx, nx), B = df/du (nx, nu)) at knot interval k."""
        x = np.asarray(x, dtype=np.float64)
        u = np.asarray(u, dtype=np.float64)
        h, nv = self.dt, self.nv
        I = np.eye(nv)
        q, qd = x[:nv], x[nv:]
        if self.integrator in ("euler", "semi_implicit"):
            qdd, Qq, Qv, Minv = self.forward_dynamics_derivs(q, qd, u, k)
            c = 0.5 * h * h if self.integrator == "euler" else h * h
            qd_n = qd + h * qdd
            if self.integrator == "euler":
                q_n = q + h * qd + 0.5 * h * h * qdd
            else:
                q_n = q + h * qd_n
            A = np.block([[I + c * Qq, h * I + c * Qv], [h * Qq, I + h * Qv]])
            B = np.vstack([c * Minv, h * Minv])
            return np.concatenate([q_n, qd_n]), A, B
        # rk4: chain rule through the stages; dk_i/dx and dk_i/du.
        Ix = np.eye(self.nx)
        k1, F1x, F1u = self._xdot_derivs(x, u, k)
        K1x, K1u = F1x, F1u
        k2, F2x, F2u = self._xdot_derivs(x + 0.5 * h * k1, u, k)
        K2x = F2x @ (Ix + 0.5 * h * K1x)
        K2u = F2x @ (0.5 * h * K1u) + F2u
        k3, F3x, F3u = self._xdot_derivs(x + 0.5 * h * k2, u, k)
        K3x = F3x @ (Ix + 0.5 * h * K2x)
        K3u = F3x @ (0.5 * h * K2u) + F3u
        k4, F4x, F4u = self._xdot_derivs(x + h * k3, u, k)
        K4x = F4x @ (Ix + h * K3x)
        K4u = F4x @ (h * K3u) + F4u
        x_next = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        A = Ix + (h / 6.0) * (K1x + 2.0 * K2x + 2.0 * K3x + K4x)
        B = (h / 6.0) * (K1u + 2.0 * K2u + 2.0 * K3u + K4u)
        return x_next, A, B

    def rollout(self, x0, us):
        """Simulate from x0 (nx,) with controls us (M, nu), M <= N-1; returns xs (M+1, nx)."""
        us = np.asarray(us, dtype=np.float64).reshape(-1, self.nu)
        xs = [np.asarray(x0, dtype=np.float64).copy()]
        for k in range(us.shape[0]):
            xs.append(self.dynamics(xs[-1], us[k], k))
        return np.array(xs)

    # ------------------------------------------------------------------ cost
    def stage_cost(self, x, u, k, ref):
        """l_k(x, u) (float). u is None at the last knot (no control terms)."""
        x = np.asarray(x, dtype=np.float64)
        nv = self.nv
        q, qd = x[:nv], x[nv:]
        e = self.ee_pos(q) - self.ref_point(ref, k)
        l = 0.5 * self.w_ee[k] * e @ e
        if self.w_rot[k] > 0:
            er, _ = self.rot_error(q, ref, k)
            l += 0.5 * self.w_rot[k] * np.sum(self.rot_axis * er * er)
        l += 0.5 * np.sum(self.a_pos * (q - self.q_nom) ** 2)
        l += 0.5 * self.w_qd[k] * qd @ qd
        if self.q_lim_cost != 0.0:
            l += self.q_lim_cost * box_barrier(q, self.q_lo, self.q_hi)[0]
        if self.vel_lim_cost != 0.0:
            l += self.vel_lim_cost * box_barrier(qd, self.v_lo, self.v_hi)[0]
        if u is not None and k < self.N - 1:
            u = np.asarray(u, dtype=np.float64)
            du = u - self.control_ref(q)
            l += 0.5 * np.sum(self.s_u[k] * du * du)
            if self.ctrl_lim_cost != 0.0:
                l += self.ctrl_lim_cost * box_barrier(u, self.u_lo, self.u_hi)[0]
        return float(l)

    def cost_derivatives(self, x, u, k, ref):
        """Gauss-Newton cost derivatives at knot k.

        Returns (Q (nx, nx), q (nx,), R (nu, nu) or None, r (nu,) or None);
        R, r are None when u is None (last knot).
        """
        x = np.asarray(x, dtype=np.float64)
        nv, nx = self.nv, self.nx
        qpos, qd = x[:nv], x[nv:]
        J = self.ee_jac(qpos)
        e = self.ee_pos(qpos) - self.ref_point(ref, k)
        Q = np.zeros((nx, nx))
        g = np.zeros(nx)
        Q[:nv, :nv] = self.w_ee[k] * J.T @ J + np.diag(self.a_pos)
        g[:nv] = self.w_ee[k] * J.T @ e + self.a_pos * (qpos - self.q_nom)
        if self.w_rot[k] > 0:
            er, E = self.rot_error(qpos, ref, k)
            Je = np.array(pin.Jlog3(E)) @ self.ee_rot(qpos).T @ self.ee_jac_angular(qpos)
            W = self.w_rot[k] * self.rot_axis
            Q[:nv, :nv] += Je.T @ (W[:, None] * Je)
            g[:nv] += Je.T @ (W * er)
        if self.q_lim_cost != 0.0:
            _, bg, bh = box_barrier(qpos, self.q_lo, self.q_hi)
            Q[:nv, :nv] += self.q_lim_cost * np.diag(bh)
            g[:nv] += self.q_lim_cost * bg
        Q[nv:, nv:] = self.w_qd[k] * np.eye(nv)
        g[nv:] = self.w_qd[k] * qd
        if self.vel_lim_cost != 0.0:
            _, bg, bh = box_barrier(qd, self.v_lo, self.v_hi)
            Q[nv:, nv:] += self.vel_lim_cost * np.diag(bh)
            g[nv:] += self.vel_lim_cost * bg
        if u is None or k >= self.N - 1:
            return Q, g, None, None
        u = np.asarray(u, dtype=np.float64)
        R = np.diag(self.s_u[k].copy())
        if self.u_ref == "gravity":
            # 1/2 s (u - g(q))^2: e = s (u - g); q-gradient -G' e, GN q-block G' diag(s) G
            # (the cross block: cost_cross).
            gq, G = self.gravity(qpos)
            e = self.s_u[k] * (u - gq)
            r = e.copy()
            g[:nv] -= G.T @ e
            Q[:nv, :nv] += G.T @ (self.s_u[k][:, None] * G)
        else:
            r = self.s_u[k] * u
        if self.ctrl_lim_cost != 0.0:
            _, bg, bh = box_barrier(u, self.u_lo, self.u_hi)
            R += self.ctrl_lim_cost * np.diag(bh)
            r = r + self.ctrl_lim_cost * bg
        return Q, g, R, r

    def cost_cross(self, x, k):
        """Gauss-Newton cross block S_k = d2 l_k / du dx (nu, nx) at knot k < N-1: -diag(s) dg/dq
        on the positions with u_ref = gravity, zero otherwise."""
        S = np.zeros((self.nu, self.nx))
        if self.u_ref == "gravity":
            _, G = self.gravity(np.asarray(x, dtype=np.float64)[:self.nv])
            S[:, :self.nv] = -self.s_u[k][:, None] * G
        return S

    # -------------------------------------------------- exact Hessian ('eh')
    def ee_second_order(self, q, k, ref):
        """w_k sum_j r_j d2p_j/dq2 (nv, nv), r = p(q) - p_ref: the EE term's curvature beyond
        Gauss-Newton, in closed form for a chain of revolute / prismatic joints (no finite
        differences): d2p/dq_j dq_m = w_j x J_m for j <= m on the EE's path (joint j turns
        everything after it), w_j the world axis of joint j (the angular Jacobian's column) and
        J_m the position Jacobian's column."""
        q = np.asarray(q, dtype=np.float64)
        r = self.w_ee[k] * (self.ee_pos(q) - self.ref_point(ref, k))
        Jl, Jw = self.ee_jac(q), self.ee_jac_angular(q)
        nv = self.nv
        H = np.zeros((nv, nv))
        for j in range(nv):
            for m in range(j, nv):
                H[j, m] = H[m, j] = r @ np.cross(Jw[:, j], Jl[:, m])
        return H

    def dynamics_second_order(self, x, u, k, lam_next, h_fd=1e-5):
        """sum_i lam_next_i d2f_i/dz2 (nz, nz), z = (x, u), of the step f at knot interval k.

        Euler and semi-implicit Euler: f is linear in (q, v, a) with a = ABA(q, v, u), so the
        term is l_a' a_zz with l_a = c lam_q + h lam_v (c = h^2/2, resp. h^2). a_zz comes from
        the RNEA (not the ABA the solver differentiates): tau(q, v, a(z)) = u twice
        differentiated, tau linear in a, gives M a_zz = -(tau_zz + tau_za a_z + (tau_za a_z)'),
        so l_a' a_zz = -d2/dz2 [mu' tau(q, v, a_lin(z))] with mu = M^-1 l_a and
        a_lin(z) = a + a_z (z - z0) frozen at z0. Its gradient is pinocchio's analytic RNEA
        derivatives, [tau_q' mu; tau_v' mu; 0] + a_z' M(q) mu, differenced centrally once.
        (pinocchio's computeRNEASecondOrderDerivatives is not in its Python bindings here.)
        RK4: central differences of :meth:`linearize`'s chain-rule derivatives, lam' [A B]."""
        x, u = np.asarray(x, dtype=np.float64), np.asarray(u, dtype=np.float64)
        lam = np.asarray(lam_next, dtype=np.float64)
        nv, nx, nu, h = self.nv, self.nx, self.nu, self.dt
        nz = nx + nu
        z0 = np.concatenate([x, u])
        if self.integrator == "rk4":
            def grad(z):
                _, A, B = self.linearize(z[:nx], z[nx:], k)
                return np.concatenate([A.T @ lam, B.T @ lam])
            D = np.zeros((nz, nz))
            for i in range(nz):
                e = np.zeros(nz)
                e[i] = h_fd * (1.0 + abs(z0[i]))
                D[:, i] = (grad(z0 + e) - grad(z0 - e)) / (2.0 * e[i])
            return 0.5 * (D + D.T)
        c = 0.5 * h * h if self.integrator == "euler" else h * h
        l_a = c * lam[:nv] + h * lam[nv:]
        q, v = x[:nv], x[nv:]
        a0, Qq, Qv, Minv = self.forward_dynamics_derivs(q, v, u, k)
        a_z = np.hstack([Qq, Qv, Minv])  # (nv, nz)
        M = np.array(pin.crba(self.model, self.data, q))
        M = np.triu(M) + np.triu(M, 1).T
        mu = np.linalg.solve(M, l_a)
        fe = self._fext(k)

        def grad(z):
            qz, vz = z[:nv], z[nv:nx]
            a = a0 + a_z @ (z - z0)
            args = (self.model, self.data, qz, vz, a) + (() if fe is None else (fe,))
            dq, dv, da = (np.array(m_) for m_ in pin.computeRNEADerivatives(*args))
            da = np.triu(da) + np.triu(da, 1).T
            return np.concatenate([dq.T @ mu, dv.T @ mu, np.zeros(nu)]) + a_z.T @ (da @ mu)

        H = np.zeros((nz, nz))
        for i in range(nz):
            e = np.zeros(nz)
            e[i] = h_fd * (1.0 + abs(z0[i]))
            H[:, i] = (grad(z0 + e) - grad(z0 - e)) / (2.0 * e[i])
        return -0.5 * (H + H.T)

    def lagrangian_hessian(self, xu, ref, lam):
        """(N, nz, nz) exact stage Hessians of L = cost - sum_k lam_k' c_k (the solver's sign of
        lam (N, nx), c_{k+1} = x_{k+1} - f(x_k, u_k)): the cost blocks (Q, the cross S, R), the
        EE curvature :meth:`ee_second_order` and the dynamics term :meth:`dynamics_second_order`
        with lam_{k+1}. The last knot fills its (nx, nx) block. Orientation and gravity-referenced
        control terms keep their Gauss-Newton blocks (as the solver)."""
        N, nx, nu, nv = self.N, self.nx, self.nu, self.nv
        xs, us = self.split(xu)
        lam = np.asarray(lam, dtype=np.float64).reshape(N, nx)
        H = np.zeros((N, nx + nu, nx + nu))
        for k in range(N):
            u = us[k] if k < N - 1 else None
            Q, _, R, _ = self.cost_derivatives(xs[k], u, k, ref)
            H[k, :nx, :nx] = Q
            H[k, :nv, :nv] += self.ee_second_order(xs[k, :nv], k, ref)
            if k < N - 1:
                S = self.cost_cross(xs[k], k)
                H[k, nx:, nx:] = R
                H[k, nx:, :nx] = S
                H[k, :nx, nx:] = S.T
                H[k] += self.dynamics_second_order(xs[k], us[k], k, lam[k + 1])
        return H

    def lagrangian_gradient(self, xu, x_s, ref, lam):
        """(N, nz) gradient of L = cost - sum_k lam_k' c_k per knot w.r.t. z_k = (x_k, u_k) (the
        last knot's control slots zero): q_k - lam_k + A_k' lam_{k+1}, r_k + B_k' lam_{k+1}."""
        N, nx = self.N, self.nx
        b = self.kkt_blocks(xu, x_s, ref)
        lam = np.asarray(lam, dtype=np.float64).reshape(N, nx)
        g = np.zeros((N, nx + self.nu))
        for k in range(N):
            g[k, :nx] = b["q"][k] - lam[k]
            if k < N - 1:
                g[k, :nx] += b["A"][k].T @ lam[k + 1]
                g[k, nx:] = b["r"][k] + b["B"][k].T @ lam[k + 1]
        return g

    # ------------------------------------------------------------ KKT blocks
    def defects(self, xu, x_s):
        """Defects c (N, nx): c_0 = x_0 - x_s, c_{k+1} = x_{k+1} - f(x_k, u_k)."""
        xs, us = self.split(xu)
        c = np.zeros((self.N, self.nx))
        c[0] = xs[0] - np.asarray(x_s, dtype=np.float64)
        for k in range(self.N - 1):
            c[k + 1] = xs[k + 1] - self.dynamics(xs[k], us[k], k)
        return c

    def kkt_blocks(self, xu, x_s, ref):
        """KKT blocks at xu (cost blocks WITHOUT the rho term).

        Returns a dict: Q (N, nx, nx), R (N-1, nu, nu), q (N, nx), r (N-1, nu),
        A (N-1, nx, nx), B (N-1, nx, nu), c (N, nx), S (N-1, nu, nx) (cost cross blocks).
        """
        N, nx, nu = self.N, self.nx, self.nu
        xs, us = self.split(xu)
        out = dict(Q=np.zeros((N, nx, nx)), R=np.zeros((N - 1, nu, nu)),
                   q=np.zeros((N, nx)), r=np.zeros((N - 1, nu)),
                   A=np.zeros((N - 1, nx, nx)), B=np.zeros((N - 1, nx, nu)),
                   c=np.zeros((N, nx)), S=np.zeros((N - 1, nu, nx)))
        out["c"][0] = xs[0] - np.asarray(x_s, dtype=np.float64)
        for k in range(N):
            u = us[k] if k < N - 1 else None
            Q, g, R, r = self.cost_derivatives(xs[k], u, k, ref)
            out["Q"][k], out["q"][k] = Q, g
            if k < N - 1:
                out["R"][k], out["r"][k] = R, r
                out["S"][k] = self.cost_cross(xs[k], k)
                xn, A, B = self.linearize(xs[k], us[k], k)
                out["A"][k], out["B"][k] = A, B
                out["c"][k + 1] = xs[k + 1] - xn
        return out

    def total_cost(self, xu, ref):
        """Sum of the stage costs l_k over all knots (float)."""
        xs, us = self.split(xu)
        return sum(self.stage_cost(xs[k], us[k] if k < self.N - 1 else None, k, ref)
                   for k in range(self.N))

    def merit(self, xu, x_s, ref):
        """phi(z) = sum_k l_k + mu * sum_k ||c_k||_1 (float)."""
        return self.total_cost(xu, ref) + self.mu * float(np.abs(self.defects(xu, x_s)).sum())

    # ------------------------------------------------------------ KKT solves
    def _ibar(self, k=0):
        """Ibar_k (nx, nx) = diag(I_nv, [v_k = 0 and vel_lim_cost = 0] I_nv): the trust region on
        the position block, and on a velocity block whose cost weight is zero (docs/solver_method.md,
        "Zero weights")."""
        Ib = np.zeros((self.nx, self.nx))
        Ib[:self.nv, :self.nv] = np.eye(self.nv)
        if self.w_qd[k] == 0 and self.vel_lim_cost == 0:
            Ib[self.nv:, self.nv:] = np.eye(self.nv)
        return Ib

    def _rbar(self, k):
        """Rbar_k (nu, nu) = diag(max(ZERO_CONTROL_PROX - s_kj, 0)) when ctrl_lim_cost = 0, else 0:
        the step-only lift of a control weight below the floor (zero included) to the floor."""
        if self.ctrl_lim_cost != 0:
            return np.zeros((self.nu, self.nu))
        return np.diag(np.maximum(ZERO_CONTROL_PROX - self.s_u[k], 0.0))

    def assemble_kkt(self, blocks, rho):
        """Dense (G (n, n), C (N nx, n), g (n,), c (N nx,)), n = N nx + (N-1) nu."""
        N, nx = self.N, self.nx
        n = self.n_xu
        G = np.zeros((n, n))
        C = np.zeros((N * nx, n))
        g = np.zeros(n)
        for k in range(N):
            xi = self.x_index(k)
            G[xi, xi] = blocks["Q"][k] + rho * self._ibar(k)
            g[xi] = blocks["q"][k]
        for k in range(N - 1):
            ui = self.u_index(k)
            G[ui, ui] = blocks["R"][k] + self._rbar(k)
            g[ui] = blocks["r"][k]
            if "S" in blocks:
                xi = self.x_index(k)
                G[ui, xi] = blocks["S"][k]
                G[xi, ui] = blocks["S"][k].T
        C[0:nx, self.x_index(0)] = -np.eye(nx)
        for k in range(N - 1):
            rows = slice((k + 1) * nx, (k + 2) * nx)
            C[rows, self.x_index(k)] = blocks["A"][k]
            C[rows, self.u_index(k)] = blocks["B"][k]
            C[rows, self.x_index(k + 1)] = -np.eye(nx)
        return G, C, g, blocks["c"].reshape(-1).copy()

    def solve_dense(self, blocks, rho):
        """Solve [[G, C^T], [C, 0]] [dz; lam] = [-g; c] with numpy.linalg.solve.

        Returns (dz (n,) in the xu layout, lam (N, nx)).
        """
        G, C, g, c = self.assemble_kkt(blocks, rho)
        n, m = G.shape[0], C.shape[0]
        K = np.zeros((n + m, n + m))
        K[:n, :n] = G
        K[:n, n:] = C.T
        K[n:, :n] = C
        sol = np.linalg.solve(K, np.concatenate([-g, c]))
        return sol[:n], sol[n:].reshape(self.N, self.nx)

    def solve_dense_hessian(self, blocks, H, rho):
        """The exact-Hessian step (docs/solver_method.md, "Exact Hessian"): the dense KKT system
        of :meth:`solve_dense` with the stage blocks H (N, nz, nz) (:meth:`lagrangian_hessian`, or
        the solver's ``debug_stage_hessian``; the last knot's (nx, nx) block) in place of the
        Gauss-Newton blocks, plus the same step terms rho Ibar_k and Rbar_k. No modification of
        any kind: where the reduced Hessian (:meth:`reduced_hessian_min_eig`) is positive this is
        the step the solver's Riccati recursion takes without inertia control.

        Returns (dz (n,), lam (N, nx))."""
        N, nx = self.N, self.nx
        H = np.asarray(H, dtype=np.float64)
        G, C, g, c = self.assemble_kkt(blocks, rho)
        G = self._exact_G(H, rho)
        n, m = G.shape[0], C.shape[0]
        K = np.zeros((n + m, n + m))
        K[:n, :n] = G
        K[:n, n:] = C.T
        K[n:, :n] = C
        sol = np.linalg.solve(K, np.concatenate([-g, c]))
        return sol[:n], sol[n:].reshape(N, nx)

    def _exact_G(self, H, rho):
        """Dense (n, n) Hessian of the exact-Hessian step: H_k + rho Ibar_k, the control block + Rbar_k."""
        N, nx = self.N, self.nx
        G = np.zeros((self.n_xu, self.n_xu))
        for k in range(N):
            xi = self.x_index(k)
            G[xi, xi] = H[k][:nx, :nx] + rho * self._ibar(k)
            if k < N - 1:
                ui = self.u_index(k)
                G[ui, ui] = H[k][nx:, nx:] + self._rbar(k)
                G[ui, xi] = H[k][nx:, :nx]
                G[xi, ui] = H[k][:nx, nx:]
        return G

    def reduced_hessian_min_eig(self, blocks, H, rho):
        """Smallest eigenvalue of Z' G Z, G the exact-Hessian step's Hessian (:meth:`_exact_G`) and
        Z an orthonormal basis of the null space of the linearized constraints C (the controls'
        directions with the states they imply): > 0 iff the QP of the step is strictly convex."""
        G = self._exact_G(np.asarray(H, dtype=np.float64), rho)
        _, C, _, _ = self.assemble_kkt(blocks, rho)
        _, sv, vt = np.linalg.svd(C)
        Z = vt[C.shape[0]:].T
        assert np.all(sv > 1e-12 * sv[0])  # C has full row rank (its -I blocks)
        return float(np.linalg.eigvalsh(Z.T @ G @ Z).min())

    def eliminate_cross(self, blocks):
        """Blocks with the cost cross blocks S_k eliminated (docs/solver_method.md, the gravity-
        referenced control cost): du_k = dv_k + K_k dx_k, K_k = -(R_k + Rbar_k)^-1 S_k, so
        Q_k <- Q_k - S_k' (R_k + Rbar_k)^-1 S_k, q_k <- q_k + K_k' r_k, A_k <- A_k + B_k K_k;
        R, r, B unchanged. Returns (blocks', K (N-1, nu, nx)); without S (or S = 0) the
        blocks themselves and K = 0."""
        N, nx, nu = self.N, self.nx, self.nu
        K = np.zeros((N - 1, nu, nx))
        if "S" not in blocks or not np.any(blocks["S"]):
            return blocks, K
        out = {k: np.array(v, copy=True) for k, v in blocks.items()}
        for k in range(N - 1):
            Rt = blocks["R"][k] + self._rbar(k)
            K[k] = -np.linalg.solve(Rt, blocks["S"][k])
            out["Q"][k] = blocks["Q"][k] + blocks["S"][k].T @ K[k]
            out["q"][k] = blocks["q"][k] + K[k].T @ blocks["r"][k]
            out["A"][k] = blocks["A"][k] + blocks["B"][k] @ K[k]
        out["S"] = np.zeros_like(blocks["S"])
        return out, K

    def schur_system(self, blocks, rho):
        """Dense Schur system of the spec: (M (N nx, N nx) = -S, gamma (N nx,)).

        M_00 = Qt_0^-1, M_{k+1,k+1} = A_k Qt_k^-1 A_k^T + B_k R_k^-1 B_k^T + Qt_{k+1}^-1,
        M_{k+1,k} = -A_k Qt_k^-1 (= M_{k,k+1}^T); gamma_0 = c_0 - Qt_0^-1 q_0,
        gamma_{k+1} = c_{k+1} + A_k Qt_k^-1 q_k + B_k R_k^-1 r_k - Qt_{k+1}^-1 q_{k+1}
        (of the blocks after eliminate_cross).
        """
        blocks, _ = self.eliminate_cross(blocks)
        N, nx = self.N, self.nx
        Qi = [np.linalg.inv(blocks["Q"][k] + rho * self._ibar(k)) for k in range(N)]
        Ri = [np.linalg.inv(blocks["R"][k] + self._rbar(k)) for k in range(N - 1)]
        A, B, c, q, r = blocks["A"], blocks["B"], blocks["c"], blocks["q"], blocks["r"]
        M = np.zeros((N * nx, N * nx))
        gam = np.zeros((N, nx))
        blk = lambda i: slice(i * nx, (i + 1) * nx)
        M[blk(0), blk(0)] = Qi[0]
        gam[0] = c[0] - Qi[0] @ q[0]
        for k in range(N - 1):
            theta = A[k] @ Qi[k] @ A[k].T + B[k] @ Ri[k] @ B[k].T + Qi[k + 1]
            phi = A[k] @ Qi[k]
            M[blk(k + 1), blk(k + 1)] = theta
            M[blk(k + 1), blk(k)] = -phi
            M[blk(k), blk(k + 1)] = -phi.T
            gam[k + 1] = c[k + 1] + A[k] @ Qi[k] @ q[k] + B[k] @ Ri[k] @ r[k] - Qi[k + 1] @ q[k + 1]
        return M, gam.reshape(-1)

    def solve_schur(self, blocks, rho):
        """Schur-complement route: solve M lam = -gamma, recover dz per knot.

        dx_k = -Qt_k^-1 (q_k - lam_k + A_k^T lam_{k+1}) (no A term at k = N-1),
        du_k = -R_k^-1 (r_k + B_k^T lam_{k+1}) (+ K_k dx_k: eliminate_cross).
        Returns (dz (n,), lam (N, nx)).
        """
        N = self.N
        M, gam = self.schur_system(blocks, rho)
        blocks, K = self.eliminate_cross(blocks)
        lam = np.linalg.solve(M, -gam).reshape(N, self.nx)
        dz = np.zeros(self.n_xu)
        for k in range(N):
            rhs = blocks["q"][k] - lam[k]
            if k < N - 1:
                rhs = rhs + blocks["A"][k].T @ lam[k + 1]
            dz[self.x_index(k)] = -np.linalg.solve(blocks["Q"][k] + rho * self._ibar(k), rhs)
        for k in range(N - 1):
            dz[self.u_index(k)] = -np.linalg.solve(blocks["R"][k] + self._rbar(k),
                                                   blocks["r"][k] + blocks["B"][k].T @ lam[k + 1])
            dz[self.u_index(k)] += K[k] @ dz[self.x_index(k)]
        return dz, lam

    # ------------------------------------------------------------------- SQP
    def sqp(self, x_s, ref, xu_warm=None, iters=3, rho=None):
        """Run `iters` SQP iterations of the spec (dense KKT solve as the linear solve).

        x_s (nx,), ref (6N,), xu_warm (n,) or None (cold start: every knot holds
        x_s, zero controls). rho None continues from self.rho (persisting across
        calls); a value overrides the starting rho. drho restarts at 1 each call.
        Returns (xu (n,), [IterRecord(alpha or -1, merit_before, merit_after, rho_after)]).
        """
        x_s = np.asarray(x_s, dtype=np.float64).copy()
        xu = self.cold_start(x_s) if xu_warm is None else np.asarray(xu_warm, dtype=np.float64).copy()
        xu[self.x_index(0)] = x_s  # knot-0 replacement
        if rho is not None:
            self.rho = float(rho)
        f = self.drho_factor
        drho = 1.0
        records = []
        for _ in range(int(iters)):
            blocks = self.kkt_blocks(xu, x_s, ref)
            dz, _lam = self.solve_dense(blocks, self.rho)
            phi0 = self.merit(xu, x_s, ref)
            best_alpha, best_phi = line_search(lambda z: self.merit(z, x_s, ref), xu, dz)
            accepted = best_phi < phi0
            if accepted:
                xu = xu + best_alpha * dz
            if self.adapt_rho:
                self.rho, drho = trust_region(self.rho, drho, f, accepted)
            records.append(IterRecord(best_alpha if accepted else -1.0, phi0,
                                      best_phi if accepted else phi0, self.rho))
        return xu, records
