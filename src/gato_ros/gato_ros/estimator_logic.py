"""ROS-free logic of the estimator node: joint states and applied torques in, the external
wrench at the EE frame out (:class:`gato.estimators.OneStepWrenchIdentifier`).

Each interval between two consecutive joint states k-1 -> k with a known applied torque is
one least-squares fit: the nominal model's inverse dynamics of the observed motion minus the
applied torque is the residual an EE wrench w explains through ``J(q)^T w`` (world axes, the
EE frame origin; evaluated at the interval midpoint). The estimate is the EMA of the fits
(mode ``wrench``) or the low-passed payload weight (mode ``weight``).

Where the applied torque comes from (``effort_source``):

- ``command``: gato_msgs/EffortCommand, stamped with the joint state it answers, applied from
  that state to the next one: the torque of interval k-1 -> k is the command stamped t_{k-1}.
  Exact in lockstep; in real time the command starts one transport latency late.
- ``joint_states``: the effort field of state k is the torque applied since state k-1 (the
  simulation world's and ros2_control effort state interfaces' convention).

Bad input raises ValueError naming the field (``joint_states.name``, ``joint_states.velocity``,
``effort.effort``, ...): the node counts it, logs it (throttled) and ignores the message. An
out-of-order or repeated stamp (lockstep re-sends) is ignored and counted, without error.
A gap longer than ``max_interval_s`` is not fitted (counted in ``skipped_gaps``).
Divergence guard: every fit is clamped to ``max_wrench`` (force and torque halves) and the
clamp reported (``WrenchEstimate.clamped``, ``n_clamped``); the estimate is never NaN.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gato.core.bsqp import robot_info, robot_urdf
from gato.wrench.identifier import OneStepWrenchIdentifier

from . import inputs
from . import params as schema
from .types import JointStateSample, ns_to_sec

__all__ = ["EstimatorLogic", "WrenchEstimate"]


@dataclass
class WrenchEstimate:
    """One published estimate.

    ``stamp_ns``: the stamp of the joint state that closed the fitted interval. ``wrench`` (6,)
    [force N; torque N*m], world axes, at the EE frame origin (the filtered estimate);
    ``raw`` (6,) the interval's own fit; ``clamped``: this fit hit ``max_wrench``.
    ``stats``: the counters and norms (:meth:`EstimatorLogic.stats`).
    """

    stamp_ns: int
    wrench: np.ndarray
    raw: np.ndarray
    clamped: bool
    stats: dict = field(default_factory=dict)


class EstimatorLogic:
    """External-wrench estimation from joint states and applied torques; no ROS.

    Args:
        config: values of the estimator schema (gato_ros.params.ESTIMATOR); missing names take
            their defaults for ``config["robot"]``.

    Raises ValueError on an invalid configuration (the reason names the parameter).
    """

    _KEEP = 64  # commands / states remembered (a command may arrive after the next state)

    def __init__(self, config: dict):
        import pinocchio as pin

        robot = config.get("robot", "iiwa14")
        cfg = schema.resolve_config(schema.ESTIMATOR, config, "estimator")
        self.cfg = cfg
        self.model = pin.buildModelFromUrdf(str(robot_urdf(robot)))
        self.ee_frame = robot_info(robot)["ee_frame"]
        self.identifier = OneStepWrenchIdentifier(self.model, self.ee_frame, alpha=cfg["alpha"],
                                                  damping=cfg["damping"], max_wrench=cfg["max_wrench"],
                                                  mode=cfg["mode"], weight_tau=cfg["weight_tau_s"])
        self.urdf_joints = list(self.model.names)[1:]
        names = list(cfg["joint_names"])
        if sorted(names) != sorted(self.urdf_joints):
            raise ValueError(f"joint_names: {names} are not the joints of {robot}'s URDF {self.urdf_joints}")
        self.nq, self.nv = int(self.model.nq), int(self.model.nv)
        self._maps: dict = {}
        self._states: dict = {}      # stamp_ns -> (q, dq) URDF order
        self._efforts: dict = {}     # stamp_ns of the interval's START -> tau (nv,) URDF order
        self._last_stamp = None      # newest accepted joint-state stamp
        self._fitted = set()         # interval start stamps already fitted
        self.ignored_stamps = 0      # repeated / out-of-order joint states
        self.rejected = 0            # joint states / commands refused at the boundary (on_*_msg)
        self.last_rejection = ""     # the reason of the latest refusal
        self._bounds = inputs.state_bounds(self.model, self.urdf_joints)   # plausible [q; dq], URDF order
        self.skipped_gaps = 0
        self.n_published = 0
        self.last_clamped = False
        self.last_estimate: WrenchEstimate | None = None

    # ------------------------------------------------------------------ input checks
    def _index(self, names, what: str) -> np.ndarray:
        key = tuple(names)
        idx = self._maps.get(key)
        if idx is None:
            pos = {n: i for i, n in enumerate(names)}
            missing = [j for j in self.urdf_joints if j not in pos]
            if missing:
                raise ValueError(f"{what}: lacks joints {missing} (got {list(names)})")
            idx = np.array([pos[j] for j in self.urdf_joints])
            if len(self._maps) > 16:
                self._maps.clear()
            self._maps[key] = idx
        return idx

    @staticmethod
    def _array(values, n: int, what: str) -> np.ndarray:
        a = np.asarray(values, dtype=np.float64).reshape(-1)
        if a.size != n:
            raise ValueError(f"{what}: {a.size} values for {n} names")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{what}: contains NaN or Inf")
        return a

    # ------------------------------------------------------------------ inputs
    def on_effort(self, stamp_ns: int, names, effort) -> WrenchEstimate | None:
        """An applied-torque command stamped ``stamp_ns`` (the joint state it answers), in
        ``names`` order (empty names: the configured ``joint_names`` order). Returns an estimate
        when it completes an interval whose closing state already arrived, else None.
        ValueError naming the field on bad input (the command is then not stored)."""
        names = list(names) if names is not None and len(names) else list(self.cfg["joint_names"])
        idx = self._index(names, "effort.joint_names")
        tau = self._array(effort, len(names), "effort.effort")[idx]
        self._efforts[int(stamp_ns)] = tau
        self._trim(self._efforts)
        return self._fit_after(int(stamp_ns))

    def on_joint_state_msg(self, msg, now_ns: int | None = None) -> WrenchEstimate | None:
        """A sensor_msgs/JointState message, validated once (:func:`gato_ros.inputs.joint_state`,
        then :meth:`on_joint_state`'s checks and the plausible range of
        :func:`gato_ros.inputs.state_bounds`); a refused one is counted in ``rejected`` (an old
        or repeated stamp in ``ignored_stamps``) and returns None. For a re-sent state (its stamp
        repeats the latest estimate's) that estimate is returned again (:meth:`estimate_at`)."""
        try:
            js = inputs.joint_state(msg, now_ns)
            inputs.joint_vector(js.names, js.position, js.velocity, self.urdf_joints, self._bounds)
            out = self.on_joint_state(js)
        except ValueError as e:           # inputs.Rejected or on_joint_state's own check
            self.rejected += 1
            self.last_rejection = str(e)
            return None
        return out if out is not None else self.estimate_at(js.stamp_ns)

    def on_effort_msg(self, msg) -> WrenchEstimate | None:
        """A gato_msgs/EffortCommand message -> :meth:`on_effort`; a refused one is counted in
        ``rejected`` and returns None."""
        try:
            return self.on_effort(inputs.stamp_ns(msg.header), list(msg.joint_names), list(msg.effort))
        except (ValueError, TypeError) as e:
            self.rejected += 1
            self.last_rejection = str(e)
            return None

    def on_joint_state(self, js: JointStateSample) -> WrenchEstimate | None:
        """A joint state arrived. Returns the estimate of the interval it closes (None when the
        interval's torque is not known yet, the state repeats an earlier stamp, or the gap is too
        long). ValueError naming the field on bad input (the state is then ignored)."""
        n = len(js.names)
        idx = self._index(js.names, "joint_states.name")
        q = self._array(js.position, n, "joint_states.position")[idx]
        dq = self._array(js.velocity, n, "joint_states.velocity")[idx]
        tau = None
        if self.cfg["effort_source"] == "joint_states":
            tau = self._array(js.effort, n, "joint_states.effort")[idx]
        stamp = int(js.stamp_ns)
        if self._last_stamp is not None and stamp <= self._last_stamp:
            self.ignored_stamps += 1
            return None
        prev = self._last_stamp
        self._last_stamp = stamp
        self._states[stamp] = (q, dq)
        self._trim(self._states)
        if prev is None:
            return None
        if tau is not None:
            self._efforts[prev] = tau    # the effort reported at k was applied over (k-1, k]
            self._trim(self._efforts)
        return self._fit_after(prev)

    def _trim(self, d: dict) -> None:
        if len(d) > self._KEEP:
            for k in sorted(d)[:-self._KEEP // 2]:
                del d[k]
        if len(self._fitted) > self._KEEP:
            keep = sorted(self._fitted)[-self._KEEP // 2:]
            self._fitted = set(keep)

    def _fit_after(self, start_ns: int) -> WrenchEstimate | None:
        """Fit the interval from the state stamped ``start_ns`` to the next state, when the
        state pair and the torque are all known and it was not fitted before."""
        if start_ns in self._fitted or start_ns not in self._states or start_ns not in self._efforts:
            return None
        later = [s for s in self._states if s > start_ns]
        if not later:
            return None
        end_ns = min(later)
        dt = ns_to_sec(end_ns - start_ns)
        self._fitted.add(start_ns)
        if dt > self.cfg["max_interval_s"]:
            self.skipped_gaps += 1
            return None
        (q0, dq0), (q1, dq1) = self._states[start_ns], self._states[end_ns]
        idf = self.identifier
        n_clamped = idf.n_clamped
        raw = idf.identify(q0, dq0, dq1, self._efforts[start_ns], dt, q_next=q1)
        self.last_clamped = idf.n_clamped > n_clamped
        self.n_published += 1
        self.last_estimate = WrenchEstimate(stamp_ns=end_ns, wrench=idf.estimate.copy(),
                                            raw=np.asarray(raw, dtype=np.float64), clamped=self.last_clamped,
                                            stats=self.stats())
        return self.last_estimate

    def estimate_at(self, stamp_ns: int) -> WrenchEstimate | None:
        """The latest estimate when it is stamped ``stamp_ns`` (the interval that state closed),
        else None: what a re-sent joint state is answered with (the node publishes it again)."""
        e = self.last_estimate
        return e if e is not None and e.stamp_ns == int(stamp_ns) else None

    # ------------------------------------------------------------------ output
    def stats(self) -> dict:
        """{n_updates, n_clamped, clamped (the last fit), ignored_stamps, skipped_gaps, force_norm N,
        torque_norm N*m, weight N, tau_resid_norm / unexplained_norm N*m, raw (6,) list, mode,
        max_wrench}: JSON-ready."""
        st = self.identifier.get_stats()
        return dict(n_updates=int(st["n_updates"]), n_clamped=int(st["n_clamped"]), clamped=bool(self.last_clamped),
                    ignored_stamps=self.ignored_stamps, skipped_gaps=self.skipped_gaps,
                    force_norm=float(st["force_norm"]), torque_norm=float(st["torque_norm"]),
                    weight=float(st["weight"]), tau_resid_norm=float(st["tau_resid_norm"]),
                    unexplained_norm=float(st["unexplained_norm"]), raw=[float(v) for v in st["raw"]],
                    mode=str(st["mode"]), max_wrench=float(self.cfg["max_wrench"]))

    def reset(self) -> None:
        """Forget the states, torques and the estimate (e.g. after the simulation restarted)."""
        self.identifier.reset()
        self._states.clear()
        self._efforts.clear()
        self._fitted.clear()
        self._last_stamp = None
        self.last_clamped = False
        self.last_estimate = None
