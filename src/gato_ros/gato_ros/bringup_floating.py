"""The floating-base simulation bringup (``scripts/sim.sh --robot go2``; issue 34).

Brings up gato_bringup/launch/go2_sim.launch.yaml (the MuJoCo world publishing joint states and
nav_msgs/Odometry, the FloatingMPC controller node; lockstep) through
:mod:`gato_ros.launch_runner` for a fixed simulated duration, then prints a summary: base height
error to the reference, tilt, yaw drift, each foot's load (MuJoCo normal force), foot slip, the
controller's solve times, holds and refused odometry; writes into the output folder:

    summary.json         the summary numbers
    standing.png         base height error, tilt and the four foot loads over time
    sim_summary.json     the world's record (every 10 ms)
    controller.json      the controller's last status

    python -m gato_ros.bringup_floating --robot go2 --duration 10
    python -m gato_ros.bringup_sim --robot go2 --seed 3      # the same (bringup_sim hands go2 here)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["main", "summarize", "format_summary"]

SETTLED_AFTER_S = 2.0


def summarize(sim: dict, ctl: dict, settled_after_s: float = SETTLED_AFTER_S) -> dict:
    """The standing figures after ``settled_after_s`` (half the run if shorter) from the world's
    record ``sim`` and the controller's status ``ctl``."""
    t = np.asarray(sim["t"])
    late = t >= min(settled_after_s, 0.5 * t[-1])
    h_ref = float(ctl.get("base_height_ref", sim["stand_height"]))
    herr = np.asarray(sim["height"]) - h_ref
    tilt = np.asarray(sim["tilt_deg"])
    yaw = np.unwrap(np.asarray(sim["yaw"]))
    fn = np.asarray(sim["fn"]).reshape(len(t), -1)
    return {"robot": sim["robot"], "simulated_s": float(t[-1]), "settled_after_s": float(t[late][0]),
            "base_height_ref_m": h_ref, "height_error_final_m": float(herr[-1]),
            "height_error_max_settled_m": float(np.abs(herr[late]).max()),
            "tilt_final_deg": float(tilt[-1]), "tilt_max_settled_deg": float(tilt[late].max()),
            "tilt_max_deg": float(tilt.max()), "yaw_drift_settled_deg": float(math.degrees(np.ptp(yaw[late]))),
            "foot_load_mean_settled_n": dict(zip(sim["feet"], fn[late].mean(axis=0).round(2).tolist())),
            "foot_load_min_settled_n": float(fn[late].min()) if fn.size else 0.0,
            "foot_slip_max_m": float(max(sim["slip_m"])), "saturated_periods": sim.get("saturated_periods", 0),
            "commands_ignored": sim.get("commands_ignored", 0), "commands_rejected": sim.get("commands_rejected", 0),
            "controller": ctl}


def format_summary(s: dict) -> str:
    c = s["controller"]
    loads = ", ".join(f"{k} {v:.1f}" for k, v in s["foot_load_mean_settled_n"].items())
    return "\n".join([
        f"{s['robot']} standing, {s['simulated_s']:.2f} s simulated (settled figures after {s['settled_after_s']:.2f} s):",
        f"  base height: reference {s['base_height_ref_m']:.4f} m; error final {s['height_error_final_m'] * 1e3:+.1f} mm,"
        f" max |error| settled {s['height_error_max_settled_m'] * 1e3:.1f} mm",
        f"  tilt: final {s['tilt_final_deg']:.2f} deg, max settled {s['tilt_max_settled_deg']:.2f} deg "
        f"(whole run {s['tilt_max_deg']:.2f}); yaw drift settled {s['yaw_drift_settled_deg']:.2f} deg",
        f"  foot loads (mean settled, N): {loads}; smallest settled {s['foot_load_min_settled_n']:.1f} N; "
        f"foot slip max {s['foot_slip_max_m'] * 1e3:.1f} mm",
        f"  controller: {c.get('ticks', 0)} ticks ({c.get('mpc_ticks', 0)} MPC), {c.get('solves', 0)} solves, "
        f"solve p50 {c.get('solve_ms_p50', float('nan')):.1f} ms, max {c.get('solve_ms_max', float('nan')):.1f} ms "
        f"(last 200); holds {c.get('holds', {})}; odometry refused {c.get('refusals', {})}",
        f"  world: {s['saturated_periods']} saturated periods, {s['commands_ignored']} commands ignored, "
        f"{s['commands_rejected']} rejected"])


def plot(sim: dict, s: dict, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(sim["t"])
    fig, ax = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    ax[0].plot(t, (np.asarray(sim["height"]) - s["base_height_ref_m"]) * 1e3)
    ax[0].axhspan(-20, 20, color="g", alpha=0.1)
    ax[0].set_ylabel("height error [mm]")
    ax[1].plot(t, sim["tilt_deg"])
    ax[1].axhline(2.0, color="g", ls="--")
    ax[1].set_ylabel("tilt [deg]")
    fn = np.asarray(sim["fn"]).reshape(len(t), -1)
    for i, name in enumerate(sim["feet"]):
        ax[2].plot(t, fn[:, i], label=name)
    ax[2].set_ylabel("foot normal force [N]")
    ax[2].set_xlabel("simulated time [s]")
    ax[2].legend(ncol=4, fontsize=8)
    ax[0].set_title(f"{sim['robot']} standing over ROS 2 (FloatingMPC, lockstep)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gato_ros.bringup_floating", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="go2", help="floating-base robot of the registry (go2)")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    ap.add_argument("--seed", type=int, default=-1, help="seeded perturbation of the crouched start (-1: none)")
    ap.add_argument("--base-height", type=float, default=0.0, help="base height reference [m] (0: stand pose)")
    ap.add_argument("--no-odometry", action="store_true", help="the world publishes no odometry (the fallback)")
    ap.add_argument("--start-subscribers", type=int, default=1,
                    help="the world starts once this many nodes subscribe to /joint_states and /odom (default 1: "
                         "the controller; more for a recorder or a listener beside it)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default build/sim/<robot>-<time>)")
    ap.add_argument("--timeout", type=float, default=0.0, help="wall-clock limit [s] (0 = none)")
    a = ap.parse_args(argv)
    if a.duration <= 0:
        ap.error("--duration must be > 0")
    out = a.out or Path("build") / "sim" / f"{a.robot}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    sim_json, ctl_json = (out / "sim_summary.json").resolve(), (out / "controller.json").resolve()
    for f in (sim_json, ctl_json):
        f.unlink(missing_ok=True)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    cmd = [sys.executable, "-m", "gato_ros.launch_runner", "gato_bringup", "go2_sim.launch.yaml", f"robot:={a.robot}",
           f"duration:={a.duration!r}", f"seed:={a.seed}", f"base_height:={float(a.base_height)!r}",
           f"odometry:={'false' if a.no_odometry else 'true'}", f"sim_summary:={sim_json}",
           f"controller_summary:={ctl_json}", f"start_subscribers:={a.start_subscribers}"]
    print(f"[bringup_floating] {a.robot} standing in MuJoCo over ROS 2, lockstep, {a.duration:g} s"
          f"{'' if a.seed < 0 else f', start seed {a.seed}'}{', NO odometry' if a.no_odometry else ''}; "
          f"output in {out}", flush=True)
    t0 = time.monotonic()
    runner = subprocess.Popen(cmd)
    try:
        code = runner.wait(timeout=a.timeout or None)
    except KeyboardInterrupt:
        code = runner.wait()
    except subprocess.TimeoutExpired:
        print(f"[bringup_floating] wall-clock limit of {a.timeout:g} s reached: stopping", file=sys.stderr)
        runner.send_signal(signal.SIGINT)
        code = runner.wait()
    wall = time.monotonic() - t0
    if not sim_json.is_file():
        print(f"[bringup_floating] the world wrote no summary (launch runner exit code {code})", file=sys.stderr)
        return code or 1
    sim = json.loads(sim_json.read_text())
    ctl = json.loads(ctl_json.read_text()) if ctl_json.is_file() else {}
    s = summarize(sim, ctl)
    s.update(wall_s=wall, launch_exit_code=code)
    (out / "summary.json").write_text(json.dumps(s, indent=1))
    try:
        png = plot(sim, s, out / "standing.png")
    except Exception as e:          # a plot is a convenience: the figures are in summary.json
        png = None
        print(f"[bringup_floating] no plot: {e}", file=sys.stderr)
    print(format_summary(s))
    print(f"  wall time {wall:.1f} s; launch exit code {code}\n  plot: {png}\n  summary: {out / 'summary.json'}",
          flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
