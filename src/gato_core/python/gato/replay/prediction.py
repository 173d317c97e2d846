"""Model versus reality: how well the solver's model predicts the next measured state.

For every pair of consecutive measured joint states (t_k, x_k), (t_{k+1}, x_{k+1}) with
the torque u_k that acted in between (the joint states' effort field, else the
controller's command held), the model (pinocchio ``aba`` on the solver's URDF)
is integrated from x_k under u_k over the actual interval (RK4, steps of at most
``max_substep`` s) and compared with x_{k+1}:

    e_q  = q_{k+1} - q_pred       [rad]      e_qd = qd_{k+1} - qd_pred   [rad/s]
    tau_res = M(q_k) e_qd / (t_{k+1} - t_k)                               [N*m]

``tau_res`` is the generalized force the model is missing: with the true dynamics
M* qdd* + h* = u and the model's M qdd + h = u, M (qdd* - qdd) = -(dM qdd* + dh).
A link heavier than modelled, an unmodelled payload or unmodelled friction shows up
on the joints that carry it, which is where the report points.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Prediction", "Predictor", "Residuals", "predict_errors"]


@dataclass
class Prediction:
    """One-step prediction errors (K = compared intervals, nv joints, solver order).

    ``rows``: the per-interval numbers (a :class:`gato.replay.rows.Rows`, spilled to a
    temporary file for long runs): ``t`` [s] interval starts, ``e_q`` / ``e_qd`` / ``tau_res``
    (nv,) [N*m]; the properties ``t`` (K,), ``e_q`` / ``e_qd`` / ``tau_res`` (K, nv) read them
    whole (tests, small runs; the report reads them in chunks). ``rms_tau`` / ``rms_qd`` (nv,);
    ``share`` (nv,) each joint's fraction of sum(rms_tau^2); ``ranking`` joint indices by
    rms_tau, largest first; ``suspects``: the joint names that together hold 80 % of
    sum(rms_tau^2) (at most 3), among the joints whose rms_tau exceeds ``tau_floor`` [N*m]
    (empty: the model explains the motion to within the floor); ``max_substep`` [s].
    """

    joint_names: list
    rows: object
    rms_tau: np.ndarray
    rms_qd: np.ndarray
    share: np.ndarray
    ranking: list
    suspects: list
    max_substep: float
    torque_source: str = "command"
    tau_floor: float = 0.05
    skipped: int = 0

    @property
    def K(self) -> int:
        return self.rows.n

    @property
    def t(self) -> np.ndarray:
        return self.rows.column("t")

    @property
    def e_q(self) -> np.ndarray:
        return self.rows.column("e_q")

    @property
    def e_qd(self) -> np.ndarray:
        return self.rows.column("e_qd")

    @property
    def tau_res(self) -> np.ndarray:
        return self.rows.column("tau_res")


class Residuals:
    """The per-interval results of a run as they come (:meth:`add`), in bounded memory: the
    rows go to a :class:`gato.replay.rows.Rows`, the RMS sums are kept running (summed row by
    row: the same float64 sums as ``np.mean(x ** 2, axis=0)``); :meth:`summary` makes the
    :class:`Prediction`."""

    def __init__(self, nv: int):
        from .rows import Rows

        self.nv = nv
        f = np.float64
        self.rows = Rows({"t": ((), f), "e_q": ((nv,), f), "e_qd": ((nv,), f), "tau_res": ((nv,), f)})
        self.sq_tau = self.sq_qd = None

    def add(self, t_s: float, e_q, e_qd, tau):
        """One interval: start ``t_s`` [s], e_q / e_qd / tau (nv,)."""
        self.rows.add(t=t_s, e_q=e_q, e_qd=e_qd, tau_res=tau)
        st, sq = np.square(tau), np.square(e_qd)
        if self.sq_tau is None:
            self.sq_tau, self.sq_qd = st, sq
        else:
            self.sq_tau = self.sq_tau + st
            self.sq_qd = self.sq_qd + sq

    def summary(self, joint_names, *, skipped: int, max_substep: float, torque_source: str,
                tau_floor: float = 0.05) -> Prediction:
        nv, K = len(joint_names), self.rows.n
        rms_tau = np.sqrt(self.sq_tau / K) if K else np.zeros(nv)
        rms_qd = np.sqrt(self.sq_qd / K) if K else np.zeros(nv)
        tot = float(np.sum(rms_tau ** 2))
        share = rms_tau ** 2 / tot if tot > 0 else np.zeros(nv)
        ranking = [int(i) for i in np.argsort(-rms_tau, kind="stable")]
        suspects, acc = [], 0.0
        for i in ranking:
            if acc >= 0.8 or len(suspects) == 3 or rms_tau[i] <= tau_floor:
                break
            suspects.append(joint_names[i])
            acc += share[i]
        return Prediction(joint_names=list(joint_names), rows=self.rows, rms_tau=rms_tau, rms_qd=rms_qd,
                          share=share, ranking=ranking, suspects=suspects, max_substep=max_substep,
                          torque_source=torque_source, tau_floor=tau_floor, skipped=skipped)


def _rk4(pin, model, data, q, v, u, dt, n):
    h = dt / n

    def f(q_, v_):
        return v_, pin.aba(model, data, q_, v_, u)

    for _ in range(n):
        k1q, k1v = f(q, v)
        k2q, k2v = f(pin.integrate(model, q, 0.5 * h * k1q), v + 0.5 * h * k1v)
        k3q, k3v = f(pin.integrate(model, q, 0.5 * h * k2q), v + 0.5 * h * k2v)
        k4q, k4v = f(pin.integrate(model, q, h * k3q), v + h * k3v)
        q = pin.integrate(model, q, h / 6.0 * (k1q + 2 * k2q + 2 * k3q + k4q))
        v = v + h / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
    return q, v


def predict_errors(urdf, joint_names, state_t_ns, states, commands, *, efforts=None, torque_source="auto",
                   max_substep: float = 1e-3, max_gap_s: float = 0.5, tau_floor: float = 0.05) -> Prediction:
    """One-step prediction errors of the model on a recorded run.

    Args:
        urdf: the solver's URDF (fixed base).
        joint_names: (nv,) solver order (the URDF's joint order).
        state_t_ns: (T,) int ns stamps of the measured states, increasing.
        states: (T, 2 nv) measured [q; qd].
        commands: {stamp_ns: (u (nv,), source)}: the command applied from that stamp on
            (held until the next one).
        efforts: (T, nv) the joint states' effort field [N*m] (NaN where absent): the
            torque that acted over [t_k, t_k+1) is taken as the effort reported at t_k+1
            (the simulation world reports the torque it applied over the period; a robot
            driver its measured joint torque).
        torque_source: "effort" (the efforts), "command" (the commands, zero-order hold),
            "auto" (efforts when every state carries them, else commands).
        max_substep: longest RK4 step [s].
        max_gap_s: intervals longer than this (a pause, lost messages) are skipped.
        tau_floor: RMS missing force [N*m] below which a joint is not a suspect (the
            nominal simulation bringup stays under 0.01 N*m: integrator differences).
    Intervals before the first command are skipped (counted in ``skipped``).
    """
    pr = Predictor(urdf, joint_names, max_substep=max_substep)
    res = Residuals(len(joint_names))
    skipped = 0
    # Zero-order hold: over [t_k, t_k+1) the latest command stamped at or before t_k acts
    # (a free-running controller skips states it had no time for; their interval keeps the
    # previous command). Commands older than max_gap_s do not count.
    c_t = np.array(sorted(commands), dtype=np.int64)
    if torque_source not in ("auto", "effort", "command"):
        raise ValueError(f"torque_source: expected 'auto', 'effort' or 'command', got {torque_source!r}")
    have_eff = efforts is not None and len(efforts) == len(state_t_ns) and len(efforts) > 1 \
        and bool(np.all(np.isfinite(efforts[1:])))
    if torque_source == "effort" and not have_eff:
        raise ValueError("torque_source: 'effort', but the joint states do not all carry efforts")
    use_eff = torque_source == "effort" or (torque_source == "auto" and have_eff)
    for k in range(len(state_t_ns) - 1):
        i = int(np.searchsorted(c_t, int(state_t_ns[k]), side="right")) - 1
        dt = (int(state_t_ns[k + 1]) - int(state_t_ns[k])) / 1e9
        if not 0 < dt <= max_gap_s or (not use_eff and (i < 0 or (int(state_t_ns[k]) - int(c_t[i])) / 1e9
                                                         > max_gap_s)):
            skipped += 1
            continue
        u = efforts[k + 1] if use_eff else np.asarray(commands[int(c_t[i])][0], dtype=np.float64)
        e_q, e_qd, tau_k = pr.interval(int(state_t_ns[k]), states[k], int(state_t_ns[k + 1]), states[k + 1], u)
        res.add(int(state_t_ns[k]) / 1e9, e_q, e_qd, tau_k)
    return res.summary(list(joint_names), skipped=skipped, max_substep=max_substep,
                       torque_source="effort" if use_eff else "command", tau_floor=tau_floor)


class Predictor:
    """The model's one-step prediction of single intervals (what :func:`predict_errors` does for
    a whole run; ``gato replay`` streams the joint states through it). Raises ValueError when
    ``joint_names`` are not the URDF's joints in order."""

    def __init__(self, urdf, joint_names, *, max_substep: float = 1e-3):
        import pinocchio as pin

        self.pin = pin
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.data = self.model.createData()
        urdf_joints = list(self.model.names)[1:]
        if list(joint_names) != urdf_joints:
            raise ValueError(f"joint_names: {list(joint_names)} are not the URDF's joints in order {urdf_joints}")
        self.nq, self.nv = self.model.nq, self.model.nv
        self.max_substep = max_substep

    def interval(self, t0_ns: int, x0, t1_ns: int, x1, u):
        """(e_q (nv,), e_qd (nv,), tau_res (nv,) N*m) of the interval from state ``x0`` at
        ``t0_ns`` to ``x1`` at ``t1_ns`` under torque ``u`` (nv,) N*m."""
        pin, model, data, nq = self.pin, self.model, self.data, self.nq
        dt = (t1_ns - t0_ns) / 1e9
        q, v = x0[:nq], x0[nq:]
        n = max(1, int(np.ceil(dt / self.max_substep - 1e-9)))
        qp, vp = _rk4(pin, model, data, q, v, u, dt, n)
        e_qd = x1[nq:] - vp
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T          # crba fills the upper triangle
        return pin.difference(model, qp, x1[:nq]), e_qd, M @ e_qd / dt
