"""Hypothesis batches: the batch dimension carries B model hypotheses, and reality picks one.

Instead of B independent problems, each batch entry of the solver solves the
SAME tick under its own hypothesis (an external-wrench guess, a parameter
spread, ...). Per tick, :class:`gato.controller.MPCController` runs::

    hypotheses.apply(solver, x_measured)            # program the B hypotheses
    result = solver.solve(...)                      # one batched solve
    best = hypotheses.select(solver, result, x_prev, u_prev, x_measured, dt)
    hypotheses.update(best, hypotheses.last_errors) # feed the outcome back

and applies the winner's control. With ``batch_size == 1`` the hooks are
no-ops (``select`` returns 0), so a single-hypothesis controller is a plain MPC.

Concrete wrench hypotheses build on this base class: :class:`ForceHypothesisBatch` (B sampled
wrench guesses from a :mod:`gato.estimators` sampler, scored by the one-step rollout) and
:class:`IdentifiedWrenchBatch` (one wrench identified by least squares from the motion); the
swing-aware :class:`SwingWrenchBatch` lives in :mod:`gato.wrench.swing_batch`, the batches of the
reference API's options in :mod:`gato.wrench.options`.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from ..robots.frames import world_wrench_to_joint_local

__all__ = ["HypothesisBatch", "ForceHypothesisBatch", "IdentifiedWrenchBatch", "world_wrench_to_gato_slot"]


def world_wrench_to_gato_slot(model, data, ee_frame_id, q, f_world) -> np.ndarray:
    """World-axes wrench at a frame's origin -> the solver's 6-number f_ext slot.

    Args:
        model, data: pinocchio Model / Data of the robot (e.g. ``solver.model`` /
            ``solver.data``).
        ee_frame_id: pinocchio frame id of the point of application (e.g.
            ``solver.ee_frame_id``).
        q: (nq,) configuration [rad] at which the wrench is re-expressed.
        f_world: (6,) ``[force(3) N; torque(3) N·m]``, world axes, torque about
            the frame origin.

    Returns:
        (6,) spatial force of the frame's parent body in that body's JOINT-LOCAL
        frame about the joint origin, ordered ``[angular(3) N·m; linear(3) N]`` —
        one row of the ``(B, 6)`` form of :meth:`gato.BSQP.set_f_ext_B`, which
        scatters it into the EE body (the parent joint of the solver's EE frame).
        For a frame on another body use
        :func:`gato.common.world_wrench_to_joint_local` (it also returns the body
        index) and the ``(B, 6 * n_bodies)`` form.

    The slot depends on q (the joint frame rotates with the arm): recompute it
    whenever the configuration changes.
    """
    f = np.asarray(f_world, dtype=np.float64)
    if f.shape != (6,):
        raise ValueError(f"f_world: expected shape (6,) [force; torque], got {f.shape}")
    if not np.all(np.isfinite(f)):
        raise ValueError("f_world: contains NaN or Inf")
    qa = np.asarray(q, dtype=np.float64)
    if qa.shape != (model.nq,):
        raise ValueError(f"q: expected shape ({model.nq},), got {qa.shape}")
    if not np.all(np.isfinite(qa)):
        raise ValueError("q: contains NaN or Inf")
    fid = int(ee_frame_id)
    if not 0 <= fid < len(model.frames):
        raise ValueError(f"ee_frame_id: expected a frame id in [0, {len(model.frames)}), got {ee_frame_id!r}")
    _, slot = world_wrench_to_joint_local(model, data, fid, qa, f)
    return slot


class HypothesisBatch(ABC):
    """B parallel hypotheses evaluated by the batched solver each MPC tick.

    Subclasses set ``batch_size`` (must equal the solver's) and implement
    :meth:`apply` and :meth:`update`; :meth:`select` has a default scorer.

    Attributes:
        batch_size: number of hypotheses B.
        last_errors: (B,) scores of the last :meth:`select` (lower = better
            explains the measurement), or None before the first scoring.
    """

    batch_size: int = 1
    last_errors: np.ndarray | None = None
    #: Longest substep [s] of the scoring rollout in :meth:`select` (None: one step of dt). The
    #: solver's integrator (explicit Euler by default) over a whole control period has an error
    #: of its own that the hypotheses then "explain"; substeps keep it below the wrench effects.
    score_dt: float | None = None

    @abstractmethod
    def apply(self, solver, x) -> None:
        """Sample/refresh the B hypotheses and program them into the solver before
        the solve (e.g. ``solver.set_f_ext_B``). ``x``: (nx,) measured state."""

    def select(self, solver, result, x_prev, u_prev, x_meas, dt) -> int:
        """Pick the hypothesis that best explains reality; return its index.

        Default scorer (hypotheses that change the dynamics): roll the PREVIOUS
        state and applied control one step under every entry's dynamics (in
        ceil(dt / score_dt) substeps when ``score_dt`` is set) and compare with the
        measured state::

            x_next = solver.sim_forward(x_prev, u_prev, dt)   # (B, nx), per-entry wrench
            errors = ||x_next[b] - x_meas||                     # stored in last_errors
            best = argmin_b errors

        Args:
            solver: the gato.BSQP the batch runs on.
            result: this tick's SolveResult (unused by the default scorer;
                hypotheses that do not alter the dynamics override ``select`` and
                score from ``result.stats``, e.g. ``final_merit``).
            x_prev: (nx,) state at which ``u_prev`` was applied.
            u_prev: (nu,) control that was applied (solver control width).
            x_meas: (nx,) measured state now.
            dt: how long ``u_prev`` was applied [s].

        With ``batch_size == 1`` this returns 0 without rolling anything out.
        """
        B = int(self.batch_size)
        if B == 1:
            self.last_errors = np.zeros(1)
            return 0
        x_next = self._rollout(solver, x_prev, u_prev, dt)
        err = np.linalg.norm(x_next - np.asarray(x_meas, dtype=np.float64).reshape(1, -1), axis=1)
        err = np.where(np.isfinite(err), err, np.inf)
        self.last_errors = err
        return int(np.argmin(err))

    def _rollout(self, solver, x_prev, u_prev, dt) -> np.ndarray:
        """(B, nx): x_prev under u_prev for dt [s] through every entry's dynamics (the solver's
        integrator, in ceil(dt / score_dt) substeps when score_dt is set). A row whose rollout
        leaves the finite numbers comes back NaN (it scores +inf); the other rows go on (the
        solver refuses a non-finite state, so a diverged row is stepped from x_prev meanwhile)."""
        B = int(self.batch_size)
        x0 = np.repeat(np.asarray(x_prev, dtype=np.float64).reshape(1, -1), B, axis=0)
        x_next = x0
        up = np.repeat(np.asarray(u_prev, dtype=np.float64).reshape(1, -1), B, axis=0)
        n = 1 if self.score_dt is None else max(1, int(math.ceil(float(dt) / self.score_dt - 1e-9)))
        bad = np.zeros(B, dtype=bool)
        for _ in range(n):
            x_next = np.asarray(solver.sim_forward(np.where(bad[:, None], x0, x_next), up, float(dt) / n),
                                dtype=np.float64)
            bad |= ~np.all(np.isfinite(x_next), axis=1)
        x_next[bad] = np.nan
        return x_next

    @abstractmethod
    def update(self, best_id: int, errors) -> None:
        """Feed the selection outcome back into the hypothesis sampler.
        ``errors``: the (B,) scores of :meth:`select` (``last_errors``)."""

    def reset(self) -> None:
        """Forget sampler state (the controller calls this from ``reset``)."""
        self.last_errors = None

    def get_stats(self) -> dict:
        """Diagnostics reported as ``StepResult.hypo_stats`` (default: the last errors)."""
        return {"last_errors": None if self.last_errors is None else np.array(self.last_errors)}

    @property
    def sensor_identifier(self):
        """The wrench observer this batch wants fed at sensor rate (anything with
        ``identify(q, dq, dq_next, tau_applied, dt, q_next=)``; :func:`substep_observers`), or
        None (the default: the batch learns from its tick-rate :meth:`update` only)."""
        return None


# ----------------------------------------------------------------- wrench hypotheses
def _check_estimator(estimator, name="estimator") -> int:
    for attr in ("generate_batch", "update", "reset", "get_stats"):
        if not callable(getattr(estimator, attr, None)):
            raise ValueError(f"{name}: expected a gato.estimators sampler (generate_batch / update / reset / "
                             f"get_stats), got {type(estimator).__name__} (no {attr}())")
    B = getattr(estimator, "batch_size", None)
    if isinstance(B, bool) or not isinstance(B, (int, np.integer)) or B < 1:
        raise ValueError(f"{name}: batch_size must be an integer >= 1, got {B!r}")
    return int(B)


class _WrenchInjection:
    """World-axes EE wrenches -> the solver's f_ext band (the body-major (B, 6 * n_bodies) form
    of :meth:`gato.BSQP.set_f_ext_B`, so the frame's parent body gets it whichever body the
    solver's own EE frame is on)."""

    def __init__(self, model, ee_frame):
        for attr in ("nq", "frames", "existFrame", "createData"):
            if not hasattr(model, attr):
                raise ValueError(f"model: expected a pinocchio Model, got {type(model).__name__} (no {attr!r})")
        if not isinstance(ee_frame, str) or not model.existFrame(ee_frame):
            raise ValueError(f"ee_frame: the model has no frame named {ee_frame!r}")
        self.model, self.ee_frame = model, ee_frame
        self.data = model.createData()
        self.fid = int(model.getFrameId(ee_frame))
        self.body = int(model.frames[self.fid].parentJoint) - 1

    def program(self, solver, x, batch) -> np.ndarray:
        """Upload ``batch`` (B, 6) world wrenches re-expressed at q = x[:nq]; returns the
        (B, 6) joint-local slots [angular; linear] that were uploaded."""
        import pinocchio as pin

        m = self.model
        B = batch.shape[0]
        if int(getattr(solver, "batch_size", -1)) != B:
            raise ValueError(f"solver: batch_size {getattr(solver, 'batch_size', None)!r} differs from the "
                             f"hypotheses' {B}")
        xa = np.asarray(x, dtype=np.float64).reshape(-1)
        if xa.size < m.nq or not np.all(np.isfinite(xa[:m.nq])):
            raise ValueError(f"x: expected a finite state [q; qd] with nq = {m.nq} positions first")
        q = xa[:m.nq]
        pin.forwardKinematics(m, self.data, q)
        j = m.frames[self.fid].parentJoint
        oMj = self.data.oMi[j]
        lever = (oMj * m.frames[self.fid].placement).translation - oMj.translation
        R = oMj.rotation
        force, torque = batch[:, :3], batch[:, 3:]
        torque_j = torque + np.cross(lever[None, :], force)  # about the joint origin
        slots = np.concatenate([torque_j @ R, force @ R], axis=1)  # R^T v per row
        nb = int(solver.n_bodies()) if callable(getattr(solver, "n_bodies", None)) else None
        if nb is None or not 0 <= self.body < nb:
            solver.set_f_ext_B(slots)  # the solver's EE body
        else:
            band = np.zeros((B, 6 * nb))
            band[:, 6 * self.body:6 * self.body + 6] = slots
            solver.set_f_ext_B(band)
        return slots


    def knot_frames(self, xs) -> tuple:
        """Per knot of the (N, nq + nv) states ``xs``: the EE frame's world linear velocity (N, 3)
        [m/s], the EE parent joint's rotation (N, 3, 3) and the lever joint origin -> EE (N, 3) [m]."""
        import pinocchio as pin

        m, j = self.model, self.model.frames[self.fid].parentJoint
        N = xs.shape[0]
        vel, R, lever = np.zeros((N, 3)), np.zeros((N, 3, 3)), np.zeros((N, 3))
        for k in range(N):
            pin.forwardKinematics(m, self.data, xs[k, :m.nq], xs[k, m.nq:m.nq + m.nv])
            vel[k] = pin.getFrameVelocity(m, self.data, self.fid, pin.LOCAL_WORLD_ALIGNED).linear
            oMj = self.data.oMi[j]
            R[k] = oMj.rotation
            lever[k] = (oMj * m.frames[self.fid].placement).translation - oMj.translation
        return vel, R, lever

    def program_band(self, solver, band, R, lever) -> None:
        """Upload (B, N, 6) world wrenches, knot k re-expressed with rotation R[k] and lever[k]
        (:meth:`knot_frames` of the planned knots)."""
        B, N = band.shape[:2]
        slots = np.zeros((B, N, 6))
        for k in range(N):
            f, t = band[:, k, :3], band[:, k, 3:]
            slots[:, k] = np.concatenate([(t + np.cross(lever[k][None, :], f)) @ R[k], f @ R[k]], axis=1)
        nb = int(solver.n_bodies()) if callable(getattr(solver, "n_bodies", None)) else None
        if nb is None or not 0 <= self.body < nb:
            solver.set_f_ext_B(slots)
        else:
            full = np.zeros((B, N, 6 * nb))
            full[:, :, 6 * self.body:6 * self.body + 6] = slots
            solver.set_f_ext_B(full)


def planned_knots(plan, x, N, nq, nv) -> np.ndarray:
    """(N, nq + nv) knot states to predict along: ``plan`` (the last winning plan shifted one knot,
    or None) with knot 0 replaced by the measured ``x``; without a plan, x at every knot."""
    xa = np.asarray(x, dtype=np.float64).reshape(-1)[:nq + nv]
    if plan is None or plan.shape != (N, nq + nv):
        return np.repeat(xa[None, :], N, axis=0)
    xs = plan.copy()
    xs[0] = xa
    return xs


def winning_plan(solver, result, best, nq, nv):
    """The (N, nq + nv) knot states of row ``best`` of ``result.xu`` shifted one knot (the next
    tick's plan), or None when that row is not finite (or there is no result)."""
    from ..core.bsqp import shift_plan

    if result is None or getattr(result, "xu", None) is None:
        return None
    xu = np.asarray(result.xu, dtype=np.float64)
    nx, nu, N = int(solver.nx), int(solver.nu), int(solver.N)
    row = xu[best]
    if not np.all(np.isfinite(row)):
        return None
    plan = shift_plan(row, nx, nu, N)
    return np.stack([plan[k * (nx + nu):k * (nx + nu) + nx] for k in range(N)])[:, :nq + nv]


#: A hypothesis row with a component beyond this [N, N*m] or not finite has blown up (issue 32; the
#: ROS boundary refuses wrench estimates beyond the same bound): dropped, never applied.
WRENCH_BLOWUP = 1e6


def _check_batch(batch, B, name) -> tuple[np.ndarray, np.ndarray]:
    """(the (B, 6) batch with its blown-up rows replaced by the zero wrench (the nominal model, so
    the solver's row stays finite), the (B,) bool mask of those rows)."""
    b = np.asarray(batch, dtype=np.float64)
    if b.shape != (B, 6):
        raise ValueError(f"{name}: generate_batch() returned shape {b.shape}, expected ({B}, 6)")
    bad = ~np.all(np.isfinite(b) & (np.abs(b) <= WRENCH_BLOWUP), axis=1)
    return np.where(bad[:, None], 0.0, b), bad


class ForceHypothesisBatch(HypothesisBatch):
    """Wrench-disturbance hypotheses driven by a :mod:`gato.estimators` sampler.

    Each tick: ``apply`` asks the estimator for its (B, 6) WORLD-axes wrenches at the EE frame
    origin, re-expresses them in the EE parent joint's local frame at the measured q (the
    transform of :func:`world_wrench_to_gato_slot`) and uploads them with
    ``solver.set_f_ext_B`` (constant over the horizon); the default :meth:`select` scores every
    row by its one-step rollout error against the measured state; :meth:`update` hands the
    winner, the errors and the exact world batch they were scored under to the estimator.

    Args:
        estimator: duck-typed sampler — ``batch_size``, ``generate_batch() -> (B, 6)``,
            ``update(best, errors, batch_used)``, ``reset()``, ``get_stats()``
            (:class:`gato.estimators.ForceEstimator`, :class:`~gato.estimators.CEMForceEstimator`,
            :class:`~gato.estimators.IdentifiedWrenchSampler`, ...).
        model: the solver's pinocchio Model (robot only).
        ee_frame: URDF frame the wrenches act at (ValueError if the model lacks it).
        score_dt: keyword-only, the longest substep [s] of the scoring rollout (None: one
            solver-integrator step over the whole interval, the base class's scorer).
        centre_knots: keyword-only; with an estimator centred on an identifier that PREDICTS
            over the horizon (a ForceEstimator whose ``centre`` has ``predict(ee_vel, dt)``, e.g.
            a :class:`gato.swing.PendulumSwingEstimator`): True programs row b at knot k as
            ``row_b + (p_k - c)`` with p_k the centre's row-0 prediction for interval k with every
            knot at the measured state (the payload's own swing under the EE's present velocity,
            no planned acceleration; the last knot repeats the last interval) and c the centre's
            wrench now, re-expressed at the measured q, so the rows are the swing prediction plus
            each row's constant residual; the
            one-step scorer rolls each row as residual + the centre's prediction for the interval
            it scores (made at the apply before). False: the rows constant over the
            horizon. None (default): True exactly when the centre predicts. True without such a
            centre is a ValueError.
        scorer: keyword-only. "momentum" (default): :meth:`select`'s generalized-momentum
            residual at the interval's midpoint configuration. "rollout": the reference's
            selection, the base class's scorer ``argmin_b ||x_next[b] - x_meas||`` of the one-step
            rollout under the wrenches as programmed for the solve (with ``score_dt=None``: one
            step of dt, the reference's exactly). The default differs because the plain state
            norm favours what the light distal links feel and a sampler crawls along the heavy
            directions (docs/reference_differences.md).

    A row the estimator returns non-finite or beyond :data:`WRENCH_BLOWUP` (a prediction that
    blew up) is dropped: the solver's row solves the nominal model (zero wrench) and the row scores
    +inf, so it never wins while a row is left; when every row blew up, row 0 (nominal) commands.

    Attributes: ``batch_size`` (the estimator's), ``batch_used`` (B, 6) the world batch of the
    last apply (dropped rows zero), ``dropped`` (B,) bool the rows dropped at it, ``dropped_total``
    rows dropped since the reset, ``best_wrench`` (6,) the last winner's world wrench, ``band``
    (B, N, 6) the world wrenches per knot of the last apply (None when constant over the horizon).
    """

    #: Scoring substep [s]: 2 ms keeps the Euler error of the rollout well below the effect of
    #: a 10 N wrench on a 31 ms control period (one 31 ms step favoured a wrong wrench).
    score_dt = 0.002

    #: Selection rules of :meth:`select` ("rollout" = the reference's, the base class's scorer).
    SCORERS = ("momentum", "rollout")

    def __init__(self, estimator, model, ee_frame="EE", *, score_dt=0.002, centre_knots=None, scorer="momentum"):
        if scorer not in self.SCORERS:
            raise ValueError(f"scorer: expected one of {self.SCORERS}, got {scorer!r}")
        self.scorer = scorer
        self.batch_size = _check_estimator(estimator)
        centre = getattr(estimator, "centre", None)
        predicts = centre is not None and callable(getattr(centre, "predict", None))
        if centre_knots is not None and not isinstance(centre_knots, bool):
            raise ValueError(f"centre_knots: expected None, True or False, got {centre_knots!r}")
        if centre_knots and not predicts:
            raise ValueError("centre_knots: True needs an estimator whose centre predicts over the horizon "
                             f"(centre.predict); {type(estimator).__name__}'s centre is "
                             f"{type(centre).__name__ if centre is not None else None}")
        self.centre_knots = predicts if centre_knots is None else bool(centre_knots)
        if score_dt is not None and (isinstance(score_dt, bool) or not isinstance(score_dt, (int, float))
                                     or not math.isfinite(score_dt) or score_dt <= 0):
            raise ValueError(f"score_dt: expected a substep > 0 s or None (one step), got {score_dt!r}")
        self.score_dt = None if score_dt is None else float(score_dt)
        self.estimator = estimator
        self._inject = _WrenchInjection(model, ee_frame)
        self.model, self.ee_frame = model, ee_frame
        self.batch_used = None
        self.dropped, self.dropped_total = np.zeros(self.batch_size, dtype=bool), 0
        self.best_wrench = None
        self.last_errors = None
        self.band = None
        self._p0 = None  # centre_knots: the centre's prediction for interval 0 at the last apply (6,)
        self._score_offset = np.zeros(6)

    def apply(self, solver, x) -> None:
        """Program this tick's B world-axes wrench hypotheses (re-expressed at q = x[:nq]; with
        ``centre_knots`` knot by knot along the planned motion)."""
        self.batch_used, self.dropped = _check_batch(self.estimator.generate_batch(), self.batch_size, "estimator")
        self.dropped_total += int(self.dropped.sum())
        self.band = self._centre_band(solver, x) if self.centre_knots else None
        if self.band is None:
            self._inject.program(solver, x, self.batch_used)

    def _centre_band(self, solver, x):
        """Program and return the (B, N, 6) band of ``centre_knots``; None (nothing programmed)
        when the centre's prediction is not finite: the rows then stay constant for this tick."""
        m, N = self.model, int(solver.N)
        if int(getattr(solver, "batch_size", -1)) != self.batch_size:
            raise ValueError(f"solver: batch_size {getattr(solver, 'batch_size', None)!r} differs from the "
                             f"hypotheses' {self.batch_size}")
        # every knot at the measured state: the centre predicts the payload's own swing under the
        # EE's present velocity, not along this batch's plan (a plan made under these rows would
        # feed its own acceleration back into them; measured as is, docs/benchmarks_hypotheses.md)
        xs = planned_knots(None, x, 1, m.nq, m.nv)   # one knot: every knot is the same state
        if not np.all(np.isfinite(xs)):
            raise ValueError(f"x: expected a finite state [q; qd] with nq = {m.nq} positions first")
        vel, R, lever = (np.repeat(a, N, axis=0) for a in self._inject.knot_frames(xs))
        pred = np.asarray(self.estimator.centre.predict(vel, float(solver.dt)), dtype=np.float64)[0]  # (N - 1, 6)
        now = np.asarray(self.estimator.get_stats()["centre"], dtype=np.float64)
        if not (np.all(np.isfinite(pred)) and np.all(np.isfinite(now))):
            return None
        # the interval the next select() scores is the one the PREVIOUS apply predicted: rows are
        # scored as residual + that prediction (the residual is what the swing model misses)
        self._score_offset = np.zeros(6) if self._p0 is None else self._p0 - now
        self._p0 = pred[0].copy()
        offset = np.concatenate([pred, pred[-1:]], axis=0) - now[None, :]  # (N, 6)
        band = self.batch_used[:, None, :] + offset[None, :, :]
        self._inject.program_band(solver, band, R, lever)
        return band

    def select(self, solver, result, x_prev, u_prev, x_meas, dt) -> int:
        """Score every hypothesis by the torque it leaves unexplained; return the best index.

        Each row rolls x_prev under u_prev for dt (the solver's integrator in score_dt
        substeps, its wrench re-expressed at the interval's midpoint configuration
        q_mid = (q_prev + q_meas) / 2: the EE joint frame turns during the interval, and a
        wrench frozen in its final frame mis-scores by |w| times that angle). The error is
        the generalized-momentum residual ``||M(q_mid) (dq_b - dq_meas)|| / dt`` [N*m]: a wrench
        error dw leaves ``J^T dw`` of it, so every wrench direction weighs about evenly, where
        the plain state norm (``M^-1 J^T dw``) favours what the light distal links feel and a
        sampler crawls along the heavy directions. The next :meth:`apply` re-programs the band
        of the solve. ``last_errors`` (B,) [N*m]; a non-finite rollout scores +inf."""
        import pinocchio as pin

        B = int(self.batch_size)
        nq, nv = self.model.nq, self.model.nv
        if B == 1 or self.batch_used is None:
            self.last_errors = np.zeros(B)
            return 0
        if self.scorer == "rollout":
            super().select(solver, result, x_prev, u_prev, x_meas, dt)
            return self._drop_scores(self.last_errors)
        xp = np.asarray(x_prev, dtype=np.float64).reshape(-1)
        xm = np.asarray(x_meas, dtype=np.float64).reshape(-1)
        q_mid = 0.5 * (xp[:nq] + xm[:nq])
        # with centre_knots: residual + the centre's prediction for the interval scored (the same
        # offset for every row, so the winner is the residual's)
        scored = self.batch_used if self.band is None else self.batch_used + self._score_offset[None, :]
        self._inject.program(solver, q_mid, scored)
        x_next = self._rollout(solver, xp, u_prev, dt)
        M = pin.crba(self.model, self._inject.data, q_mid)
        M = np.triu(M) + np.triu(M, 1).T
        err = np.linalg.norm((x_next[:, nq:nq + nv] - xm[nq:nq + nv]) @ M, axis=1) / float(dt)
        return self._drop_scores(err)

    def _drop_scores(self, err) -> int:
        """+inf for a non-finite score and for the rows dropped at the apply; the best index."""
        err = np.where(np.isfinite(err) & ~self.dropped, err, np.inf)
        self.last_errors = err
        return int(np.argmin(err))

    def update(self, best_id, errors) -> None:
        """Feed the winner and the (B,) errors back to the estimator with the scored batch."""
        if self.batch_used is None:
            raise ValueError("best_id: update() before any apply(); no batch was scored")
        self.best_wrench = self.batch_used[int(best_id)].copy()
        self.estimator.update(int(best_id), errors, self.batch_used)

    def reset(self) -> None:
        super().reset()
        self.estimator.reset()
        self.batch_used = self.best_wrench = self.band = self._p0 = None
        self.dropped, self.dropped_total = np.zeros(self.batch_size, dtype=bool), 0
        self._score_offset = np.zeros(6)

    def get_stats(self) -> dict:
        """The estimator's stats plus last_errors (B,), best_wrench (6,) and batch (B, 6)."""
        st = dict(self.estimator.get_stats())
        st.update(super().get_stats())
        st["best_wrench"] = None if self.best_wrench is None else self.best_wrench.copy()
        st["batch"] = None if self.batch_used is None else self.batch_used.copy()
        st["dropped"], st["dropped_total"] = int(self.dropped.sum()), int(self.dropped_total)
        return st

    @property
    def sensor_identifier(self):
        """The estimator when it identifies too (gato.estimators.IdentifiedWrenchSampler), the
        ``centre`` identifier of a centred ForceEstimator, else None."""
        if callable(getattr(self.estimator, "identify", None)):
            return self.estimator
        centre = getattr(self.estimator, "centre", None)
        return centre if callable(getattr(centre, "identify", None)) else None


class IdentifiedWrenchBatch(HypothesisBatch):
    """B = 1 "batch": the wrench IDENTIFIED from the one-step motion residual.

    The same world -> solver frame transform and ``set_f_ext_B`` injection as
    :class:`ForceHypothesisBatch`, so an A/B against it isolates how the wrench is obtained
    (sampled and selected vs solved by least squares).

    The fit belongs at SENSOR rate: the driver calls ``identifier.identify(...)`` per
    measurement (gato.MPC_GATO does, per simulation substep). :meth:`select` (after the solve,
    with the tick's (x_prev, u_prev, x_meas, dt)) folds that tick-rate sample into the fit only
    when no sensor-rate sample arrived since the previous tick, so a caller without a sensor
    loop still gets an (coarser, one control period) estimate. Either way the estimate lands in
    the next :meth:`apply`: a one-tick lag inherent to any observer.

    Args:
        identifier: a :class:`gato.estimators.OneStepWrenchIdentifier` over the solver model
            (anything with ``generate_batch() -> (1, 6)``, ``identify``, ``reset``, ``get_stats``).
        model: the solver's pinocchio Model (robot only). ee_frame: the frame the wrench acts at.
        n_actuated: width of the applied-torque head of the control (None: the model's nv);
            controls beyond it (contact-force slots) are not applied torques and are dropped.
        tick_fit: keyword-only. True (default): :meth:`select` fits at tick rate when no
            sensor-rate sample arrived since the previous tick (above). False: :meth:`select` is
            the reference's no-op; the estimate then moves only with ``identifier.identify``
            called by the caller's sensor loop.

    An identification that blew up (non-finite, or beyond :data:`WRENCH_BLOWUP`) is never
    applied: that tick solves the nominal model (zero wrench), counted in ``dropped_total``.
    """

    batch_size = 1

    def __init__(self, identifier, model, ee_frame="EE", n_actuated=None, *, tick_fit=True):
        if not isinstance(tick_fit, bool):
            raise ValueError(f"tick_fit: expected True or False, got {tick_fit!r}")
        self.tick_fit = tick_fit
        B = _check_estimator(identifier, "identifier")
        if B != 1 or not callable(getattr(identifier, "identify", None)):
            raise ValueError(f"identifier: expected a gato.estimators.OneStepWrenchIdentifier (batch_size 1, "
                             f"identify()), got {type(identifier).__name__} with batch_size {B}")
        self.identifier = identifier
        self._inject = _WrenchInjection(model, ee_frame)
        self.model, self.ee_frame = model, ee_frame
        if n_actuated is None:
            n_actuated = model.nv
        if isinstance(n_actuated, bool) or not isinstance(n_actuated, (int, np.integer)) \
                or not 1 <= n_actuated <= model.nv:
            raise ValueError(f"n_actuated: expected an integer in [1, {model.nv}] or None, got {n_actuated!r}")
        self.n_actuated = int(n_actuated)
        self.last_errors = None
        self._seen = 0  # identifier.n_updates at the last select
        self.tick_fits = self.dropped_total = 0

    def apply(self, solver, x) -> None:
        """Program the current identified wrench (re-expressed at q = x[:nq])."""
        w, bad = _check_batch(self.identifier.generate_batch(), 1, "identifier")
        self.dropped_total += int(bad[0])      # a blown-up identification: the nominal model, never it
        self._inject.program(solver, x, w)

    def select(self, solver, result, x_prev, u_prev, x_meas, dt) -> int:
        """Returns 0 (one hypothesis). Fits (x_prev, u_prev) -> x_meas over dt only when the
        identifier got no sensor-rate sample since the previous tick (never with ``tick_fit=False``,
        the reference's no-op)."""
        self.last_errors = np.zeros(1)
        n = int(getattr(self.identifier, "n_updates", 0))
        if self.tick_fit and n == self._seen:
            nq, nv = self.model.nq, self.model.nv
            xp = np.asarray(x_prev, dtype=np.float64).reshape(-1)
            xm = np.asarray(x_meas, dtype=np.float64).reshape(-1)
            tau = np.zeros(nv)
            tau[:self.n_actuated] = np.asarray(u_prev, dtype=np.float64).reshape(-1)[:self.n_actuated]
            self.identifier.identify(xp[:nq], xp[nq:nq + nv], xm[nq:nq + nv], tau, dt, q_next=xm[:nq])
            self.tick_fits += 1
        self._seen = int(getattr(self.identifier, "n_updates", 0))
        return 0

    def update(self, best_id, errors) -> None:
        """No-op: the observation was folded into the fit by the sensor loop / :meth:`select`."""

    def reset(self) -> None:
        super().reset()
        self.identifier.reset()
        self._seen = 0
        self.tick_fits = self.dropped_total = 0

    def get_stats(self) -> dict:
        """The identifier's stats plus last_errors and tick_fits (fits made from the control period)."""
        st = dict(self.identifier.get_stats())
        st.update(super().get_stats())
        st["tick_fits"], st["dropped_total"] = self.tick_fits, self.dropped_total
        return st

    @property
    def sensor_identifier(self):
        """The identifier (fed per measurement; :meth:`select` fits only when it was not)."""
        return self.identifier
