"""Replayable cases: the worst ticks of a replay as one ``.npz`` a solver developer
can re-run anywhere (the "replayable .npz of (x, goals, xu_warm)" of a solver
discrepancy report), and the re-run itself.

Each case is a STANDALONE problem: a controller freshly built from the recorded
configuration, its warm start set to the recorded ``xu_warm``
(:meth:`gato.MPCController.set_warm_start`), then one ``step(x, goals)``. Solver state a
running controller carried (duals, ADMM multipliers) is not in the case, so the
standalone result can differ from what the robot ran; the file holds all three:

    u_recorded     what the controller commanded on the robot (clamped)    (K, nu) N*m
    u_replayed     the in-sequence replay of the bag                         (K, nu) N*m
    u_standalone   the standalone re-solve, computed when the file was made  (K, nu) N*m

and the plans behind them: ``xu_recorded`` (the robot's), ``xu_replayed`` (the in-sequence
replay's at that tick: the plan the discrepancy report compares, what ``gato replay --view``
draws beside the recorded one) and ``xu_standalone``.

``gato replay FILE.npz`` re-solves every case and compares with ``u_standalone``.

Arrays (K cases, nx = 2 nv, S = N (nx + nu) - nu): ``x`` (K, nx), ``goals`` (K, 6N),
``xu_warm`` (K, S), ``dt_elapsed`` (K,) [s] (0 = None), ``tick`` (K,), ``stamp_ns`` (K,),
``xu_recorded`` / ``xu_replayed`` / ``xu_standalone`` (K, S) (``xu_replayed``: NaN where the
replay kept no plan; absent from files of older gato), ``pred_err_torque`` (K, nv) [N*m]
(model residual at the tick, NaN where unknown), ``reason`` (K,) why each case was picked;
scalars (0-d): ``urdf_sha256``, ``robot``, ``module_name``, ``solver_params_json``,
``config_json``, ``gato_version``, ``joint_names`` (nv,). ``wrench_hypotheses`` (K, B, 6)
[N, N*m]: the external wrenches each tick solved under (world axes at the EE frame origin,
``hypotheses=estimator``; NaN where the tick had none), programmed into the standalone solve
too (a case file without the array: none). ``posture_q`` / ``posture_weight`` (K, N, nq) [rad,
1/rad^2]: the joint posture targets and weights each tick solved with (issue 31, a joint
trajectory or hold; NaN where the posture term was off), programmed into the standalone solve
too (a case file without the arrays: off). ``orientation_weight`` (K,) [1/rad^2]: the EE
orientation weight each tick solved with (issue 30; 0 = position only); where it is > 0, slots
[3:6] of the tick's ``goals`` are its target rotation vectors and the standalone solve is the
pose problem the controller ran (a ReferenceWindow on the solver's grid, as the in-sequence
replay hands it: :meth:`gato.replay.Tick.solver_reference`); a case file without the array: 0.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..planners import controller_setup as setup
from ..core.bsqp import module_name, robot_urdf
from ..core.references import ReferenceWindow
from ..planners.bsqp_planner import set_posture
from .resolve import _reference, install_wrenches

__all__ = ["standalone_solve", "write_cases", "rerun_cases"]

_KEYS = ("x", "goals", "xu_warm", "dt_elapsed", "tick", "stamp_ns", "u_recorded", "u_replayed", "u_standalone",
         "xu_recorded", "xu_standalone", "config_json", "urdf_sha256")


def standalone_solve(controller, x, goals, xu_warm, dt_elapsed=None, wrenches=None, robot=None, posture=None):
    """One standalone tick on ``controller`` (its solver state reset first), under the external
    wrench hypotheses ``wrenches`` (B, 6) of robot ``robot`` (None or NaN: none) and the joint
    posture ``posture`` = (targets, weights), each (N, nq) or (nq,) [rad, 1/rad^2] (None or NaN:
    the posture term off): returns (u clamped (nu,), xu_best (S,))."""
    s = controller.solver
    if wrenches is not None and not np.all(np.isfinite(wrenches)):
        wrenches = None
    install_wrenches(controller, wrenches, robot)
    if posture is None or not (np.all(np.isfinite(posture[0])) and np.all(np.isfinite(posture[1]))):
        set_posture(s, None, 0.0)
    else:
        set_posture(s, posture[0], posture[1])
    controller.reset(x)
    controller.set_warm_start(xu_warm)
    r = controller.step(x, goals, dt_elapsed or None)
    lim = np.asarray(s.limits["u"], dtype=np.float64).reshape(-1)
    return np.clip(np.asarray(r.u, dtype=np.float64), -lim, lim), np.asarray(r.xu_best, dtype=np.float64)


def case_reference(goals, orientation_weight, stamp_ns, dt):
    """The solver reference of a case: the flat (6N,) ``goals`` when ``orientation_weight`` is 0
    (position only), else the pose window the tick solved on (slots [3:6] its rotation vectors),
    built exactly as :meth:`gato.replay.Tick.solver_reference` builds it."""
    w = float(orientation_weight)
    if not w > 0:
        return np.asarray(goals, dtype=np.float64)
    a = np.asarray(goals, dtype=np.float64).reshape(-1, 6)
    return ReferenceWindow(int(stamp_ns), float(dt), a[:, :3].copy(), orientations=a[:, 3:].copy(),
                           orientation_weight=w)


def _posture_tables(solver, tk):
    """The tick's recorded posture (targets, weights), each spread to (N, nq), or None (off, or
    tables that do not fit the solver: the in-sequence replay notes those)."""
    pq, pw = getattr(tk, "posture_q", None), getattr(tk, "posture_weight", None)
    if pq is None or pw is None:
        return None
    shape = (int(solver.N), int(solver.nq))
    try:
        return tuple(np.array(np.broadcast_to(a, shape), dtype=np.float64) for a in (pq, pw))
    except ValueError:
        return None


def write_cases(path, recording, replay, indices, reasons, prediction_tau=None, *, urdf=None) -> Path:
    """Write the ticks ``indices`` of ``recording`` / ``replay`` as a case file (see the
    module docstring). ``replay``: per tick index ``u`` (nu,) and ``warm`` (S,), and optionally
    ``xu`` (S,) the in-sequence replay's plan. ``prediction_tau``: optional {tick stamp_ns: tau_res (nv,)}."""
    from ..core.version import __version__

    ticks = [recording.ticks[i] for i in indices]
    cfg = ticks[0].config
    urdf = urdf or robot_urdf(cfg["robot"])
    ctrl = setup.build_controller(cfg, urdf=urdf)
    nv = len(recording.joint_names)
    S = int(ctrl.solver.xu_size)
    nu = int(ctrl.solver.nu)
    arr = {k: [] for k in ("x", "goals", "xu_warm", "dt_elapsed", "tick", "stamp_ns", "u_recorded", "u_replayed",
                           "u_standalone", "xu_recorded", "xu_replayed", "xu_standalone", "pred_err_torque",
                           "config_json", "wrench_hypotheses", "posture_q", "posture_weight",
                           "orientation_weight")}
    B = int(ctrl.solver.batch_size)
    for i, tk in zip(indices, ticks):
        warm = tk.xu_warm[0] if tk.xu_warm is not None else replay.warm[i]
        if tk.config != cfg:
            ctrl = setup.build_controller(tk.config, urdf=urdf)
            cfg = tk.config
        w = getattr(tk, "wrench_hypotheses", None)
        post = _posture_tables(ctrl.solver, tk)
        ref = _reference(tk, float(ctrl.solver.dt))   # the pose window on a pose tick, as the replay solves it
        u_s, xu_s = standalone_solve(ctrl, tk.x, ref, warm, tk.dt_elapsed, w, cfg["robot"], post)
        arr["orientation_weight"].append(float(getattr(tk, "orientation_weight", 0.0)))
        arr["wrench_hypotheses"].append(np.full((B, 6), np.nan) if w is None or np.shape(w) != (B, 6) else w)
        nan = np.full((int(ctrl.solver.N), int(ctrl.solver.nq)), np.nan)
        arr["posture_q"].append(nan if post is None else post[0])
        arr["posture_weight"].append(nan if post is None else post[1])
        arr["x"].append(tk.x)
        arr["goals"].append(tk.reference)
        arr["xu_warm"].append(warm)
        arr["dt_elapsed"].append(tk.dt_elapsed or 0.0)
        arr["tick"].append(tk.tick)
        arr["stamp_ns"].append(tk.stamp_ns)
        arr["u_recorded"].append(tk.u_recorded if tk.u_recorded is not None else np.full(nu, np.nan))
        arr["u_replayed"].append(replay.u[i])
        arr["u_standalone"].append(u_s)
        arr["xu_recorded"].append(tk.xu_recorded if tk.xu_recorded is not None else np.full(S, np.nan))
        arr["xu_standalone"].append(xu_s)
        xu_r = getattr(replay, "xu", None)
        xu_r = None if xu_r is None else xu_r[i]
        arr["xu_replayed"].append(np.full(S, np.nan) if xu_r is None or np.shape(xu_r) != (S,) else xu_r)
        tau = (prediction_tau or {}).get(tk.stamp_ns)
        arr["pred_err_torque"].append(tau if tau is not None else np.full(nv, np.nan))
        arr["config_json"].append(json.dumps(tk.config, sort_keys=True))
    out = {k: np.asarray(v) for k, v in arr.items()}
    c0 = ticks[0].config
    out.update(reason=np.asarray(reasons, dtype=str), urdf_sha256=np.asarray(setup.urdf_sha256(urdf)),
               recorded_urdf_sha256=np.asarray(c0.get("urdf_sha256", "")), robot=np.asarray(c0["robot"]),
               module_name=np.asarray(module_name(c0["robot"], int(c0["N"]))),
               solver_params_json=np.asarray(json.dumps(ctrl.solver.params.asdict(), sort_keys=True,
                                                        default=str)),
               gato_version=np.asarray(__version__), joint_names=np.asarray(recording.joint_names, dtype=str))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **out)
    return path


def rerun_cases(path, *, tol: float = 1e-9, urdf=None) -> dict:
    """Re-solve every case of a case file standalone and compare with ``u_standalone``.

    Returns {"n", "max_du" (K,) N*m, "match" (K,) bool, "tol", "urdf_matches" bool,
    "robot", "ticks" (K,), "u" (K, nu) the new results, "u_standalone", "u_recorded"}.
    Raises FileNotFoundError for a missing file and ValueError for a file that is not a
    case file (the message names the missing arrays).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such case file")
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable .npz case file ({e})") from e
    missing = [k for k in _KEYS if k not in z.files]
    if missing:
        raise ValueError(f"{path}: not a gato replay case file (missing arrays {missing})")
    robot = str(z["robot"]) if "robot" in z.files else json.loads(str(z["config_json"][0]))["robot"]
    urdf = urdf or robot_urdf(robot)
    urdf_ok = setup.urdf_sha256(urdf) == str(z["urdf_sha256"])
    us, du = [], []
    ctrl, cfg = None, None
    for k in range(len(z["x"])):
        c = json.loads(str(z["config_json"][k]))
        if ctrl is None or c != cfg:
            ctrl, cfg = setup.build_controller(c, urdf=urdf), c
        w = z["wrench_hypotheses"][k] if "wrench_hypotheses" in z.files else None
        post = (z["posture_q"][k], z["posture_weight"][k]) if "posture_q" in z.files else None
        ow = float(z["orientation_weight"][k]) if "orientation_weight" in z.files else 0.0
        ref = case_reference(z["goals"][k], ow, int(z["stamp_ns"][k]), float(ctrl.solver.dt))
        u, _ = standalone_solve(ctrl, z["x"][k], ref, z["xu_warm"][k], float(z["dt_elapsed"][k]), w, robot, post)
        us.append(u)
        du.append(float(np.max(np.abs(u - z["u_standalone"][k]))))
    du = np.asarray(du)
    return {"n": len(du), "max_du": du, "match": du <= tol, "tol": tol, "urdf_matches": urdf_ok, "robot": robot,
            "ticks": z["tick"], "u": np.asarray(us), "u_standalone": z["u_standalone"],
            "u_recorded": z["u_recorded"]}
