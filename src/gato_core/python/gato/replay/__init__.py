"""``gato replay``: re-run a recorded controller run offline and report discrepancies.

Two questions, one report:

1. **Did the solver do what it should have?** Every MPC tick of the bag is re-solved
   from its recorded inputs (measured state, reference window, warm start,
   configuration) with the same settings, in order (:mod:`gato.replay.resolve`), and
   the replayed commands and plans are compared with the recorded ones: per-tick
   differences, the first tick over the tolerance, solve times.
2. **Is the model right?** The model's one-step prediction of every measured state is
   compared with the measurement (:mod:`gato.replay.prediction`), per joint, naming
   the joints whose dynamics the model gets most wrong.

Outputs in the output folder: ``report.md`` with PNG plots (or ``report.html``, one
self-contained page), ``summary.json``, and ``worst_ticks.npz`` — the worst ticks as
replayable cases (:mod:`gato.replay.cases`), which ``gato replay FILE.npz`` re-runs.

ROS-free: bags are read with ``rosbags`` through :mod:`gato.bagio`, decoded with the
message definitions stored in the bag, and streamed tick by tick (:mod:`gato.replay.stream`):
memory does not grow with the bag; ``start`` / ``end`` replay a window found through the
MCAP index.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..planners import controller_setup as setup
from ..core.bsqp import robot_urdf
from .cases import rerun_cases, standalone_solve, write_cases
from .prediction import Prediction, predict_errors
from .recording import TOPICS, Recording, Tick, load_recording
from .report import FLOOR, Report, decimate_rows, plot_prediction, plot_replay
from .resolve import TickReplay, replay_ticks
from .stream import StreamRun, stream_replay
from .streamer import _ee_tracking
from .tracking import tracking_line

__all__ = ["replay_bag", "rerun_cases", "standalone_solve", "load_recording", "replay_ticks", "predict_errors",
           "stream_replay", "Recording", "Tick", "TickReplay", "StreamRun", "Prediction", "TOPICS"]


def _pct(rows, name) -> dict:
    """Median / p90 / max / n of the finite values of column ``name``, read in chunks (exact)."""
    from .rows import percentiles

    if rows.n == 0:
        return {}
    n, qs, mx = percentiles(lambda: (c[name] for _, c in rows.chunks()), [50, 90])
    if n == 0:      # no finite value (e.g. no step results recorded)
        return {}
    return {"median": qs[0], "p90": qs[1], "max": mx, "n": int(n)}


def _fmt_pct(d: dict, scale=1.0, unit="ms") -> str:
    if not d:
        return "—"
    return f"{d['median'] * scale:.3f} / {d['p90'] * scale:.3f} / {d['max'] * scale:.3f} {unit}"


def replay_bag(bag_path, out_dir=None, *, tol: float = 1e-9, worst: int = 5, html: bool = False,
               robot: str | None = None, urdf=None, torque_source: str = "auto", log=print,
               start=None, end=None) -> dict:
    """Replay a bag of the controller graph and write the discrepancy report.

    Bags with ``/gato_controller/solve_input`` are streamed tick by tick in bounded memory
    (:mod:`gato.replay.stream`); bags without it are reconstructed in memory.

    Args:
        bag_path: rosbag2 folder (MCAP or sqlite3; split into several files or not), or a
            single .mcap file.
        out_dir: output folder (default ``<bag>_replay`` beside the bag).
        tol: command tolerance [N*m]: a tick whose max |u_replay - u_recorded| exceeds it
            is a discrepancy.
        worst: how many of the worst ticks go into ``worst_ticks.npz`` (0: none).
        html: write ``report.html`` (self-contained) instead of ``report.md`` + PNGs.
        robot: the robot, for bags that carry no controller configuration.
        urdf: the URDF to solve with (default: the registered robot's).
        torque_source: the torque the model-vs-reality part integrates: "effort" (the
            joint states' effort field), "command" or "auto" (effort when present).
        log: progress printer (``None``: silent).
        start / end: replay only a window: seconds from the bag's start ("12.5", "12.5s";
            negative: from its end, "-60" = the last minute) or a controller tick ("1500t"),
            found through the MCAP index without reading what comes before.

    Returns the summary dict (also written as ``summary.json``). Raises
    FileNotFoundError / ValueError only when the path is not a readable bag at all (or the
    window is empty / needs SolveInput); everything partial (truncated, missing topics, other
    message versions) is reported.
    """
    from .stream import eta_printer, stream_replay

    say = log or (lambda *a, **k: None)
    bag_path = Path(bag_path)
    out = Path(out_dir) if out_dir else bag_path.parent / f"{bag_path.name.removesuffix('.mcap')}_replay"
    say(f"[gato replay] streaming {bag_path}" + ("" if start is None and end is None else
                                                 f" (window {start or 'start'} .. {end or 'end'})") + " ...")
    t0 = time.perf_counter()  # after the first line: the ETA printer's clock starts with the reading
    run = stream_replay(bag_path, robot=robot, urdf=urdf, torque_source=torque_source, tol=tol, worst=worst,
                        start=start, end=end, progress=eta_printer(say) if log else None)
    if not run.streamed:
        if start is not None or end is not None:
            raise ValueError("--start/--end: the bag has no usable /gato_controller/solve_input, and a window of a "
                             "reconstructed run is not supported: replay it whole")
        run = _in_memory_run(bag_path, robot, urdf, torque_source, say)
    out.mkdir(parents=True, exist_ok=True)
    return _report_run(run, bag_path, out, t0, tol=tol, worst=worst, html=html, say=say,
                       window=(start, end) if (start is not None or end is not None) else None)


def _in_memory_run(bag_path, robot, urdf, torque_source, say):
    """The replay of a bag whose tick inputs must be reconstructed (no SolveInput): read whole."""
    from types import SimpleNamespace

    from .bagio import read_bag
    from .stream import StreamRun

    last = [-1.0]

    def prog(f):
        if f - last[0] >= 0.25 or f >= 1.0:
            last[0] = f
            say(f"[gato replay]   read {f * 100:.0f} %")

    bag = read_bag(bag_path, list(TOPICS.values()), progress=prog)
    rec = load_recording(bag, robot=robot)
    run = StreamRun(streamed=False, storage=bag.storage, complete=bool(bag.complete), config=rec.config,
                    robot=rec.robot, joint_names=rec.joint_names, reconstructed=rec.reconstructed,
                    counts={k: int(v) for k, v in rec.counts.items()}, bag_problems=list(bag.problems))
    run.problems = list(rec.problems)
    run.skipped = dict(rec.skipped)
    T = len(rec.ticks)
    cols = dict(tick=np.array([tk.tick for tk in rec.ticks], dtype=np.int64),
                stamp_ns=np.array([tk.stamp_ns for tk in rec.ticks], dtype=np.int64),
                wall_rec=np.array([tk.wall_s if tk.wall_s is not None else np.nan for tk in rec.ticks]),
                has_u=np.array([tk.u_recorded is not None for tk in rec.ticks], dtype=bool))
    run.rows = _tick_columns(cols, T, 0)
    run.n_state = sum(tk.solver_state is not None for tk in rec.ticks)
    run.n_wrench = sum(tk.wrench_hypotheses is not None for tk in rec.ticks)
    run.n_posture = sum(tk.posture_q is not None for tk in rec.ticks)
    # reconstructed ticks never know their posture: the reconstruction's own note covers their differences
    run.n_posture_unknown = 0 if rec.reconstructed else sum(not tk.posture_recorded for tk in rec.ticks)
    run.n_states = len(rec.state_t_ns)
    run.urdf = Path(urdf) if urdf else (robot_urdf(rec.robot) if rec.robot else None)
    ee = _ee_tracking(run.urdf, rec.robot)
    if ee is not None:
        for tk in rec.ticks:
            ee.add(tk)
        run.ee = ee.summary()
    cfg = rec.config or {}
    if run.urdf is not None and cfg.get("urdf_sha256"):
        run.urdf_matches = setup.urdf_sha256(run.urdf) == cfg["urdf_sha256"]
    if T:
        say(f"[gato replay] re-solving {T} MPC ticks in order (inputs reconstructed in memory) ...")
        step = max(1, T // 10)

        def rprog(i, n):
            if i % step == 0 or i == n:
                say(f"[gato replay]   {i}/{n} ticks")

        try:
            rp = replay_ticks(rec, urdf=run.urdf, progress=rprog)
        except ValueError as e:
            run.resolve_error = str(e)
        else:
            cols.update({k: getattr(rp, k) for k in ("u", "du", "dplan", "dwarm", "dstate", "wall_s", "anchored",
                                                     "state_anchored")})
            run.rows, run.resolved = _tick_columns(cols, T, rp.u.shape[1]), True
            run.notes, run.effort_limit = rp.notes, rp.effort_limit
            run.kept = {i: (tk, SimpleNamespace(u=rp.u[i], warm=rp.warm[i], xu=rp.xu[i]))
                        for i, tk in enumerate(rec.ticks)}
    if run.urdf is not None and len(rec.state_t_ns) > 1:
        say(f"[gato replay] model vs reality over {len(rec.state_t_ns)} joint states ...")
        try:
            run.prediction = predict_errors(run.urdf, rec.joint_names, rec.state_t_ns, rec.states, rec.commands,
                                            efforts=rec.efforts, torque_source=torque_source)
        except ValueError as e:
            run.prediction_error = str(e)
    return run


def _tick_columns(cols: dict, T: int, nu: int):
    """The per-tick Rows of an in-memory run (replay columns NaN / False where not re-solved)."""
    from .rows import Rows

    full = dict(u=np.full((T, nu), np.nan), du=np.full(T, np.nan), dplan=np.full(T, np.nan),
                dwarm=np.full(T, np.nan), dstate=np.full(T, np.nan), wall_s=np.full(T, np.nan),
                anchored=np.zeros(T, bool), state_anchored=np.zeros(T, bool))
    full.update(cols)
    order = ("tick", "stamp_ns", "wall_rec", "has_u", "u", "du", "dplan", "dwarm", "dstate", "wall_s", "anchored",
             "state_anchored")
    return Rows.from_arrays(**{k: full[k] for k in order})


def _tick_stats(rows, tol: float) -> dict:
    """The replayed-vs-recorded figures of the summary, from the per-tick rows in one chunked pass."""
    compared = over = anchored = state_anchored = 0
    first = None
    max_du = max_dplan = None
    any_dplan = False
    for a, c in rows.chunks():
        du, dplan = c["du"], c["dplan"]
        cmp = np.isfinite(du)
        compared += int(cmp.sum())
        ov = np.flatnonzero(cmp & ~(du <= tol))
        if first is None and ov.size:
            j = int(ov[0])
            first = (a + j, int(c["tick"][j]), int(c["stamp_ns"][j]), float(du[j]))
        over += int(ov.size)
        max_du, max_dplan = _nanmax(du, max_du), _nanmax(dplan, max_dplan)
        any_dplan = any_dplan or bool(np.isfinite(dplan).any())
        anchored += int(c["anchored"].sum())
        state_anchored += int(c["state_anchored"].sum())
    return dict(compared=compared, over=over, first=first, max_du=max_du if compared else None,
                max_dplan=max_dplan if any_dplan else None, anchored=anchored, state_anchored=state_anchored)


def _nanmax(v, m):
    """max(m, the largest non-NaN value of ``v``) (inf counts, as in np.nanmax); m None: none yet."""
    v = v[~np.isnan(v)]
    if not v.size:
        return m
    return float(v.max()) if m is None else max(m, float(v.max()))


def _report_run(run, bag_path, out, t0, *, tol, worst, html, say, window) -> dict:
    """Summary, worst-tick cases and report of a replay (streamed or in memory)."""
    problems = list(dict.fromkeys(list(run.bag_problems) + list(run.problems)))  # in order, once each
    for p in problems:
        say(f"[gato replay] note: {p}")
    cfg = run.config or {}
    summary: dict = {"bag": str(bag_path), "storage": run.storage, "complete": bool(run.complete),
                     "robot": run.robot, "ticks": run.T, "reconstructed": run.reconstructed,
                     "streamed": run.streamed, "tolerance": tol, "counts": dict(run.counts)}
    # messages skipped as invalid (named in ``problems`` too): {topic: {count, by_kind, stamps_ns, first_reason}}
    summary["skipped"] = dict(getattr(run, "skipped", None) or {})
    if window is not None:
        summary["window"] = {"start": window[0], "end": window[1]}
    if run.streamed:
        from .stream import gap_lines

        # lost messages are named, never a silent hole (the controller's tick counter)
        summary["ticks_missing"] = {t: sum(g["missing"] for g in run.gaps if g["topic"] == t)
                                    for t in (TOPICS["command"], TOPICS["solve_input"])}
        summary["gaps"] = [dict(g) for g in run.gaps]
        for line in gap_lines(run.gaps, run.t_first_ns):
            say(f"[gato replay] note: {line}")
            problems.append(line)
    if run.urdf_matches is not None:
        summary["urdf_matches"] = run.urdf_matches
        if not run.urdf_matches:
            local = setup.urdf_sha256(run.urdf)
            problems.append(f"the URDF differs from the recorded one (recorded sha256 {cfg['urdf_sha256'][:12]}…, "
                            f"{run.urdf} has {local[:12]}…): replayed commands are expected to differ; pass "
                            "--urdf with the robot's URDF")
    if run.resolve_error is not None:
        problems.append(f"re-solving failed: {run.resolve_error}")
    replayed = run.resolved and run.T > 0
    if replayed:
        problems += run.notes
    t_first = run.t_first_ns
    if replayed:
        st = _tick_stats(run.rows, tol)
        first = st["first"]
        summary.update(compared=st["compared"], over_tolerance=st["over"], max_du=st["max_du"],
                       max_dplan=st["max_dplan"], anchored=st["anchored"], state_anchored=st["state_anchored"],
                       solver_state=("recorded" if run.n_state == run.T else "partly recorded" if run.n_state
                                     else "not recorded"),
                       wrench_ticks=run.n_wrench, posture_ticks=run.n_posture,
                       ee_tracking=getattr(run, "ee", None),
                       first_over=None if first is None else {
                           "tick": first[1], "t_s": float((np.int64(first[2]) - np.int64(t_first)) / 1e9),
                           "stamp_ns": first[2], "du": first[3]},
                       matched=bool(st["compared"] and st["over"] == 0))
        if st["over"] and run.n_posture_unknown:
            problems.append(f"{run.n_posture_unknown} ticks carry no joint posture fields (SolveInput recorded by a "
                            "gato before it carried posture tables): if some tracked a joint trajectory or joint hold "
                            "(~/follow_joint_trajectory, ~/joint_trajectory), they solved with posture targets the "
                            "bag does not have and replay without them, so their commands differ")
        summary["solve_time_recorded_s"] = _pct(run.rows, "wall_rec")
        summary["solve_time_replay_s"] = _pct(run.rows, "wall_s")

    pred = run.prediction
    if run.prediction_error is not None:
        problems.append(f"model vs reality skipped: {run.prediction_error}")
    if pred is not None and pred.K:
        summary["prediction"] = {"intervals": int(pred.K), "skipped": int(pred.skipped),
                                 "torque_source": pred.torque_source,
                                 "suspects": pred.suspects,
                                 "rms_tau_Nm": dict(zip(pred.joint_names, map(float, pred.rms_tau))),
                                 "share": dict(zip(pred.joint_names, map(float, pred.share))),
                                 "rms_qd_err_rad_s": dict(zip(pred.joint_names, map(float, pred.rms_qd)))}
    elif run.urdf is not None and run.prediction_error is None:
        problems.append("model vs reality: no consecutive joint states with a known torque between them "
                        "(no efforts in /joint_states and no commands)")

    cases_path = None
    if replayed and worst > 0:
        if run.picks is not None:
            idx, reasons = [i for i, _ in run.picks[:worst]], [r for _, r in run.picks[:worst]]
        else:
            idx, reasons = _worst(run, pred, tol, worst)
        if idx:
            from types import SimpleNamespace

            tau_at = {}
            if pred is not None and pred.K:
                want = {int(run.kept[i][0].stamp_ns) for i in idx}
                for _, c in pred.rows.chunks():   # the residual of the interval each picked tick starts
                    t_ns = np.round(c["t"] * 1e9).astype(np.int64)
                    for j in np.flatnonzero(np.isin(t_ns, list(want))):
                        tau_at.setdefault(int(t_ns[j]), c["tau_res"][j].copy())
            ticks = {i: run.kept[i][0] for i in idx}
            rp = SimpleNamespace(u={i: run.kept[i][1].u for i in idx}, warm={i: run.kept[i][1].warm for i in idx},
                                 xu={i: run.kept[i][1].xu for i in idx})   # the in-sequence plans
            cases_path = write_cases(out / "worst_ticks.npz", SimpleNamespace(ticks=ticks, joint_names=run.joint_names),
                                     rp, idx, reasons, tau_at, urdf=run.urdf)
            summary["cases"] = str(cases_path)

    summary["problems"] = problems
    summary["wall_s"] = time.perf_counter() - t0
    report_path = _write_report(out, bag_path, summary, run, pred, cases_path, html, window)
    summary["report"] = str(report_path)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    say(f"[gato replay] {verdict(summary)}")
    if tracking_line(summary.get("ee_tracking")):
        say(f"[gato replay] {tracking_line(summary.get('ee_tracking'))}")
    if pred is not None and pred.suspects:
        say(f"[gato replay] model vs reality: largest prediction-error contributors: {', '.join(pred.suspects)}")
    say(f"[gato replay] report: {report_path}")
    return summary


def _worst(run, pred, tol, k):
    """Indices of the worst ticks and why: command differences first, then the model's
    residual torque at the tick."""
    picked, reasons = [], []
    du = np.nan_to_num(run.du, nan=-1.0)
    for i in np.argsort(-du, kind="stable"):
        if len(picked) == k or du[i] <= tol:
            break
        picked.append(int(i))
        reasons.append(f"replayed command differs by {run.du[i]:.3g} N*m")
    if pred is not None and pred.K and len(picked) < k:
        t_ns = np.round(pred.t * 1e9).astype(np.int64)
        order = np.argsort(run.stamp_ns, kind="stable")
        norm = np.linalg.norm(pred.tau_res, axis=1)
        for j in np.argsort(-norm, kind="stable"):
            p = int(np.searchsorted(run.stamp_ns[order], t_ns[j]))
            if p >= len(order) or run.stamp_ns[order[p]] != t_ns[j]:
                continue
            i = int(order[p])
            if i in picked:
                continue
            picked.append(i)
            reasons.append(f"model residual {norm[j]:.3g} N*m (largest misprediction)")
            if len(picked) == k:
                break
    return picked, reasons


def verdict(summary: dict) -> str:
    """One line: did the replay reproduce the recording?"""
    if "compared" not in summary:
        return "no MPC tick could be re-solved (see the problems)"
    if summary["compared"] == 0:
        return f"{summary['ticks']} ticks re-solved, but the bag holds no recorded commands to compare with"
    tol = summary["tolerance"]
    if summary["matched"]:
        return (f"replay MATCHES the recording: all {summary['compared']} commands agree to {tol:g} N*m "
                f"(max |du| = {summary['max_du']:.3g} N*m)")
    f = summary["first_over"]
    return (f"replay DIFFERS: {summary['over_tolerance']} of {summary['compared']} commands beyond {tol:g} N*m; "
            f"first at tick {f['tick']} (t = {f['t_s']:.3f} s, |du| = {f['du']:.3g} N*m); max |du| = "
            f"{summary['max_du']:.3g} N*m")


def _write_report(out, bag_path, summary, run, pred, cases_path, html, window=None):
    r = Report(f"gato replay: {bag_path.name}")
    cfg = run.config or {}
    r.p(f"Bag `{bag_path}` ({summary['storage']}{'' if summary['complete'] else ', INCOMPLETE: read up to the damage'}); "
        f"robot {summary.get('robot')}; {summary['ticks']} MPC ticks"
        + (" (inputs reconstructed: no SolveInput topic)" if run.reconstructed else "")
        + ("" if window is None else f" in the window {window[0] or 'start'} .. {window[1] or 'end'}")
        + f"; recorded with gato {cfg.get('gato_version', '?')}.")
    r.h(1, "Verdict")
    r.p(verdict(summary) + ".")
    if pred is not None and pred.K:
        if pred.suspects:
            r.p("Model vs reality: the joints whose motion the model predicts worst are "
                f"**{', '.join(pred.suspects)}** (see below).")
        else:
            r.p(f"Model vs reality: the model explains the measured motion to within {pred.tau_floor:g} N·m RMS "
                "on every joint.")
    if "compared" in summary:
        r.h(1, "Replayed vs recorded")
        rows = [["commands compared", summary["compared"]], ["beyond tolerance", summary["over_tolerance"]],
                ["max |u replay − u recorded| [N·m]", f"{summary['max_du']:.3g}" if summary["max_du"] is not None
                 else "—"],
                ["max |plan replay − plan recorded|", f"{summary['max_dplan']:.3g}" if summary["max_dplan"]
                 is not None else "—"],
                ["ticks re-anchored to the recorded warm start", summary["anchored"]],
                ["solver state (duals, rho, ADMM) in the bag", summary["solver_state"]],
                ["ticks whose recorded solver state was installed", summary["state_anchored"]],
                ["ticks solved under recorded wrench hypotheses (hypotheses=estimator)", summary["wrench_ticks"]],
                ["ticks solved with recorded joint posture targets (joint trajectory / hold)",
                 summary.get("posture_ticks", 0)],
                ["MPC step time recorded, median / p90 / max", _fmt_pct(summary["solve_time_recorded_s"], 1e3)],
                ["MPC step time replay, median / p90 / max", _fmt_pct(summary["solve_time_replay_s"], 1e3)]]
        r.table(["", "value"], rows)
        fo = summary["first_over"]
        png = plot_replay(out / "replay.png", _replay_series(run.rows, run.t_first_ns), summary["tolerance"],
                          None if fo is None else fo["t_s"])
        r.img(png, "Per-tick difference between replayed and recorded commands / plans, and step times")
    ee = summary.get("ee_tracking")
    if ee:
        r.h(1, "EE tracking (recorded)")
        rows = [["ticks", ee["ticks"]],
                ["EE position error, mean / max [mm]", f"{ee['position_mean_mm']:.3g} / {ee['position_max_mm']:.3g}"]]
        if ee["orientation_ticks"]:
            rows.append([f"EE orientation error, mean / max [deg] ({ee['orientation_ticks']} ticks with an "
                         "orientation reference)", f"{ee['orientation_mean_deg']:.3g} / {ee['orientation_max_deg']:.3g}"])
        r.table(["", "value"], rows)
        r.p("The measured EE pose (forward kinematics of each tick's measured joint positions, the robot's EE "
            "frame) against knot 0 of the reference the tick solved on; orientation: the angle of R_ref^T R_ee.")
    if pred is not None and pred.K:
        r.h(1, "Model vs reality")
        r.p(f"The model (pinocchio on the solver's URDF) predicts each measured state from the previous one and "
            f"the torque that acted in between ({'the effort the joint states report' if pred.torque_source == 'effort' else 'the controller command, held'}; RK4, "
            f"steps ≤ {pred.max_substep * 1e3:g} ms); {pred.K} intervals compared ({pred.skipped} skipped: no "
            "torque known or a gap). The missing generalized force "
            "M(q)·(qd measured − qd predicted)/Δt is what the model lacks on each joint: a heavier link or a payload "
            f"shows on the joints that carry it. Suspects: the joints holding 80 % of the squared total, above "
            f"{pred.tau_floor:g} N·m RMS.")
        rows = []
        for rank, j in enumerate(pred.ranking, 1):
            rows.append([rank, pred.joint_names[j], f"{pred.rms_tau[j]:.4g}", f"{pred.share[j] * 100:.1f} %",
                         f"{pred.rms_qd[j]:.3g}", "◀ suspect" if pred.joint_names[j] in pred.suspects else ""])
        r.table(["rank", "joint", "RMS missing force [N·m]", "share", "RMS qd error [rad/s]", ""], rows)
        t0 = float(pred.rows.first("t"))
        tau = decimate_rows(pred.K, lambda a, b: _residual_chunk(pred.rows.read(a, b), t0))
        r.img(plot_prediction(out / "model_vs_reality.png", pred, *tau), "Missing generalized force per joint")
    if cases_path is not None:
        r.h(1, "Worst ticks")
        z = np.load(cases_path)
        rows = [[int(z["tick"][k]), f"{(int(z['stamp_ns'][k]) - run.t_first_ns) / 1e9:.3f}",
                 str(z["reason"][k]), f"{np.max(np.abs(z['u_standalone'][k] - z['u_recorded'][k])):.3g}"]
                for k in range(len(z["tick"]))]
        r.table(["tick", "t [s]", "why", "standalone vs recorded max |du| [N·m]"], rows)
        r.p(f"Replayable cases (x, goals, xu_warm, URDF hash, solver parameters, observed vs expected): "
            f"`{cases_path}`. Re-run them anywhere with:")
        r.code(f"gato replay {cases_path}")
    r.h(1, "Problems with the bag")
    r.items(summary["problems"] or ["none"])
    r.h(1, "Reproduce")
    r.code(f"gato replay {bag_path} --out {out} --tol {summary['tolerance']:g}" + (" --html" if html else "")
           + ("" if window is None else "".join(f" --{k} {v}" for k, v in zip(("start", "end"), window)
                                                if v is not None)))
    if html:
        path = out / "report.html"
        # The PNGs are embedded: one file to attach to an issue.
        path.write_text(r.html(), encoding="utf-8")
    else:
        path = out / "report.md"
        path.write_text(r.markdown(out), encoding="utf-8")
    return path


def _residual_chunk(c, t0: float):
    return c["t"] - t0, c["tau_res"]


def _replay_series(rows, t_first: int) -> dict:
    """The per-tick series of the replay plot, each decimated (:func:`decimate_rows`) from the rows
    read in chunks: {name: (t [s since the first tick], y) or None when it has no finite value}."""
    def series(f):
        def get(a, b):
            c = rows.read(a, b)
            return (c["stamp_ns"] - t_first) / 1e9, f(c)
        return decimate_rows(rows.n, get)

    def finite(name):
        return any(np.isfinite(c[name]).any() for _, c in rows.chunks())

    floor = lambda v: np.maximum(np.nan_to_num(v, nan=FLOOR), FLOOR)  # noqa: E731 - zeros on the log axis
    return {"du": series(lambda c: floor(c["du"])),
            "dplan": series(lambda c: floor(c["dplan"])) if finite("dplan") else None,
            "wall_rec": series(lambda c: c["wall_rec"] * 1e3) if finite("wall_rec") else None,
            "wall_rep": series(lambda c: c["wall_s"] * 1e3)}
