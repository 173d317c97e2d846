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

A float64 solve is deterministic: with the same inputs, state and build, the
replayed command equals the recorded one bit for bit. Ticks cut short by a wall-clock
budget are re-solved with the iteration count they recorded instead of the budget.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import controller_setup as setup
from ..interface import robot_urdf

__all__ = ["TickReplay", "replay_ticks"]

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
    cfg = dict(ticks[0].config)
    urdf = urdf or robot_urdf(cfg["robot"])
    ctrl = setup.build_controller(cfg, urdf=urdf)
    s = ctrl.solver
    nu, S = int(s.nu), int(s.xu_size)
    lim = np.asarray(s.limits["u"], dtype=np.float64).reshape(-1)
    out = TickReplay(u=np.full((T, nu), np.nan), xu=np.full((T, S), np.nan), du=np.full(T, np.nan),
                     dplan=np.full(T, np.nan), dwarm=np.full(T, np.nan), wall_s=np.zeros(T),
                     anchored=np.zeros(T, dtype=bool), warm=np.full((T, S), np.nan), effort_limit=lim,
                     dstate=np.full(T, np.nan), state_anchored=np.zeros(T, dtype=bool))
    n_state = sum(tk.solver_state is not None for tk in ticks)
    if n_state == 0:
        out.notes.append("the bag carries no solver state (SolveInput without solver_state: recorded by an older "
                         "gato): solver duals, rho and ADMM state are the replay's own, so a bag that starts "
                         "mid-run replays approximately")
    elif n_state < T:
        out.notes.append(f"{T - n_state} of {T} ticks carry no solver state: their duals are the replay's own")
    bad_state = 0
    first = True
    for i, tk in enumerate(ticks):
        c = tk.config
        if c is not cfg and c != cfg:
            rebuild = [k for k in _READ_ONLY_REBUILD if c.get(k) != cfg.get(k)]
            if rebuild:
                out.notes.append(f"tick {tk.tick}: {rebuild} changed: the controller was rebuilt")
                ctrl = setup.build_controller(c, urdf=urdf)
                s = ctrl.solver
                first = True
            else:
                changes = {k: c[k] for k in setup.TUNABLE_KEYS if k in c and c.get(k) != cfg.get(k)}
                if changes:
                    setup.apply_tunables(ctrl, changes)
            cfg = dict(c)
        if tk.reset or first:
            ctrl.reset(tk.x)
            if tk.reset or tk.solver_state is None or tk.xu_warm is None:
                ctrl.warmup(tk.x, tk.reference)
            if not tk.reset:
                out.notes.append(f"tick {tk.tick}: the bag starts mid-run (no reset recorded): " + (
                    "the recorded warm start and solver state are installed here (exact continuation)"
                    if tk.solver_state is not None and tk.xu_warm is not None
                    else "replay starts with a reset and warm-up here"))
            first = False
        if tk.solver_state is not None:
            mine = ctrl.carried_state()
            rec_state = tk.solver_state
            if mine is not None and rec_state.shape[0] == 1 < mine["solver"].shape[0]:
                rec_state = np.repeat(rec_state, mine["solver"].shape[0], 0)
            out.dstate[i] = float("inf") if mine is None else _max_abs(mine["solver"], rec_state)
            same = (mine is not None and np.array_equal(mine["solver"], rec_state)
                    and mine["capped_out"] == tk.capped_out and mine["force_reseed"] == tk.force_reseed)
            if not same:
                try:
                    ctrl.set_carried_state({"solver": rec_state, "capped_out": tk.capped_out,
                                            "force_reseed": tk.force_reseed})
                    out.state_anchored[i] = True
                except ValueError as e:
                    bad_state += 1
                    if bad_state == 1:
                        out.notes.append(f"tick {tk.tick}: the recorded solver state does not fit the replay's "
                                         f"solver ({e}): not installed")
        warm = ctrl.xu_warm
        if tk.xu_warm is not None:
            rec = tk.xu_warm if tk.xu_warm.shape[0] == warm.shape[0] else np.repeat(tk.xu_warm[:1], warm.shape[0], 0)
            out.dwarm[i] = _max_abs(warm, rec)
            if not out.dwarm[i] <= warm_tol:
                ctrl.set_warm_start(rec)
                out.anchored[i] = True
        out.warm[i] = ctrl.xu_warm[0]
        iters_override = None
        if tk.budget_s and tk.iterations:
            # The recorded solve stopped on the wall clock: re-run the iterations it did.
            iters_override = int(s.params.max_sqp_iters)
            s.set_params(s.params.replace(max_sqp_iters=int(tk.iterations)))
        t0 = time.perf_counter()
        r = ctrl.step(tk.x, tk.reference, tk.dt_elapsed)
        out.wall_s[i] = time.perf_counter() - t0
        if iters_override is not None:
            s.set_params(s.params.replace(max_sqp_iters=iters_override))
        u = np.clip(np.asarray(r.u, dtype=np.float64), -lim, lim)
        out.u[i, :u.size] = u
        out.xu[i] = np.asarray(r.xu_best, dtype=np.float64)
        out.du[i] = _max_abs(u, tk.u_recorded)
        out.dplan[i] = _max_abs(out.xu[i], tk.xu_recorded)
        if progress is not None:
            progress(i + 1, T)
    n_st = int(out.state_anchored.sum())
    if n_st:
        out.notes.append(f"{n_st} ticks started from a solver state other than the recorded one; the recorded "
                         "one was installed for them")
    if bad_state > 1:
        out.notes.append(f"{bad_state} ticks' recorded solver states did not fit the replay's solver")
    n_anch = int(out.anchored.sum())
    if n_anch:
        out.notes.append(f"{n_anch} ticks started from a warm start other than the recorded one (beyond "
                         f"{warm_tol:g}); the recorded one was installed for them (solver duals kept)")
    return out
