"""The least-squares wrench identifier and the sampler around its estimate.

:class:`OneStepWrenchIdentifier` identifies the external wrench from one step of the motion
(measured state, applied torque, next state); :class:`IdentifiedWrenchSampler` samples a batch
of wrench hypotheses around its estimate, with the estimators' contract
(:mod:`gato.wrench.estimators`). Units: N, N*m, s.
"""
from __future__ import annotations

import numpy as np

from .estimators import _batch_size, _clamp_halves, _feedback, _real, _seed, fibonacci_sphere, random_rotation

__all__ = ["OneStepWrenchIdentifier", "IdentifiedWrenchSampler"]


# ----------------------------------------------------------------- least-squares identifier
def _ee_frame_id(model, ee_frame) -> int:
    for attr in ("nq", "nv", "frames", "existFrame", "createData"):
        if not hasattr(model, attr):
            raise ValueError(f"model: expected a pinocchio Model, got {type(model).__name__} (no {attr!r})")
    if not isinstance(ee_frame, str) or not model.existFrame(ee_frame):
        raise ValueError(f"ee_frame: the model has no frame named {ee_frame!r}")
    return int(model.getFrameId(ee_frame))


class OneStepWrenchIdentifier:
    """Least-squares wrench identification from the one-step motion residual (B = 1).

    Over an interval [t, t + dt] with the torque tau held, the nominal (robot-only) model needs
    ``rnea(q_m, dq_m, ddq)`` to produce the observed motion, ddq = (dq_next - dq) / dt, the
    dynamics evaluated at the interval MIDPOINT (q_m = interpolate(q, q_next, 1/2), dq_m the mean
    velocity) when q_next is given. The residual ``tau_resid = rnea(...) - tau`` is what the model
    omits; a wrench w at the EE frame origin contributes ``J(q_m)^T w`` (J: the frame Jacobian in
    world-aligned axes, rows [linear; angular] = [force; torque]), so w is the least-squares
    solution of ``J^T w = tau_resid``, solved damped: two steps of iterated Tikhonov with
    ``(J J^T + damping I)`` (a direction of squared singular value s2 keeps a relative bias of
    (damping / (s2 + damping))^2 and stays bounded near singularities). On an nv = 7 arm away
    from singularities all 6 components are observable; directions J barely maps are damped.

    Accuracy is set by the finite difference: pass the SENSOR interval (e.g. the 1 ms substep)
    and q_next, not the control period. On the PinocchioWorld (RK4, 1 ms) a constant wrench is
    recovered to well under 1 % noise-free (test/test_estimators.py).

    Args:
        model: the solver's pinocchio Model (robot only: the payload is what is identified).
        ee_frame: URDF frame the wrench acts at (ValueError if the model lacks it).
        alpha: EMA weight of the full-wrench estimate (1 = the raw per-sample fit), in (0, 1].
        damping: Tikhonov damping (>= 0) of the least-squares solve, added to J J^T (whose
            eigenvalues are the squared singular values of J, m^2 / dimensionless); 0: plain
            pseudo-inverse.
        max_wrench: divergence guard: the force / torque halves of every fit are clamped to this
            norm [N, N*m] and the clamp counted (``n_clamped``). Clamp well above the expected
            wrench: a swinging payload's inertial reaction is several times its weight.
        mode: "wrench": the estimate is the EMA of the full fit; "weight": the estimate is the
            payload WEIGHT, the gravity-aligned force component low-passed on ``weight_tau`` and
            floored at 0, i.e. [weight * g_hat; 0, 0, 0] (the part a constant-over-the-horizon
            wrench model can extrapolate; the inertial reaction to the arm's own motion is not).
        weight_tau: time constant [s] (> 0) of the weight filter: a = dt / (weight_tau + dt) per
            sample, so the filter is independent of the sample rate.

    Attributes: ``estimate`` (6,) (what generate_batch returns), ``wrench`` (6,) the full-wrench
    EMA (both modes), ``raw`` (6,) the last fit, ``weight`` [N], ``n_updates``.
    """

    batch_size = 1

    def __init__(self, model, ee_frame="EE", alpha=0.5, damping=0.001, max_wrench=2000.0, mode="wrench",
                 weight_tau=0.1):
        import pinocchio as pin

        self._pin = pin
        self._fid = _ee_frame_id(model, ee_frame)
        self.model, self.ee_frame = model, ee_frame
        self._data = model.createData()
        self.alpha = _real(alpha, "alpha", 0.0, 1.0, lo_open=True)
        self.damping = _real(damping, "damping", 0.0)
        self.max_wrench = _real(max_wrench, "max_wrench", 0.0, lo_open=True)
        if mode not in ("wrench", "weight"):
            raise ValueError(f"mode: expected 'wrench' or 'weight', got {mode!r}")
        self.mode = mode
        self.weight_tau = _real(weight_tau, "weight_tau", 0.0, lo_open=True)
        g = np.asarray(model.gravity.linear, dtype=np.float64)
        self._g_hat = g / np.linalg.norm(g) if np.linalg.norm(g) > 0 else np.array([0.0, 0.0, -1.0])
        self.reset()

    def reset(self) -> None:
        """Zero estimate, filters and counters."""
        self.estimate = np.zeros(6)
        self.wrench = np.zeros(6)
        self.raw = np.zeros(6)
        self._weight_f = 0.0
        self.weight = 0.0
        self.tau_resid_norm = self.unexplained_norm = 0.0
        self.n_updates = self.n_clamped = 0

    def generate_batch(self) -> np.ndarray:
        """(1, 6) world-axes wrench [force N; torque N*m] at the EE frame origin: the estimate."""
        return self.estimate.reshape(1, 6).copy()

    def _vec(self, v, name, n) -> np.ndarray:
        try:
            a = np.array(v, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected ({n},) numbers, got {type(v).__name__}") from None
        if a.shape != (n,):
            raise ValueError(f"{name}: expected shape ({n},) (robot only), got {np.shape(v)}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: contains NaN or Inf")
        return a

    def identify(self, q, dq, dq_next, tau_applied, dt, q_next=None) -> np.ndarray:
        """Fit the wrench explaining (q, dq) -> (q_next, dq_next) under ``tau_applied`` held for dt.

        Args: q (nq,) rad, dq / dq_next (nv,) rad/s, tau_applied (nv,) N*m (the actuated torque
        actually applied, after clamping), dt > 0 s (the SENSOR interval), q_next (nq,) rad
        (recommended: the fit is then evaluated at the interval midpoint, second order).

        Returns the raw fit (6,) [force N; torque N*m], world axes at the EE origin, clamped to
        max_wrench; the filtered value lands in ``estimate``. ValueError naming the argument on
        wrong shapes or non-finite values.
        """
        pin, m = self._pin, self.model
        q = self._vec(q, "q", m.nq)
        dq = self._vec(dq, "dq", m.nv)
        dq_next = self._vec(dq_next, "dq_next", m.nv)
        tau = self._vec(tau_applied, "tau_applied", m.nv)
        dt = _real(dt, "dt", 0.0, lo_open=True)
        ddq = (dq_next - dq) / dt
        if q_next is not None:
            qn = self._vec(q_next, "q_next", m.nq)
            q_e, dq_e = pin.interpolate(m, q, qn, 0.5), 0.5 * (dq + dq_next)
        else:
            q_e, dq_e = q, dq
        resid = pin.rnea(m, self._data, q_e, dq_e, ddq) - tau
        J = pin.computeFrameJacobian(m, self._data, q_e, self._fid, pin.LOCAL_WORLD_ALIGNED)  # (6, nv)
        if self.damping > 0:
            # Iterated Tikhonov (two steps): one damped solve biases a direction of squared
            # singular value s2 by lambda / (s2 + lambda) (2.5 % at the iiwa14 ready pose,
            # s2_min = 0.04); the refinement step squares that factor (0.06 %) and stays
            # bounded near singularities, where the damping is needed.
            A = J @ J.T + self.damping * np.eye(6)
            w = np.linalg.solve(A, J @ resid)
            w = w + np.linalg.solve(A, J @ (resid - J.T @ w))
        else:
            w = np.linalg.lstsq(J.T, resid, rcond=None)[0]
        if not np.all(np.isfinite(w)):  # a singular undamped solve: keep the previous estimate
            self.n_clamped += 1
            return self.raw.copy()
        w, c = _clamp_halves(w, self.max_wrench)
        self.n_clamped += int(c)
        self.tau_resid_norm = float(np.linalg.norm(resid))
        self.unexplained_norm = float(np.linalg.norm(J.T @ w - resid))
        self.raw = w
        self.wrench = (1.0 - self.alpha) * self.wrench + self.alpha * w
        a = dt / (self.weight_tau + dt)
        self._weight_f = (1.0 - a) * self._weight_f + a * float(w[:3] @ self._g_hat)
        self.weight = max(0.0, self._weight_f)  # a negative weight is unphysical
        if self.mode == "weight":
            self.estimate = np.concatenate([self.weight * self._g_hat, np.zeros(3)])
        else:
            self.estimate = self.wrench.copy()
        self.n_updates += 1
        return w.copy()

    def update(self, best_idx, prediction_errors, batch_used=None) -> None:
        """No-op (the contract's hook): the fit is driven by :meth:`identify`, not batch feedback."""

    def get_stats(self) -> dict:
        """{estimate, wrench, raw (6,); force_norm N; torque_norm N*m; weight N; tau_resid_norm,
        unexplained_norm N*m (the part of the residual no EE wrench explains); n_updates;
        n_clamped; mode}."""
        return dict(estimate=self.estimate.copy(), wrench=self.wrench.copy(), raw=self.raw.copy(),
                    force_norm=float(np.linalg.norm(self.estimate[:3])),
                    torque_norm=float(np.linalg.norm(self.estimate[3:])), weight=float(self.weight),
                    tau_resid_norm=self.tau_resid_norm, unexplained_norm=self.unexplained_norm,
                    n_updates=self.n_updates, n_clamped=self.n_clamped, mode=self.mode)


# ----------------------------------------------------------------- identified-wrench sampler
class IdentifiedWrenchSampler:
    """Hypothesis batch centred on the identified payload weight (batch-as-identity, B >= 1).

    Rows: ``[0]`` the filtered weight (an :class:`OneStepWrenchIdentifier` in mode "weight"),
    ``[1]`` zero (the robot-only model); with ``inertial_rows`` also the full identified wrench
    (EMA ``wrench_alpha``) and the blend weight + INERTIAL_BLEND (full - weight); the remaining
    rows the weight's force plus ``radius`` times Fibonacci-sphere directions (a fresh seeded
    rotation after every update). The radius grows by RADIUS_GROW when a sphere row wins the
    one-step rollout and shrinks by RADIUS_SHRINK when a core row does, within
    [min_radius, max_radius]. B = 1: the weight alone.

    :meth:`identify` must be fed at sensor rate (gato.MPC_GATO does, per simulation substep);
    :meth:`update` only adapts the radius.

    Args: batch_size >= 1; model / ee_frame: the solver's pinocchio Model and the EE frame;
    seed (keyword-only, like the rest): rotation generator seed; initial_radius, min_radius,
    max_radius [N]; weight_tau [s], wrench_alpha, damping, max_wrench: the identifier's
    (weight_tau, alpha, damping, max_wrench); inertial_rows: add the full-wrench rows.
    """

    RADIUS_GROW = 1.25
    RADIUS_SHRINK = 0.8
    INERTIAL_BLEND = 0.5

    def __init__(self, batch_size, model, ee_frame="EE", *, seed=0, initial_radius=10.0, min_radius=5.0,
                 max_radius=150.0, weight_tau=0.1, wrench_alpha=0.5, damping=0.001, max_wrench=2000.0,
                 inertial_rows=False):
        self.batch_size = _batch_size(batch_size)
        _real(wrench_alpha, "wrench_alpha", 0.0, 1.0, lo_open=True)  # named here, not as the identifier's alpha
        self.identifier = OneStepWrenchIdentifier(model, ee_frame, alpha=wrench_alpha, damping=damping,
                                                  max_wrench=max_wrench, mode="weight", weight_tau=weight_tau)
        self.min_radius = _real(min_radius, "min_radius", 0.0, lo_open=True)
        self.max_radius = _real(max_radius, "max_radius", self.min_radius)
        self.initial_radius = _real(initial_radius, "initial_radius", self.min_radius, self.max_radius)
        self.seed = _seed(seed)
        if not isinstance(inertial_rows, (bool, np.bool_)):
            raise ValueError(f"inertial_rows: expected a bool, got {inertial_rows!r}")
        self.inertial_rows = bool(inertial_rows)
        self.n_core = min(self.batch_size, 4 if self.inertial_rows else 2)
        self._dirs = fibonacci_sphere(self.batch_size - self.n_core)
        self.reset()

    @property
    def n_updates(self) -> int:
        """Sensor samples the identifier has fit (identify calls)."""
        return self.identifier.n_updates

    def identify(self, q, dq, dq_next, tau_applied, dt, q_next=None) -> np.ndarray:
        """Feed one sensor interval to the identifier (see :meth:`OneStepWrenchIdentifier.identify`);
        returns its raw fit (6,)."""
        return self.identifier.identify(q, dq, dq_next, tau_applied, dt, q_next=q_next)

    def reset(self) -> None:
        """Reset the identifier, the radius and the seed's generator."""
        self.identifier.reset()
        self._rng = np.random.default_rng(self.seed)
        self._rotation = np.eye(3)
        self.radius = self.initial_radius
        self._last_batch = None
        self.core_wins = self.sphere_wins = self.n_feedback = 0
        self.last_best = 0

    def generate_batch(self) -> np.ndarray:
        """(B, 6) world-axes wrenches [force N; torque N*m] at the EE frame origin (rows above)."""
        B, idf = self.batch_size, self.identifier
        weight = idf.estimate
        rows = [weight, np.zeros(6)]
        if self.inertial_rows:
            rows += [idf.wrench, weight + self.INERTIAL_BLEND * (idf.wrench - weight)]
        batch = np.zeros((B, 6))
        batch[:self.n_core] = np.array(rows[:self.n_core])
        batch[self.n_core:, :3] = weight[:3] + self.radius * (self._dirs @ self._rotation.T)
        batch[self.n_core:, 3:] = weight[3:]
        self._last_batch = batch
        return batch.copy()

    def update(self, best_idx, prediction_errors, batch_used=None) -> None:
        """Adapt the radius from which row won (``prediction_errors`` (B,), ``batch_used`` (B, 6)
        are validated like the other samplers'); the wrench itself comes from identify."""
        best, err, _ = _feedback(best_idx, prediction_errors, batch_used, self.batch_size, self._last_batch)
        if not np.any(np.isfinite(err)):
            return
        if best < self.n_core:
            self.core_wins += 1
            self.radius *= self.RADIUS_SHRINK
        else:
            self.sphere_wins += 1
            self.radius *= self.RADIUS_GROW
        self.radius = float(np.clip(self.radius, self.min_radius, self.max_radius))
        self._rotation = random_rotation(self._rng)
        self.n_feedback += 1
        self.last_best = best

    def get_stats(self) -> dict:
        """The identifier's stats plus radius N, core_wins, sphere_wins, n_feedback, last_best."""
        st = self.identifier.get_stats()
        st.update(radius=float(self.radius), core_wins=self.core_wins, sphere_wins=self.sphere_wins,
                  n_feedback=self.n_feedback, last_best=self.last_best)
        return st
