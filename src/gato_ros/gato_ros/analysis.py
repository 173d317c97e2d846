"""Summaries of a simulation-bringup run from its bag: tracking error, solve times,
latency, deadline misses; and a tracking plot. ROS-free (rosbags + numpy + pinocchio).

Tracking error at each /joint_states stamp t: the distance between the EE position
of the measured joints (pinocchio forward kinematics of the robot's URDF) and the
reference at t (the EE reference window stamped t, else the latest earlier window
resampled at t); where that window carries orientations, also the EE orientation error
(the angle of R_ref^T R_ee, issue 30).

A bag records what was on the wire, including what the controller rightly refused: every
/joint_states and /ee_reference message is validated once, like the controller does
(:mod:`gato_ros.inputs`: shapes, NaN / Inf, plausible ranges, stamps ahead of the recording
time, out-of-order joint states), and one that fails is skipped, counted and named in the
summary (``skipped``: per topic the count by kind, the first stamps and the first reason).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gato.core.bsqp import robot_info, robot_urdf

from . import inputs
from .bag import read_bag

__all__ = ["summarize_bag", "format_summary", "plot_tracking"]

T_JS = "/joint_states"
T_REF = "/ee_reference"
T_STATUS = "/gato_controller/status"
T_CMD = "/gato_controller/command"


def _pct(a) -> dict:
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return {}
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max()), "n": int(a.size)}


def summarize_bag(bag_path, robot: str) -> dict:
    """Summary dict of a bag recorded by the simulation bringup (see the module docstring).

    Keys: ``n_ticks``, ``duration_s`` (first to last joint state), ``tracking_error_m``
    {mean, max, p99}, ``orientation_error_deg`` {mean, max, p99, n} over the ticks whose reference
    window carries orientations (the angle of R_ref^T R_ee, the window's slerp at t; empty when
    none does), ``solve_time_us`` and ``latency_us`` percentiles (from
    ControllerStatus, MPC ticks), ``deadline_misses`` and the other counters of the last
    ControllerStatus, ``command_sources`` counts, ``skipped`` (the messages skipped as invalid:
    {topic: {count, by_kind, stamps_ns, first_reason}}, empty when none; ``skipped_notes`` the
    same as lines), and the arrays for plotting under ``series`` (t [s], ee (T, 3), ref (T, 3),
    err (T,), rot_err (T,) [rad], NaN where the window is position only). Raises ValueError
    only when the bag has no /joint_states at all.
    """
    import pinocchio as pin

    msgs = read_bag(bag_path, topics=[T_JS, T_REF, T_STATUS, T_CMD])
    js = msgs.get(T_JS, [])
    refs = msgs.get(T_REF, [])
    if not js:
        raise ValueError(f"{bag_path}: no {T_JS} messages")
    model = pin.buildModelFromUrdf(str(robot_urdf(robot)))
    data = model.createData()
    fid = model.getFrameId(robot_info(robot)["ee_frame"])
    joints = list(model.names)[1:]
    lo, hi = inputs.state_bounds(model, joints)
    skips = inputs.Skips()
    windows = []
    for t_log, m in refs:          # the recording time is the clock a stamp may not run far ahead of
        try:
            windows.append(inputs.reference_window(m, now_ns=t_log))
        except inputs.Rejected as e:
            skips.reject(T_REF, m, e)
    windows.sort(key=lambda w: w.stamp_ns)
    w_stamps = np.array([w.stamp_ns for w in windows], dtype=np.int64)
    seen, t, ee, ref, rot = set(), [], [], [], []
    newest = None
    for t_log, m in js:
        try:
            x = _joint_state(m, t_log, joints, lo, hi, newest)
        except inputs.Rejected as e:
            skips.reject(T_JS, m, e)
            continue
        s = inputs.stamp_ns(m.header)
        if s in seen:          # re-sent states (lockstep start-up)
            continue
        seen.add(s)
        newest = s
        pin.forwardKinematics(model, data, x[:model.nq])
        M = pin.updateFramePlacement(model, data, fid)
        i = int(np.searchsorted(w_stamps, s, side="right")) - 1
        if i < 0:
            continue
        w = windows[i]
        t.append(s / 1e9)
        ee.append(M.translation.copy())
        ref.append(w.sample(s, 1, w.knot_dt)[0])
        r = w.sample_orientations(s, 1, w.knot_dt)
        rot.append(np.nan if r is None else float(np.linalg.norm(pin.log3(pin.exp3(r[0]).T @ M.rotation))))
    ee, ref = np.array(ee).reshape(-1, 3), np.array(ref).reshape(-1, 3)
    err = np.linalg.norm(ee - ref, axis=1) if len(t) else np.zeros(0)
    rot = np.asarray(rot, dtype=np.float64)
    rot_ok = rot[np.isfinite(rot)]
    statuses = [m for _, m in msgs.get(T_STATUS, [])]
    solve = [m.solve_us for m in statuses if m.solve_us > 0]
    lat = [m.latency_us for m in statuses if m.latency_us > 0]
    last = statuses[-1] if statuses else None
    counters = {}
    if last is not None:
        for k in ("ticks", "deadline_misses", "dropped_out_of_order", "rejected_nonfinite", "rejected_names",
                  "rejected_range", "rejected_stamps", "rejected_references", "rejected_wrenches",
                  "stale_events", "fallbacks", "clamped", "holds"):
            counters[k] = int(getattr(last, k, 0))       # 0: a bag of an older message version
    sources: dict = {}
    for _, m in msgs.get(T_CMD, []):
        sources[m.source] = sources.get(m.source, 0) + 1
    return {
        "robot": robot,
        "n_ticks": len(t),
        "duration_s": float(t[-1] - t[0]) if len(t) > 1 else 0.0,
        "tracking_error_m": {"mean": float(err.mean()), "max": float(err.max()),
                             "p99": float(np.percentile(err, 99))} if err.size else {},
        "orientation_error_deg": {"mean": float(np.degrees(rot_ok.mean())), "max": float(np.degrees(rot_ok.max())),
                                  "p99": float(np.degrees(np.percentile(rot_ok, 99))), "n": int(rot_ok.size)}
        if rot_ok.size else {},
        "solve_time_us": _pct(solve),
        "latency_us": _pct(lat),
        "deadline_misses": counters.get("deadline_misses", 0),
        "counters": counters,
        "final_state": (last.state, last.reason) if last is not None else ("", ""),
        "command_sources": sources,
        "skipped": skips.as_dict(),
        "skipped_notes": skips.notes(),
        "series": {"t": np.asarray(t), "ee": ee, "ref": ref, "err": err, "rot_err": rot},
    }


def _joint_state(m, t_log, joints, lo, hi, last):
    """(nq + nv,) [q; qd] of the robot's ``joints`` from a /joint_states message, or
    :class:`gato_ros.inputs.Rejected`: the message's own checks (:func:`gato_ros.inputs.joint_state`,
    the recording time as the clock), every joint present, finite and within (``lo``, ``hi``),
    and a stamp not before ``last`` (the newest state taken; what the controller drops too)."""
    js = inputs.joint_state(m, now_ns=t_log)
    if last is not None and js.stamp_ns < last:
        raise inputs.Rejected("order", f"JointState: stamp {js.stamp_ns / 1e9:.3f} s is older than the previous "
                              f"state's ({last / 1e9:.3f} s)")
    return inputs.joint_vector(js.names, js.position, js.velocity, joints, (lo, hi))


def format_summary(s: dict) -> str:
    """The summary as a few human-readable lines."""
    te, st, lat = s["tracking_error_m"], s["solve_time_us"], s["latency_us"]
    lines = [f"gato simulation summary: {s['robot']}, {s['n_ticks']} ticks over {s['duration_s']:.2f} s "
             "of simulated time"]
    if te:
        lines.append(f"  EE tracking error: mean {te['mean'] * 1e3:.1f} mm, max {te['max'] * 1e3:.1f} mm, "
                     f"p99 {te['p99'] * 1e3:.1f} mm")
    ro = s.get("orientation_error_deg")
    if ro:
        lines.append(f"  EE orientation error: mean {ro['mean']:.2f} deg, max {ro['max']:.2f} deg, "
                     f"p99 {ro['p99']:.2f} deg ({ro['n']} of {s['n_ticks']} ticks with a target orientation)")
    if st:
        lines.append(f"  MPC step (wall): p50 {st['p50'] / 1e3:.2f} ms, p90 {st['p90'] / 1e3:.2f} ms, "
                     f"p99 {st['p99'] / 1e3:.2f} ms, max {st['max'] / 1e3:.2f} ms")
    if lat:
        lines.append(f"  joint state -> command (in the controller): p50 {lat['p50'] / 1e3:.2f} ms, "
                     f"p99 {lat['p99'] / 1e3:.2f} ms")
    c = s["counters"]
    lines.append(f"  deadline misses: {s['deadline_misses']} of {c.get('ticks', 0)} ticks; holds {c.get('holds', 0)}, "
                 f"fallbacks {c.get('fallbacks', 0)}, clamped {c.get('clamped', 0)}, dropped out-of-order "
                 f"{c.get('dropped_out_of_order', 0)}; commands by source {s['command_sources']}")
    if s.get("skipped_notes"):
        lines.append("  skipped as invalid (recorded, refused by the controller too):")
        lines += [f"    {n}" for n in s["skipped_notes"]]
    return "\n".join(lines)


def summary_json(s: dict) -> str:
    """The summary without the plot series, as JSON."""
    return json.dumps({k: v for k, v in s.items() if k != "series"}, indent=1)


def plot_tracking(s: dict, path) -> Path:
    """A PNG of the run from its summary's series: the project's one tracking plot
    (:func:`gato.plotting.plot_tracking`: EE path vs reference in three projections, tracking
    error over simulated time). Raises ValueError when the run has no tick to plot."""
    from gato.sim.plotting import plot_tracking as plot

    ser = s["series"]
    stats = {"timestamps": ser["t"], "ee_actual": ser["ee"], "references": ser["ref"],
             "goal_distances_knot0": ser["err"]}
    rot = ser.get("rot_err")
    if rot is not None and np.any(np.isfinite(rot)):
        stats["orientation_errors_knot0"] = rot
    return Path(plot(stats, path, title=f"gato simulation bringup: {s['robot']}"))
