"""Arm tasks sized to the URDF limits: figure-8 tracking and pick-and-place scenarios.

A reference that asks for several times the joint velocity limit has no
feasible tracking solution; the limit rows then only decide how the plan
fails. The tasks here are scaled from the limits instead: :func:`feasible_fig8`
sets the figure-8 period so the joint speed the path demands is a chosen
fraction ``ratio`` of the URDF velocity limit (below 1 the arm can follow;
above 1 the limits must bind), with a differential-IK pass along the path as
the estimate of the demanded joint speed. :func:`fig8_scenarios` and
:func:`pickplace_scenarios` draw seeded scenario sets around each plant's
workspace (``np.random.default_rng(seed)``: the same seed gives identical
output).

Time convention: a scenario's ``dt`` [s] is BOTH the sampling interval of its
reference and the knot spacing of the solver that tracks it; knot k of an
N-knot MPC window started at time t is reference sample floor(t / dt) + k.

Everything here is numpy plus pinocchio (imported inside the functions); no
solver, no GPU. Positions in metres (world frame), angles in rad.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.references import Figure8, orientations_of
from ..robots.registry import shipped_registry

__all__ = [
    "Q_MARGIN", "Q_READY", "CENTRE_OF_RECORD", "FIG8_AMPLITUDE", "FIG8_DEFAULT_PARAMS", "GOAL_BOX",
    "ee_frame_of", "urdf_limits", "ik_track", "within_q_limits", "joint_speed_ratio", "figure8",
    "fig8_path", "feasible_fig8", "fig8_scenarios", "pickplace_scenarios", "fig8_reference",
]

#: Clearance [rad] an IK path must keep from the URDF position limits (the solver's limit rows sit 0.1 inside).
Q_MARGIN = 0.15

#: Per-plant ready pose [rad], the registry's ``q_ready`` (gato/robots/_registry.json, the one copy): EE in front
#: of the base at mid height, tool pointing down (gen3: tilted 9 deg), position-Jacobian singular values
#: >= 0.28 m/rad (condition <= 2.7), >= 0.4 rad inside limits.
Q_READY = {name: np.array(meta["q_ready"], dtype=np.float64)
           for name, meta in shipped_registry().items() if "q_ready" in meta}

#: Per-plant centre of record [m]: the EE-frame position at Q_READY, rounded to the centimetre.
#: Figure-8 centres are drawn within 0.1 m of it; the goal boxes are centred on it.
CENTRE_OF_RECORD = {
    "iiwa14": np.array([0.62, 0.0, 0.46]),
    "indy7": np.array([0.51, -0.01, 0.39]),
    "fr3": np.array([0.31, 0.0, 0.49]),
    "gen3": np.array([0.50, 0.0, 0.40]),
    "ur5e": np.array([0.49, 0.13, 0.49]),
}

#: Per-plant (min, max) figure-8 half-amplitude [m]; A_x and A_z are drawn independently in it.
FIG8_AMPLITUDE = {
    "iiwa14": (0.10, 0.20),
    "indy7": (0.08, 0.15),
    "fr3": (0.08, 0.15),
    "gen3": (0.08, 0.15),
    "ur5e": (0.08, 0.15),
}

#: figure8() defaults: half-amplitudes [m], centre (None = the EE position at the start pose),
#: plane rotation about world z [rad], nominal period [s] (feasible_fig8 replaces it), cycles.
FIG8_DEFAULT_PARAMS = dict(A_x=0.15, A_z=0.10, offset=None, theta=0.0, period=4.0, cycles=1)

#: Per-plant pick-and-place goal box [m]: (lower xyz, upper xyz), centred on CENTRE_OF_RECORD.
GOAL_BOX = {
    p: (c - np.array([0.12, 0.18, 0.12]), c + np.array([0.12, 0.18, 0.12])) for p, c in CENTRE_OF_RECORD.items()
}

_JITTER = 0.05  # rad, uniform jitter of start poses around Q_READY
_CENTRE_RADIUS = 0.1  # m, figure-8 centres within this distance of the centre of record
_GOAL_IK_ITERS = 100  # DLS updates for a single goal point (up to ~0.3 m from the ready pose)


def ee_frame_of(plant: str) -> str:
    """The plant's registered end-effector frame name (the fixed joint the solver's FK targets)."""
    from ..core.bsqp import robot_info

    info = robot_info(plant)
    if not info:
        from ..robots.registry import all_robots

        raise ValueError(f"plant: unknown robot {plant!r}; registered: {sorted(all_robots())}")
    return info["ee_frame"]


def urdf_limits(model) -> dict:
    """URDF <limit> tags of a pinocchio model: {'q_lo', 'q_hi' (nq,) rad, 'qd' (nv,) rad/s, 'u' (nv,) N*m}."""
    return dict(q_lo=np.array(model.lowerPositionLimit, dtype=np.float64),
                q_hi=np.array(model.upperPositionLimit, dtype=np.float64),
                qd=np.array(model.velocityLimit, dtype=np.float64),
                u=np.array(model.effortLimit, dtype=np.float64))


def _frame_id(model, ee_frame) -> int:
    if isinstance(ee_frame, (int, np.integer)):
        if not 0 <= int(ee_frame) < model.nframes:
            raise ValueError(f"ee_frame: frame id {ee_frame} out of range (model has {model.nframes} frames)")
        return int(ee_frame)
    if not model.existFrame(ee_frame):
        raise ValueError(f"ee_frame: frame {ee_frame!r} not found in model {model.name!r}")
    return int(model.getFrameId(ee_frame))


def _ee_pos(model, data, fid: int, q) -> np.ndarray:
    import pinocchio as pin

    pin.forwardKinematics(model, data, q)
    return pin.updateFramePlacement(model, data, fid).translation.copy()


def ik_track(model, ee_frame, q0, path_xyz, *, first_iters=60, damping=0.02, max_step=0.2, path_rotvec=None):
    """Differential IK along an end-effector position (or pose) path.

    Damped least squares on the frame's position Jacobian (world-aligned),
    dq = J^T (J J^T + damping^2 I)^-1 e, one update per path point; the first
    point gets ``first_iters`` updates so the path starts converged. Each update
    is scaled down to at most ``max_step`` rad on any joint, so an unreachable
    target leaves a large error instead of a diverging configuration. No joint
    limits are imposed (check them with :func:`within_q_limits`).

    Args:
        model: pinocchio Model; ee_frame: frame name or id; q0: (nq,) start [rad];
        path_xyz: (T, 3) world positions [m]; path_rotvec: None, or (T, 3) target orientations
            (rotation vectors, world frame [rad]): a pose path, the 6-D error [position;
            log(R_target R^T)] on the frame's full world-aligned Jacobian (issue 30).

    Returns:
        (q, err): joint positions (T, nq) [rad] and the position error after each
        point's update(s) (T,) [m].
    """
    import pinocchio as pin

    first_iters = _int(first_iters, "first_iters", 1)
    damping = _num(damping, "damping", lo=0.0)
    max_step = _num(max_step, "max_step", lo=0.0, lo_open=True)
    data = model.createData()
    fid = _frame_id(model, ee_frame)
    path = np.asarray(path_xyz, dtype=np.float64).reshape(-1, 3)
    q = np.array(q0, dtype=np.float64).reshape(model.nq)
    qs = np.empty((len(path), model.nq))
    err = np.empty(len(path))
    rots = None if path_rotvec is None else [pin.exp3(r) for r in orientations_of(path_rotvec, "path_rotvec", len(path))]
    rows = 3 if rots is None else 6
    lam2 = float(damping) ** 2 * np.eye(rows)
    for k, target in enumerate(path):
        for _ in range(int(first_iters) if k == 0 else 1):
            J = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)[:rows]
            e = target - data.oMf[fid].translation
            if rots is not None:
                e = np.concatenate([e, pin.log3(rots[k] @ data.oMf[fid].rotation.T)])
            dq = J.T @ np.linalg.solve(J @ J.T + lam2, e)
            peak = np.max(np.abs(dq))
            if peak > max_step:
                dq *= max_step / peak
            q = pin.integrate(model, q, dq)
        qs[k] = q
        err[k] = np.linalg.norm(target - _ee_pos(model, data, fid, q))
    return qs, err


def within_q_limits(model, qs, margin=Q_MARGIN) -> bool:
    """True when every configuration in ``qs`` (T, nq) (or one (nq,)) is at least ``margin`` rad inside
    the URDF position limits (the limit rows sit 0.1 rad inside; a path along the limit is not a
    velocity-limit task)."""
    margin = _num(margin, "margin")
    qs = np.atleast_2d(np.asarray(qs, dtype=np.float64))
    lim = urdf_limits(model)
    return bool(np.all(qs >= lim["q_lo"] + margin) and np.all(qs <= lim["q_hi"] - margin))


def joint_speed_ratio(model, ee_frame, q0, path_xyz, dt):
    """Peak demanded joint speed along the IK path as a fraction of the URDF velocity limit.

    Args: model, ee_frame, q0 (nq,) as :func:`ik_track`; path_xyz (T, 3) [m] sampled every dt [s].

    Returns:
        (ratio, ik_err_max, within): max over points and joints of |qd_j| / qd_lim_j with
        qd the finite difference of consecutive IK solutions (the first point is converged,
        so the reach from q0 is not counted); the largest IK position error [m]; and
        whether the IK path keeps :data:`Q_MARGIN` from the position limits.
    """
    qs, err = ik_track(model, ee_frame, q0, path_xyz)
    qd = np.diff(qs, axis=0) / float(dt)
    ratio = float(np.max(np.abs(qd) / urdf_limits(model)["qd"])) if len(qs) > 1 else 0.0
    return ratio, float(np.max(err)), within_q_limits(model, qs, Q_MARGIN)


def figure8(dt, A_x, A_z, offset, theta, period, cycles=1) -> np.ndarray:
    """Figure-8 (Gerono lemniscate) in a vertical plane, sampled every dt.

    p(t) = offset + A_x sin(w t) h + A_z sin(2 w t) z,  w = 2 pi / period,
    h = (cos theta, sin theta, 0) the plane's horizontal axis (theta = 0: the x-z
    plane), z the world vertical. The curve starts at its crossing point, the
    centre ``offset``; one period traces both lobes.

    Args:
        dt: sample interval [s]; A_x, A_z: horizontal / vertical half-amplitudes [m];
        offset: (3,) centre [m]; theta: plane rotation about world z [rad];
        period: one full figure-8 [s]; cycles: number of periods (may be fractional).

    Returns:
        (T, 3) positions [m] at t = k dt, k = 0 .. T-1, T = round(cycles * period / dt)
        (the end point of the last cycle is not repeated).
    """
    if not (dt > 0 and period > 0 and cycles > 0):
        raise ValueError(f"figure8: dt, period and cycles must be > 0 (got {dt}, {period}, {cycles})")
    T = max(int(round(cycles * period / dt)), 1)
    return Figure8(offset, A_x, A_z, theta, period).positions(np.arange(T) * float(dt))


def fig8_path(params, dt) -> np.ndarray:
    """(T, 3) positions [m] of :func:`figure8` (dt, **params); params needs A_x, A_z, offset,
    theta, period and optionally cycles (default 1)."""
    p = dict(params)
    return figure8(dt, p["A_x"], p["A_z"], p["offset"], p["theta"], p["period"], p.get("cycles", 1))


def feasible_fig8(model, ee_frame, q0, dt, *, ratio=0.8, cycles=1, **fig8_params) -> dict:
    """Figure-8 parameters whose period makes the demanded peak joint speed ``ratio`` x the limit.

    ``fig8_params`` override :data:`FIG8_DEFAULT_PARAMS` (A_x, A_z, offset, theta; the period given
    is only the nominal one of the first estimate; ``offset=None`` centres the figure on the EE
    position at q0). One IK pass at the nominal period measures the ratio r0; the joint speed of
    a fixed path scales with 1/period, so period = nominal * r0 / ratio; a second IK pass at the
    new period gives the estimate returned.

    Returns dict(params, ratio_est, ik_err_max, within_q_limits): the parameters (offset as an
    (3,) array, period [s], cycles), the rescaled estimate, the IK reach error along the path [m]
    (large: not reachable) and whether the IK path keeps Q_MARGIN inside the position limits.
    """
    if not ratio > 0:
        raise ValueError(f"ratio: expected > 0, got {ratio!r}")
    cycles = _int(cycles, "cycles", 1)
    unknown = set(fig8_params) - set(FIG8_DEFAULT_PARAMS)
    if unknown:
        raise ValueError(f"fig8_params: unknown keys {sorted(unknown)}; expected {sorted(FIG8_DEFAULT_PARAMS)}")
    params = {**FIG8_DEFAULT_PARAMS, **fig8_params, "cycles": cycles}
    if params["offset"] is None:
        params["offset"] = _ee_pos(model, model.createData(), _frame_id(model, ee_frame),
                                   np.asarray(q0, dtype=np.float64))
    params["offset"] = np.asarray(params["offset"], dtype=np.float64).reshape(3)
    # The speed estimate needs one cycle only; the path repeats.
    r0, _, _ = joint_speed_ratio(model, ee_frame, q0, fig8_path({**params, "cycles": 1}, dt), dt)
    if not r0 > 0:
        raise ValueError("feasible_fig8: the path demands no joint motion (zero amplitude?)")
    params["period"] = float(params["period"]) * r0 / float(ratio)
    r1, err, within = joint_speed_ratio(model, ee_frame, q0, fig8_path({**params, "cycles": 1}, dt), dt)
    return dict(params=params, ratio_est=r1, ik_err_max=err, within_q_limits=within)


def _num(v, name: str, *, lo=None, lo_open=False) -> float:
    """``v`` as a finite float (>= lo, or > lo with lo_open); ValueError naming ``name``."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not math.isfinite(v) or (lo is not None and (v <= lo if lo_open else v < lo)):
        bound = "" if lo is None else f" {'>' if lo_open else '>='} {lo}"
        raise ValueError(f"{name}: expected a finite number{bound}, got {v!r}")
    return float(v)


def _int(v, name: str, lo: int) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    return int(v)


def _check_draw_args(model, seed, ee_frame, ik_err_max) -> None:
    """The arguments the seeded scenario generators share (ValueError naming the bad one)."""
    if seed is not None:
        _int(seed, "seed", 0)
    if ee_frame is not None and (not isinstance(ee_frame, str) or not model.existFrame(ee_frame)):
        raise ValueError(f"ee_frame: frame {ee_frame!r} not found in the model")
    _num(ik_err_max, "ik_err_max", lo=0.0, lo_open=True)


def _check_plant(model, plant: str) -> None:
    if plant not in Q_READY:
        raise ValueError(f"plant: no task tables for {plant!r}; have {sorted(Q_READY)}")
    if model.nq != len(Q_READY[plant]):
        raise ValueError(f"model: nq {model.nq} does not match plant {plant!r} (nq {len(Q_READY[plant])})")


def fig8_scenarios(model, plant, n, *, seed, dt=0.01, ratio_range=(0.6, 1.6), ee_frame=None,
                   ik_err_max=0.005) -> list:
    """n seeded figure-8 scenarios for ``plant`` (model: its pinocchio Model).

    Each draw: A_x, A_z uniform in FIG8_AMPLITUDE[plant]; centre uniform in the 0.1 m ball around
    CENTRE_OF_RECORD[plant]; theta uniform in [0, pi/2]; target ratio uniform in ratio_range.
    The start pose q_ready = Q_READY + U(-0.05, 0.05) rad per joint; q0 = the IK solution at the
    path's first point (its centre) from q_ready, so an episode starts ON the path. The period
    comes from :func:`feasible_fig8` from q0. A draw is rejected and redrawn when the IK path
    misses by more than ik_err_max [m], leaves the position limits minus Q_MARGIN, or the rescaled
    estimate misses the drawn ratio by more than 15 % (the IK jumped between branches).

    Guarantees of every returned scenario (tested): the IK path from q0 at dt reaches within
    ik_err_max, stays Q_MARGIN inside the limits, and its speed ratio is within 15 % of ``ratio``.

    Returns a list of dicts: id, plant, ee_frame, dt [s] (the reference sampling AND knot
    spacing), q0 (nq,) rad, params (A_x, A_z, offset (3,), theta, period, cycles=1), ratio (drawn),
    ratio_est, ik_err_max [m].
    """
    _check_plant(model, plant)
    _check_draw_args(model, seed, ee_frame, ik_err_max)
    dt = _num(dt, "dt", lo=0.0, lo_open=True)
    try:
        r_lo, r_hi = (_num(r, "ratio_range", lo=0.0, lo_open=True) for r in ratio_range)
    except (TypeError, ValueError):
        raise ValueError(f"ratio_range: expected (lo, hi) with 0 < lo <= hi, got {ratio_range!r}") from None
    if r_lo > r_hi:
        raise ValueError(f"ratio_range: expected (lo, hi) with 0 < lo <= hi, got {ratio_range!r}")
    ee = ee_frame or ee_frame_of(plant)
    rng = np.random.default_rng(seed)
    a_lo, a_hi = FIG8_AMPLITUDE[plant]
    out, draws = [], 0
    while len(out) < n:
        draws += 1
        if draws > 50 * max(n, 1):
            raise RuntimeError(f"fig8_scenarios: {draws - 1} draws gave only {len(out)} of {n} feasible scenarios "
                               f"for {plant!r}; widen ik_err_max or check the plant tables")
        A_x, A_z = rng.uniform(a_lo, a_hi, 2)
        d = rng.normal(size=3)
        centre = CENTRE_OF_RECORD[plant] + _CENTRE_RADIUS * rng.uniform() ** (1 / 3) * d / np.linalg.norm(d)
        theta = rng.uniform(0.0, math.pi / 2)
        ratio = rng.uniform(*ratio_range)
        q_ready = Q_READY[plant] + rng.uniform(-_JITTER, _JITTER, model.nq)
        q_start, e_start = ik_track(model, ee, q_ready, centre[None, :])
        if e_start[0] > ik_err_max or not within_q_limits(model, q_start, Q_MARGIN):
            continue
        q0 = q_start[0]
        res = feasible_fig8(model, ee, q0, dt, ratio=ratio, A_x=A_x, A_z=A_z, offset=centre, theta=theta)
        if (res["ik_err_max"] > ik_err_max or not res["within_q_limits"]
                or abs(res["ratio_est"] / ratio - 1.0) > 0.15):
            continue
        out.append(dict(id=f"{plant}/fig8/{seed}/{len(out)}", plant=plant, ee_frame=ee, dt=float(dt), q0=q0,
                        params=res["params"], ratio=float(ratio), ratio_est=res["ratio_est"],
                        ik_err_max=res["ik_err_max"]))
    return out


def pickplace_scenarios(model, plant, n, *, seed, n_goals=3, ramps=(0.0, 0.6, 1.2), ee_frame=None,
                        ik_err_max=0.005, min_separation=0.1) -> list:
    """n seeded pick-and-place scenarios for ``plant`` (model: its pinocchio Model).

    Goals are drawn uniformly in GOAL_BOX[plant], each at least ``min_separation`` [m] from the
    previous one (a gato addition: a goal next to the previous one is no pick-and-place move;
    ``min_separation=0`` removes the rejection, and the draws are then those of the reference's
    signature, which has no such test), and kept only if IK from Q_READY (100 DLS updates) reaches it within
    ik_err_max [m] with the solution Q_MARGIN inside the position limits. Start pose
    q0 = Q_READY + U(-0.05, 0.05) rad per joint. ramp [s]: drawn from ``ramps`` - seconds of
    minimum-jerk reference travel between goals (0 = a step reference, which asks for maximal
    acceleration and makes the torque limits bind).

    Returns a list of dicts: id, plant, ee_frame, q0 (nq,) rad, goals (n_goals, 3) m,
    q_goals (n_goals, nq) rad (the IK solutions that certified the goals), ramp [s].
    """
    _check_plant(model, plant)
    _check_draw_args(model, seed, ee_frame, ik_err_max)
    n_goals = _int(n_goals, "n_goals", 1)
    try:
        ramps = tuple(_num(r, "ramps", lo=0.0) for r in ramps)
    except TypeError:
        raise ValueError(f"ramps: expected a non-empty sequence of ramp times >= 0 s, got {ramps!r}") from None
    if not ramps:
        raise ValueError(f"ramps: expected a non-empty sequence of ramp times >= 0 s, got {ramps!r}")
    if isinstance(min_separation, bool) or not isinstance(min_separation, (int, float, np.floating, np.integer)) \
            or not math.isfinite(min_separation) or min_separation < 0:
        raise ValueError(f"min_separation: expected a finite distance >= 0 m, got {min_separation!r}")
    ee = ee_frame or ee_frame_of(plant)
    rng = np.random.default_rng(seed)
    lo, hi = GOAL_BOX[plant]
    out = []
    for i in range(n):
        goals, q_goals, draws = [], [], 0
        while len(goals) < n_goals:
            draws += 1
            if draws > 50 * n_goals:
                raise RuntimeError(f"pickplace_scenarios: could not draw {n_goals} reachable goals for {plant!r}")
            g = rng.uniform(lo, hi)
            if goals and np.linalg.norm(g - goals[-1]) < min_separation:
                continue
            qg, err = ik_track(model, ee, Q_READY[plant], g[None, :], first_iters=_GOAL_IK_ITERS)
            if err[0] > ik_err_max or not within_q_limits(model, qg, Q_MARGIN):
                continue
            goals.append(g)
            q_goals.append(qg[0])
        q0 = Q_READY[plant] + rng.uniform(-_JITTER, _JITTER, model.nq)
        ramp = float(ramps[rng.integers(len(ramps))])
        out.append(dict(id=f"{plant}/pickplace/{seed}/{i}", plant=plant, ee_frame=ee, q0=q0,
                        goals=np.array(goals), q_goals=np.array(q_goals), ramp=ramp))
    return out


def fig8_reference(scenario, N, periods=2):
    """(flat trajectory, sim_time) for a figure-8 scenario.

    The reference is the scenario's figure-8 sampled at its ``dt`` (= the solver's knot
    spacing), ``periods`` periods long (sim_time = periods * period [s]) and padded with
    further cycles of the same curve so that an N-knot window started at any sample
    k <= round(sim_time / dt) never runs off the end: T >= round(sim_time / dt) + N samples.

    Returns:
        (ref, sim_time): ref (6 T,) flat, per sample [x, y, z, 0, 0, 0] (m; orientation slots
        zero, the solver's reference layout); sim_time [s].
    """
    if int(N) < 1 or periods <= 0:
        raise ValueError(f"fig8_reference: N >= 1 and periods > 0 required (got {N}, {periods})")
    p = dict(scenario["params"])
    dt = float(scenario["dt"])
    period = float(p["period"])
    sim_time = float(periods) * period
    need = int(round(sim_time / dt)) + int(N) + 1
    cycles = periods + math.ceil((need * dt - sim_time) / period + 1e-9)
    xyz = fig8_path({**p, "cycles": cycles}, dt)
    ref = np.zeros((len(xyz), 6))
    ref[:, :3] = xyz
    return ref.ravel(), sim_time
