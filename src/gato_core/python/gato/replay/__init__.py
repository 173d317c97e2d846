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
message definitions stored in the bag.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .. import controller_setup as setup
from ..interface import robot_urdf
from .cases import rerun_cases, standalone_solve, write_cases
from .prediction import Prediction, predict_errors
from .recording import TOPICS, Recording, Tick, load_recording
from .report import Report, plot_prediction, plot_replay
from .resolve import TickReplay, replay_ticks

__all__ = ["replay_bag", "rerun_cases", "standalone_solve", "load_recording", "replay_ticks", "predict_errors",
           "Recording", "Tick", "TickReplay", "Prediction", "TOPICS"]


def _pct(a) -> dict:
    a = np.asarray(a, dtype=np.float64)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {}
    return {"median": float(np.median(a)), "p90": float(np.percentile(a, 90)), "max": float(a.max()),
            "n": int(a.size)}


def _fmt_pct(d: dict, scale=1.0, unit="ms") -> str:
    if not d:
        return "—"
    return f"{d['median'] * scale:.3f} / {d['p90'] * scale:.3f} / {d['max'] * scale:.3f} {unit}"


def replay_bag(bag_path, out_dir=None, *, tol: float = 1e-9, worst: int = 5, html: bool = False,
               robot: str | None = None, urdf=None, torque_source: str = "auto", log=print) -> dict:
    """Replay a bag of the controller graph and write the discrepancy report.

    Args:
        bag_path: rosbag2 folder (MCAP or sqlite3), or a single .mcap file.
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

    Returns the summary dict (also written as ``summary.json``). Raises
    FileNotFoundError / ValueError only when the path is not a readable bag at all;
    everything partial (truncated, missing topics, other message versions) is reported.
    """
    from ..bagio import read_bag

    say = log or (lambda *a, **k: None)
    bag_path = Path(bag_path)
    out = Path(out_dir) if out_dir else bag_path.parent / f"{bag_path.name.removesuffix('.mcap')}_replay"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    say(f"[gato replay] reading {bag_path} ...")
    last = [-1.0]

    def prog(f):
        if f - last[0] >= 0.25 or f >= 1.0:
            last[0] = f
            say(f"[gato replay]   read {f * 100:.0f} %")

    bag = read_bag(bag_path, list(TOPICS.values()), progress=prog)
    rec = load_recording(bag, robot=robot)
    problems = list(dict.fromkeys(list(bag.problems) + list(rec.problems)))  # in order, once each
    for p in problems:
        say(f"[gato replay] note: {p}")
    cfg = rec.config or {}
    summary: dict = {"bag": str(bag_path), "storage": bag.storage, "complete": bool(bag.complete),
                     "robot": rec.robot, "ticks": len(rec.ticks), "reconstructed": rec.reconstructed,
                     "tolerance": tol, "counts": {k: int(v) for k, v in rec.counts.items()}}
    urdf_path = Path(urdf) if urdf else (robot_urdf(summary["robot"]) if summary["robot"] else None)
    if urdf_path is not None and cfg.get("urdf_sha256"):
        local = setup.urdf_sha256(urdf_path)
        summary["urdf_matches"] = local == cfg["urdf_sha256"]
        if not summary["urdf_matches"]:
            problems.append(f"the URDF differs from the recorded one (recorded sha256 {cfg['urdf_sha256'][:12]}…, "
                            f"{urdf_path} has {local[:12]}…): replayed commands are expected to differ; pass "
                            "--urdf with the robot's URDF")

    # ---- 1. re-solve
    rp = None
    if rec.ticks:
        say(f"[gato replay] re-solving {len(rec.ticks)} MPC ticks in order ...")
        step = max(1, len(rec.ticks) // 10)

        def rprog(i, n):
            if i % step == 0 or i == n:
                say(f"[gato replay]   {i}/{n} ticks")

        try:
            rp = replay_ticks(rec, urdf=urdf_path, progress=rprog)
        except ValueError as e:
            problems.append(f"re-solving failed: {e}")
        if rp is not None:
            problems += rp.notes
    t_first = rec.ticks[0].stamp_ns if rec.ticks else 0
    tick_t = np.array([(tk.stamp_ns - t_first) / 1e9 for tk in rec.ticks])
    if rp is not None:
        cmp = np.isfinite(rp.du)
        over = np.flatnonzero(cmp & ~(rp.du <= tol))
        first = int(over[0]) if over.size else None
        summary.update(compared=int(cmp.sum()), over_tolerance=int(over.size),
                       max_du=float(np.nanmax(rp.du)) if cmp.any() else None,
                       max_dplan=float(np.nanmax(rp.dplan)) if np.isfinite(rp.dplan).any() else None,
                       anchored=int(rp.anchored.sum()),
                       state_anchored=int(rp.state_anchored.sum()),
                       solver_state=("recorded" if all(tk.solver_state is not None for tk in rec.ticks) else
                                     "partly recorded" if any(tk.solver_state is not None for tk in rec.ticks)
                                     else "not recorded"),
                       first_over=None if first is None else {
                           "tick": rec.ticks[first].tick, "t_s": float(tick_t[first]),
                           "stamp_ns": rec.ticks[first].stamp_ns, "du": float(rp.du[first])},
                       matched=bool(cmp.any() and over.size == 0))
        wall_rec = np.array([tk.wall_s if tk.wall_s is not None else np.nan for tk in rec.ticks])
        summary["solve_time_recorded_s"] = _pct(wall_rec)
        summary["solve_time_replay_s"] = _pct(rp.wall_s)

    # ---- 2. model vs reality
    pred = None
    if urdf_path is not None and len(rec.state_t_ns) > 1:
        say(f"[gato replay] model vs reality over {len(rec.state_t_ns)} joint states ...")
        try:
            pred = predict_errors(urdf_path, rec.joint_names, rec.state_t_ns, rec.states, rec.commands,
                                  efforts=rec.efforts, torque_source=torque_source)
        except ValueError as e:
            problems.append(f"model vs reality skipped: {e}")
    if pred is not None and pred.t.size:
        summary["prediction"] = {"intervals": int(pred.t.size), "skipped": int(pred.skipped),
                                 "torque_source": pred.torque_source,
                                 "suspects": pred.suspects,
                                 "rms_tau_Nm": dict(zip(pred.joint_names, map(float, pred.rms_tau))),
                                 "share": dict(zip(pred.joint_names, map(float, pred.share))),
                                 "rms_qd_err_rad_s": dict(zip(pred.joint_names, map(float, pred.rms_qd)))}
    elif urdf_path is not None:
        problems.append("model vs reality: no consecutive joint states with a known torque between them "
                        "(no efforts in /joint_states and no commands)")

    # ---- 3. worst ticks
    cases_path = None
    if rp is not None and worst > 0:
        idx, reasons = _worst(rec, rp, pred, tol, worst)
        if idx:
            tau_at = {}
            if pred is not None and pred.t.size:
                t_ns = np.round(pred.t * 1e9).astype(np.int64)
                for i in idx:
                    j = np.flatnonzero(t_ns == rec.ticks[i].stamp_ns)
                    if j.size:
                        tau_at[rec.ticks[i].stamp_ns] = pred.tau_res[j[0]]
            cases_path = write_cases(out / "worst_ticks.npz", rec, rp, idx, reasons, tau_at, urdf=urdf_path)
            summary["cases"] = str(cases_path)

    summary["problems"] = problems
    summary["wall_s"] = time.perf_counter() - t0
    report_path = _write_report(out, bag_path, summary, rec, rp, pred, tick_t, cases_path, html)
    summary["report"] = str(report_path)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    say(f"[gato replay] {verdict(summary)}")
    if pred is not None and pred.suspects:
        say(f"[gato replay] model vs reality: largest prediction-error contributors: {', '.join(pred.suspects)}")
    say(f"[gato replay] report: {report_path}")
    return summary


def _worst(rec, rp, pred, tol, k):
    """Indices of the worst ticks and why: command differences first, then the model's
    residual torque at the tick."""
    picked, reasons = [], []
    du = np.nan_to_num(rp.du, nan=-1.0)
    for i in np.argsort(-du, kind="stable"):
        if len(picked) == k or du[i] <= tol:
            break
        picked.append(int(i))
        reasons.append(f"replayed command differs by {rp.du[i]:.3g} N*m")
    if pred is not None and pred.t.size and len(picked) < k:
        t_ns = np.round(pred.t * 1e9).astype(np.int64)
        pos = {tk.stamp_ns: i for i, tk in enumerate(rec.ticks)}
        norm = np.linalg.norm(pred.tau_res, axis=1)
        for j in np.argsort(-norm, kind="stable"):
            i = pos.get(int(t_ns[j]))
            if i is None or i in picked:
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


def _write_report(out, bag_path, summary, rec, rp, pred, tick_t, cases_path, html):
    r = Report(f"gato replay: {bag_path.name}")
    cfg = rec.config or {}
    r.p(f"Bag `{bag_path}` ({summary['storage']}{'' if summary['complete'] else ', INCOMPLETE: read up to the damage'}); "
        f"robot {summary.get('robot')}; {summary['ticks']} MPC ticks"
        + (" (inputs reconstructed: no SolveInput topic)" if rec.reconstructed else "")
        + f"; recorded with gato {cfg.get('gato_version', '?')}.")
    r.h(1, "Verdict")
    r.p(verdict(summary) + ".")
    if pred is not None and pred.t.size:
        if pred.suspects:
            r.p("Model vs reality: the joints whose motion the model predicts worst are "
                f"**{', '.join(pred.suspects)}** (see below).")
        else:
            r.p(f"Model vs reality: the model explains the measured motion to within {pred.tau_floor:g} N·m RMS "
                "on every joint.")
    if rp is not None:
        r.h(1, "Replayed vs recorded")
        rows = [["commands compared", summary["compared"]], ["beyond tolerance", summary["over_tolerance"]],
                ["max |u replay − u recorded| [N·m]", f"{summary['max_du']:.3g}" if summary["max_du"] is not None
                 else "—"],
                ["max |plan replay − plan recorded|", f"{summary['max_dplan']:.3g}" if summary["max_dplan"]
                 is not None else "—"],
                ["ticks re-anchored to the recorded warm start", summary["anchored"]],
                ["solver state (duals, rho, ADMM) in the bag", summary["solver_state"]],
                ["ticks whose recorded solver state was installed", summary["state_anchored"]],
                ["MPC step time recorded, median / p90 / max", _fmt_pct(summary["solve_time_recorded_s"], 1e3)],
                ["MPC step time replay, median / p90 / max", _fmt_pct(summary["solve_time_replay_s"], 1e3)]]
        r.table(["", "value"], rows)
        wall_rec = np.array([tk.wall_s if tk.wall_s is not None else np.nan for tk in rec.ticks]) * 1e3
        fo = summary["first_over"]
        png = plot_replay(out / "replay.png", tick_t, rp.du, rp.dplan, summary["tolerance"], wall_rec,
                          rp.wall_s * 1e3, None if fo is None else fo["t_s"])
        r.img(png, "Per-tick difference between replayed and recorded commands / plans, and step times")
    if pred is not None and pred.t.size:
        r.h(1, "Model vs reality")
        r.p(f"The model (pinocchio on the solver's URDF) predicts each measured state from the previous one and "
            f"the torque that acted in between ({'the effort the joint states report' if pred.torque_source == 'effort' else 'the controller command, held'}; RK4, "
            f"steps ≤ {pred.max_substep * 1e3:g} ms); {pred.t.size} intervals compared ({pred.skipped} skipped: no "
            "torque known or a gap). The missing generalized force "
            "M(q)·(qd measured − qd predicted)/Δt is what the model lacks on each joint: a heavier link or a payload "
            f"shows on the joints that carry it. Suspects: the joints holding 80 % of the squared total, above "
            f"{pred.tau_floor:g} N·m RMS.")
        rows = []
        for rank, j in enumerate(pred.ranking, 1):
            rows.append([rank, pred.joint_names[j], f"{pred.rms_tau[j]:.4g}", f"{pred.share[j] * 100:.1f} %",
                         f"{pred.rms_qd[j]:.3g}", "◀ suspect" if pred.joint_names[j] in pred.suspects else ""])
        r.table(["rank", "joint", "RMS missing force [N·m]", "share", "RMS qd error [rad/s]", ""], rows)
        r.img(plot_prediction(out / "model_vs_reality.png", pred), "Missing generalized force per joint")
    if cases_path is not None:
        r.h(1, "Worst ticks")
        z = np.load(cases_path)
        rows = [[int(z["tick"][k]), f"{(int(z['stamp_ns'][k]) - rec.ticks[0].stamp_ns) / 1e9:.3f}",
                 str(z["reason"][k]), f"{np.max(np.abs(z['u_standalone'][k] - z['u_recorded'][k])):.3g}"]
                for k in range(len(z["tick"]))]
        r.table(["tick", "t [s]", "why", "standalone vs recorded max |du| [N·m]"], rows)
        r.p(f"Replayable cases (x, goals, xu_warm, URDF hash, solver parameters, observed vs expected): "
            f"`{cases_path}`. Re-run them anywhere with:")
        r.code(f"gato replay {cases_path}")
    r.h(1, "Problems with the bag")
    r.items(summary["problems"] or ["none"])
    r.h(1, "Reproduce")
    r.code(f"gato replay {bag_path} --out {out} --tol {summary['tolerance']:g}" + (" --html" if html else ""))
    if html:
        path = out / "report.html"
        # The PNGs are embedded: one file to attach to an issue.
        path.write_text(r.html(), encoding="utf-8")
    else:
        path = out / "report.md"
        path.write_text(r.markdown(out), encoding="utf-8")
    return path
