"""Re-run a recording's MPC ticks offline with the same settings, in order.

The controller carries state from tick to tick (the shifted warm start, PCG / ADMM
duals, the capped-out flag), so ticks are re-solved in sequence through a controller
built from the recorded configuration (:func:`gato.controller_setup.build_controller`),
exactly as the node ran them: reset and warm-up where the node reset, the recorded
tunables applied where they changed, ``dt_elapsed`` as recorded. Each tick's warm
start is checked against the recorded one; where they differ (the bag starts
mid-run, a tick was lost) the recorded warm start is installed
(:meth:`gato.MPCController.set_warm_start`) and the tick is marked re-anchored.

The solver state a step starts from besides the warm start (Schur duals, trust-region
rho, ADMM (z, y) and rho scale, AL multipliers, the controller's cap-out / re-seed
flags) is recorded with each tick by newer controllers (SolveInput ``solver_state``).
Where it is there, it is compared the same way and installed where the replay's own
differs (:meth:`gato.MPCController.set_carried_state`): a bag that starts mid-run then
continues exactly from its first tick. Without it (an older controller) the replay
starts a mid-run bag from a reset and warm-up, and the commands differ by what the
state carried until the duals converge again.

The external-wrench hypotheses a tick solved under (``hypotheses=estimator``: the
controller's :class:`gato.hypotheses.ForceHypothesisBatch` over the estimator node's
estimate, recorded as SolveInput ``wrench_hypotheses``, (B, 6) world axes) are handed to
the replay's controller through the same batch class over :class:`RecordedWrenches`, so
the same wrenches are programmed (``set_f_ext_B`` at the measured q) and scored; a tick
without them runs the robot-only model (f_ext zeroed where a batch was installed before),
as the node does when the parameter is switched off. A bag of an older controller solved
with the estimator carries no wrenches: its ticks are replayed without them (noted).

The joint posture targets and weights a tick solved with (issue 31: the controller node
tracking a FollowJointTrajectory / JointTrajectory goal or a joint hold through the BSQP
posture term, recorded as SolveInput ``posture_q`` / ``posture_weight``, (rows, nq)) are
programmed into the replay's solver before the tick (before its reset and warm-up, as the node
does) through :func:`gato.planners.bsqp_planner.set_posture`, the node's own call; a tick
without them turns the term off where it was on, as the node does. A bag of an older
controller carries no posture fields: a tick that tracked joint targets then replays without
them and differs (noted when commands differ).

A float64 solve is deterministic: with the same inputs, state and build, the
replayed command equals the recorded one bit for bit. Ticks cut short by a wall-clock
budget are re-solved with the iteration count they recorded instead of the budget.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..planners import controller_setup as setup
from ..planners.bsqp_planner import set_posture
from ..core.bsqp import robot_info, robot_urdf

__all__ = ["TickReplay", "TickReplayer", "TickResult", "replay_ticks", "RecordedWrenches", "install_wrenches"]

_READ_ONLY_REBUILD = ("robot", "N", "dt", "batch_size", "warm_start")


@dataclass
class TickReplay:
    """Per-tick replay arrays (T = replayed ticks), solver joint order.

    ``u`` (T, nu) N*m replayed commands (clamped like the node's); ``xu`` (T, S) replayed
    winning plans; ``du`` (T,) max |u - u_recorded| [N*m] (NaN where nothing was
    recorded); ``dplan`` (T,) max |xu - xu_recorded| (NaN likewise); ``dwarm`` (T,) max
    |warm start - recorded warm start| before the tick (NaN when not recorded);
    ``wall_s`` (T,) replay step times [s]; ``anchored`` (T,) bool: the recorded warm
    start was installed; ``warm`` (T, S) the first row of the warm start each replayed
    step started from. ``dstate`` (T,) max |solver state - recorded| before the tick (NaN
    when not recorded, inf when the layouts differ); ``state_anchored`` (T,) bool: the
    recorded solver state was installed.
    """

    u: np.ndarray
    xu: np.ndarray
    du: np.ndarray
    dplan: np.ndarray
    dwarm: np.ndarray
    wall_s: np.ndarray
    anchored: np.ndarray
    warm: np.ndarray
    effort_limit: np.ndarray
    notes: list = field(default_factory=list)
    dstate: np.ndarray | None = None
    state_anchored: np.ndarray | None = None


def _max_abs(a, b) -> float:
    if a is None or b is None:
        return float("nan")
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


class RecordedWrenches:
    """The :mod:`gato.estimators` sampler contract (``batch_size``, ``generate_batch``,
    ``update``, ``reset``, ``get_stats``) handing back recorded wrenches: ``batch`` (B, 6)
    world axes at the EE frame origin [N, N*m], set per tick by the replay. ``update`` and
    ``reset`` change nothing (the recording decides every tick's wrenches)."""

    def __init__(self, batch_size: int):
        self.batch_size = int(batch_size)
        self.batch = np.zeros((self.batch_size, 6))

    def set(self, batch) -> None:
        """This tick's (B, 6) wrenches; ValueError when the shape is not (batch_size, 6)."""
        b = np.asarray(batch, dtype=np.float64)
        if b.shape != (self.batch_size, 6):
            raise ValueError(f"wrench_hypotheses: shape {b.shape}, expected ({self.batch_size}, 6) (the solver's "
                             "batch size)")
        self.batch = b.copy()

    def generate_batch(self) -> np.ndarray:
        return self.batch.copy()

    def update(self, best_idx, prediction_errors, batch_used=None) -> None:
        pass

    def reset(self) -> None:
        pass

    def get_stats(self) -> dict:
        return {"batch": self.batch.copy()}


def install_wrenches(ctrl, wrenches, robot: str, current=None):
    """Make ``ctrl`` (a gato.MPCController) solve its next step under ``wrenches`` (B, 6) world
    axes at the EE frame origin (recorded ``wrench_hypotheses``) through a
    :class:`gato.hypotheses.ForceHypothesisBatch` over :class:`RecordedWrenches` (the batch class
    and settings of the node's ``hypotheses=estimator``), or, for None, without wrench
    hypotheses (the solver's f_ext zeroed where a batch was installed). ``current``: the
    (sampler, batch) pair a previous call returned for the same controller (kept, so the
    batch's state carries over as in the node). Returns the pair in use (or ``current``).
    ValueError when ``wrenches`` is not (batch_size, 6)."""
    s = ctrl.solver
    B = int(s.batch_size)
    if wrenches is None:
        if ctrl.hypotheses is not None:
            ctrl.hypotheses = None
            nb = int(s.n_bodies()) if callable(getattr(s, "n_bodies", None)) else 1
            s.set_f_ext_B(np.zeros((B, 6 * nb)))
        return current
    if current is None or current[0].batch_size != B:
        from ..wrench.hypotheses import ForceHypothesisBatch

        sampler = RecordedWrenches(B)
        current = (sampler, ForceHypothesisBatch(sampler, s.model, robot_info(robot)["ee_frame"]))
    current[0].set(wrenches)
    if ctrl.hypotheses is not current[1]:
        ctrl.hypotheses = current[1]
    return current


class TickReplayer:
    """Re-solves ticks one at a time, in order (what :func:`replay_ticks` does for a whole
    recording; ``gato replay`` streams a bag through it).

    ``step(tk)`` returns a :class:`TickResult`; ``notes`` collects what happened (rebuilds,
    mid-run starts, solver states that did not fit); :meth:`finish` adds the totals.
    Raises ValueError from the constructor when the first configuration cannot be built.
    """

    def __init__(self, config: dict, *, urdf=None, warm_tol: float = 1e-9):
        self.cfg = dict(config)
        self.urdf = urdf or robot_urdf(self.cfg["robot"])
        self.ctrl = setup.build_controller(self.cfg, urdf=self.urdf)
        s = self.ctrl.solver
        self.nu, self.S = int(s.nu), int(s.xu_size)
        self.effort_limit = np.asarray(s.limits["u"], dtype=np.float64).reshape(-1)
        self.warm_tol = warm_tol
        self.notes: list = []
        self.bad_state = 0
        self.first = True
        self.n = self.n_state = self.n_state_anchored = self.n_anchored = 0
        self._wrenches = None      # (RecordedWrenches, its ForceHypothesisBatch) for self.ctrl
        self.n_wrench = self.n_wrench_missing = self.bad_wrench = 0
        self._posture_on = False   # the replay's solver has a posture term programmed (as the node's _posture_on)
        self.n_posture = self.bad_posture = 0

    def _sync_posture(self, tk) -> None:
        """Program the tick's recorded joint posture targets and weights (or turn the term off where
        it was on), as the node's ControllerLogic did before the step (gato_ros.controller_ticks)."""
        q, w = getattr(tk, "posture_q", None), getattr(tk, "posture_weight", None)
        if q is not None:
            try:
                set_posture(self.ctrl.solver, q[0] if q.shape[0] == 1 else q, w[0] if w.shape[0] == 1 else w)
            except (ValueError, TypeError) as e:
                self.bad_posture += 1
                if self.bad_posture == 1:
                    self.notes.append(f"tick {tk.tick}: the recorded posture tables do not fit the replay's "
                                      f"solver ({e}): replayed without the posture term")
                self._posture_on = True    # a setter may have taken its half: turn the term off below
            else:
                self.n_posture += 1
                self._posture_on = True
                return
        if self._posture_on:
            set_posture(self.ctrl.solver, None, 0.0)
            self._posture_on = False

    def _sync_wrenches(self, tk) -> None:
        """Install the tick's recorded wrench hypotheses (or none), as the node's
        ``hypotheses`` parameter did between ticks (gato_ros.controller_logic)."""
        w = tk.wrench_hypotheses
        B = int(self.ctrl.solver.batch_size)
        if w is not None and np.asarray(w).shape != (B, 6):
            self.bad_wrench += 1
            if self.bad_wrench == 1:
                self.notes.append(f"tick {tk.tick}: the recorded wrench hypotheses have shape {np.asarray(w).shape}, "
                                  f"not ({B}, 6) (the solver's batch size): replayed without them")
            w = None
        if w is None and tk.config.get("hypotheses", "none") != "none":
            self.n_wrench_missing += 1
        self.n_wrench += w is not None
        self._wrenches = install_wrenches(self.ctrl, w, self.cfg["robot"], self._wrenches)

    def step(self, tk) -> "TickResult":
        """Re-solve tick ``tk`` (a :class:`gato.replay.Tick`) after the previous ones."""
        ctrl, cfg, out = self.ctrl, self.cfg, self.notes
        s = ctrl.solver
        lim = self.effort_limit
        r = TickResult(u=np.full(self.nu, np.nan))
        c = tk.config
        if c is not cfg and c != cfg:
            rebuild = [k for k in _READ_ONLY_REBUILD if c.get(k) != cfg.get(k)]
            if rebuild:
                out.append(f"tick {tk.tick}: {rebuild} changed: the controller was rebuilt")
                ctrl = self.ctrl = setup.build_controller(c, urdf=self.urdf)
                s = ctrl.solver
                self.first = True
                self._wrenches = None
                self._posture_on = False
            else:
                changes = {k: c[k] for k in setup.TUNABLE_KEYS if k in c and c.get(k) != cfg.get(k)}
                if changes:
                    setup.apply_tunables(ctrl, changes)
            self.cfg = dict(c)
        self._sync_wrenches(tk)
        self._sync_posture(tk)
        if tk.reset or self.first:
            ctrl.reset(tk.x)
            if tk.reset or tk.solver_state is None or tk.xu_warm is None:
                ctrl.warmup(tk.x, _reference(tk, s.dt))
            if not tk.reset:
                out.append(f"tick {tk.tick}: the bag starts mid-run (no reset recorded): " + (
                    "the recorded warm start and solver state are installed here (exact continuation)"
                    if tk.solver_state is not None and tk.xu_warm is not None
                    else "replay starts with a reset and warm-up here"))
            self.first = False
        if tk.solver_state is not None:
            self.n_state += 1
            mine = ctrl.carried_state()
            rec_state = tk.solver_state
            if mine is not None and rec_state.shape[0] == 1 < mine["solver"].shape[0]:
                rec_state = np.repeat(rec_state, mine["solver"].shape[0], 0)
            r.dstate = float("inf") if mine is None else _max_abs(mine["solver"], rec_state)
            same = (mine is not None and np.array_equal(mine["solver"], rec_state)
                    and mine["capped_out"] == tk.capped_out and mine["force_reseed"] == tk.force_reseed)
            if not same:
                try:
                    ctrl.set_carried_state({"solver": rec_state, "capped_out": tk.capped_out,
                                            "force_reseed": tk.force_reseed})
                    r.state_anchored = True
                    self.n_state_anchored += 1
                except ValueError as e:
                    self.bad_state += 1
                    if self.bad_state == 1:
                        out.append(f"tick {tk.tick}: the recorded solver state does not fit the replay's "
                                   f"solver ({e}): not installed")
        warm = ctrl.xu_warm
        if tk.xu_warm is not None:
            rec = tk.xu_warm if tk.xu_warm.shape[0] == warm.shape[0] else np.repeat(tk.xu_warm[:1], warm.shape[0], 0)
            r.dwarm = _max_abs(warm, rec)
            if not r.dwarm <= self.warm_tol:
                ctrl.set_warm_start(rec)
                r.anchored = True
                self.n_anchored += 1
        r.warm = np.array(ctrl.xu_warm[0], dtype=np.float64)
        iters_override = None
        if tk.budget_s and tk.iterations:
            # The recorded solve stopped on the wall clock: re-run the iterations it did.
            iters_override = int(s.params.max_sqp_iters)
            s.set_params(s.params.replace(max_sqp_iters=int(tk.iterations)))
        t0 = time.perf_counter()
        res = ctrl.step(tk.x, _reference(tk, s.dt), tk.dt_elapsed)
        r.wall_s = time.perf_counter() - t0
        if iters_override is not None:
            s.set_params(s.params.replace(max_sqp_iters=iters_override))
        u = np.clip(np.asarray(res.u, dtype=np.float64), -lim, lim)
        r.u[:u.size] = u
        r.xu = np.asarray(res.xu_best, dtype=np.float64).copy()
        r.du = _max_abs(u, tk.u_recorded)
        r.dplan = _max_abs(r.xu, tk.xu_recorded)
        self.n += 1
        return r

    def finish(self) -> list:
        """The notes, with the totals (solver state, installed states and warm starts)."""
        T, n_state = self.n, self.n_state
        head = []
        if n_state == 0:
            head.append("the bag carries no solver state (SolveInput without solver_state: recorded by an older "
                        "gato): solver duals, rho and ADMM state are the replay's own, so a bag that starts "
                        "mid-run replays approximately")
        elif n_state < T:
            head.append(f"{T - n_state} of {T} ticks carry no solver state: their duals are the replay's own")
        self.notes[:0] = head
        if self.n_state_anchored:
            self.notes.append(f"{self.n_state_anchored} ticks started from a solver state other than the recorded "
                              "one; the recorded one was installed for them")
        if self.n_wrench_missing:
            self.notes.append(f"{self.n_wrench_missing} ticks ran with wrench hypotheses (hypotheses="
                              "estimator) but carry no recorded wrenches (SolveInput of an older controller): "
                              "replayed under the robot-only model, so their commands differ from the recorded ones")
        if self.bad_posture > 1:
            self.notes.append(f"{self.bad_posture} ticks' recorded posture tables did not fit the replay's solver")
        if self.bad_state > 1:
            self.notes.append(f"{self.bad_state} ticks' recorded solver states did not fit the replay's solver")
        if self.n_anchored:
            self.notes.append(f"{self.n_anchored} ticks started from a warm start other than the recorded one "
                              f"(beyond {self.warm_tol:g}); the recorded one was installed for them (solver duals "
                              "kept)")
        return self.notes


@dataclass
class TickResult:
    """One re-solved tick (see :class:`TickReplay` for the fields; ``warm`` / ``xu`` (S,))."""

    u: np.ndarray
    xu: np.ndarray | None = None
    du: float = float("nan")
    dplan: float = float("nan")
    dwarm: float = float("nan")
    dstate: float = float("nan")
    wall_s: float = 0.0
    anchored: bool = False
    state_anchored: bool = False
    warm: np.ndarray | None = None


def replay_ticks(recording, *, urdf=None, warm_tol: float = 1e-9, progress=None) -> TickReplay:
    """Re-solve every tick of ``recording`` (a :class:`gato.replay.Recording`) in order.

    Args:
        urdf: URDF to solve with (default: the registered robot's, whose SHA-256 is
            compared with the recorded one by the caller).
        warm_tol: largest |replay warm start - recorded| accepted without re-anchoring.
        progress: optional callback(done, total).
    Returns a :class:`TickReplay`. Raises ValueError when the configuration cannot be
    built (the message names the parameter).
    """
    ticks = recording.ticks
    T = len(ticks)
    if T == 0:
        raise ValueError("no ticks to replay")
    rp = TickReplayer(ticks[0].config, urdf=urdf, warm_tol=warm_tol)
    S, nu = rp.S, rp.nu
    out = TickReplay(u=np.full((T, nu), np.nan), xu=np.full((T, S), np.nan), du=np.full(T, np.nan),
                     dplan=np.full(T, np.nan), dwarm=np.full(T, np.nan), wall_s=np.zeros(T),
                     anchored=np.zeros(T, dtype=bool), warm=np.full((T, S), np.nan), effort_limit=rp.effort_limit,
                     dstate=np.full(T, np.nan), state_anchored=np.zeros(T, dtype=bool))
    for i, tk in enumerate(ticks):
        r = rp.step(tk)
        out.u[i], out.xu[i], out.warm[i] = r.u, r.xu, r.warm
        out.du[i], out.dplan[i], out.dwarm[i], out.dstate[i] = r.du, r.dplan, r.dwarm, r.dstate
        out.wall_s[i], out.anchored[i], out.state_anchored[i] = r.wall_s, r.anchored, r.state_anchored
        if progress is not None:
            progress(i + 1, T)
    out.notes = rp.finish()
    return out


def _reference(tk, dt: float):
    """The tick's reference as the controller handed it to the solver
    (:meth:`gato.replay.Tick.solver_reference`); a tick-like object without it (a test's, an
    older caller's) is position only: its flat reference."""
    f = getattr(tk, "solver_reference", None)
    return tk.reference if f is None else f(dt)
