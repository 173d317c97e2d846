"""The ``gato`` command line: ``gato smoke`` (a solver smoke run) and friends.

``python -m gato --help`` lists the subcommands.
"""
from __future__ import annotations

import argparse
import sys
import time


def _smoke(args: argparse.Namespace) -> int:
    import numpy as np

    from gato.core.bsqp import BSQP, robot_info, robot_urdf
    from gato.core.native import BUILDS, core as _core
    from gato.core.version import __version__

    urdf = robot_urdf(args.robot)
    s = BSQP(urdf, args.batch, args.N, args.dt, max_sqp_iters=args.iters)
    info = robot_info(args.robot)
    # The registry's ready pose; a user-registered robot without one starts mid-range.
    q0 = np.asarray(info.get("q_ready", 0.5 * (s.limits["q_lo"] + s.limits["q_hi"])), dtype=float)
    x0 = np.r_[q0, np.zeros(s.nv)]
    goal = s.ee_pos(q0) + np.array([0.05, -0.05, 0.05])
    ref = np.tile(np.r_[goal, 0, 0, 0], s.N)
    print(f"gato {__version__} smoke run: {args.robot} (nq={s.nq}, EE frame {info['ee_frame']}), "
          f"N={s.N}, dt={s.dt} s, B={s.batch_size}, {args.iters} SQP iterations")
    hint = ("GATO_NO_AVX2=1 selects the baseline build" if "_core" in BUILDS
            else "the only build in this runtime-only install: GATO_CORE_VARIANTS=AVX2")
    print(f"  core: {_core.__name__} ({_core.ISA}; {hint})")
    t = time.perf_counter()
    r = s.solve(x0, ref)
    wall = time.perf_counter() - t
    ee = s.ee_pos(r.xu[0, -s.nx:][:s.nq])
    print(f"  solve: {wall * 1e3:.2f} ms wall, {r.stats.solve_time_us} us in the solver")
    print(f"  merit {r.stats.initial_merit[0]:.4g} -> {r.stats.final_merit[0]:.4g}, "
          f"iterations {int(r.stats.sqp_iters[0])}, step sizes {np.round(r.stats.step_size[0], 3).tolist()}")
    print(f"  terminal EE error {np.linalg.norm(ee - goal) * 1e3:.1f} mm, first torque u0 = "
          f"{np.round(r.u0(0), 2).tolist()} N·m")
    ok = not r.diverged.any() and r.stats.final_merit[0] < r.stats.initial_merit[0]
    print("  OK" if ok else "  FAILED: the solve did not decrease the merit")
    return 0 if ok else 1


def _view_cases(args: argparse.Namespace, cases) -> int:
    """``--view``: serve the worst ticks of a case file in the browser (gato_ros.replay_view, the live
    view's page; the ROS workspace's Python package, imported only here: the core stays ROS-free)."""
    import importlib

    try:
        replay_view = importlib.import_module("gato_ros.replay_view")
    except ModuleNotFoundError as e:
        print(f"gato replay: --view needs the gato_ros package of the workspace ({e}); "
              "source scripts/activate.sh", file=sys.stderr)
        return 2
    try:
        return replay_view.serve(cases, args.view_host, args.view_port, args.view_seconds)
    except ValueError as e:
        print(f"gato replay: --view: {e}", file=sys.stderr)
        return 2


def _replay(args: argparse.Namespace) -> int:
    from pathlib import Path

    path = Path(args.path)
    if path.suffix == ".npz" and args.view:
        return _view_cases(args, path)
    if path.suffix == ".npz":
        from .replay import rerun_cases

        r = rerun_cases(path, tol=args.tol, urdf=args.urdf)
        print(f"gato replay: {r['n']} cases of {path} ({r['robot']}), standalone re-solve vs the file's u_standalone, "
              f"tolerance {r['tol']:g} N*m" + ("" if r["urdf_matches"] else "; WARNING: the URDF differs from the "
                                               "file's (urdf_sha256)"))
        print(f"  {'tick':>8}  {'max |du| [N*m]':>15}  {'vs recorded [N*m]':>18}  result")
        for k in range(r["n"]):
            rec = r["u_recorded"][k]
            vs_rec = float("nan") if not r["u"][k].size or rec.shape != r["u"][k].shape else \
                float(abs(r["u"][k] - rec).max())
            print(f"  {int(r['ticks'][k]):>8}  {r['max_du'][k]:>15.3g}  {vs_rec:>18.3g}  "
                  f"{'match' if r['match'][k] else 'DIFFERS'}")
        ok = bool(r["match"].all())
        print("  all cases reproduce" if ok else "  some cases do not reproduce")
        return 0 if ok else 1
    from .replay import replay_bag

    s = replay_bag(path, args.out, tol=args.tol, worst=args.worst, html=args.html, robot=args.robot,
                   urdf=args.urdf, torque_source=args.torque_source, log=None if args.quiet else print,
                   start=args.start, end=args.end)
    if args.quiet:
        from .replay import verdict

        print(verdict(s))
        print(f"report: {s['report']}")
    code = 1 if s.get("compared") and not s.get("matched") else 0
    if args.view:
        if not s.get("cases"):
            print("gato replay: --view: no worst ticks to show (nothing was re-solved)", file=sys.stderr)
            return 2
        view_code = _view_cases(args, s["cases"])
        return view_code or code
    return code


def _eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .eval import load_spec, run_eval

    spec = load_spec(args.spec)
    out = Path(args.out or Path("eval_out") / spec.name)
    log = None if args.quiet else (lambda s: print(f"gato eval: {s}", file=sys.stderr))
    r = run_eval(spec, out, ray=args.ray, workers=args.workers, retries=args.retries, progress=not args.quiet,
                 log=log)
    n_err = sum(row["status"] != "ok" for row in r["rows"])
    print(f"gato eval {spec.name}: {len(r['rows'])} episodes in {out} ({r['ran']} ran now, {r['skipped']} done "
          f"before, {n_err} errors){'; INTERRUPTED: rerun to finish' if r['interrupted'] else ''}")
    for s in r["summary"]:
        print(f"  {s['robot']:>8} {s['label']:>14} {s['disturbance_case']:>12} {s['metric']:>20}: "
              f"{s['mean']:.4g} [{s['ci95_lo']:.4g}, {s['ci95_hi']:.4g}] (n={s['n']})")
    print(f"  report: {r['report']}")
    return 130 if r["interrupted"] else (1 if n_err else 0)


def _tune(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .eval import load_spec
    from .eval.tune import run_tune

    spec = load_spec(args.spec)
    out = Path(args.out or Path("eval_out") / f"{spec.name}_tune")
    r = run_tune(spec, out, ray=args.ray, log=None if args.quiet else (lambda s: print(f"gato tune: {s}",
                                                                                         file=sys.stderr)))
    print(r["table"])
    print(f"  parameter file: {r['yaml']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gato", description="gato: batched SQP MPC tools")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("smoke", help="solve one reaching problem and print the result")
    p.add_argument("--robot", default="iiwa14", help="registered robot (default iiwa14)")
    p.add_argument("--N", type=int, default=32, help="horizon knots (default 32)")
    p.add_argument("--dt", type=float, default=0.03125, help="knot spacing [s]")
    p.add_argument("--batch", type=int, default=1, help="batch size B")
    p.add_argument("--iters", type=int, default=20, help="SQP iterations")
    p.set_defaults(func=_smoke)
    p = sub.add_parser("replay", help="re-run a recorded controller run (bag) offline and write a discrepancy "
                       "report; or re-run the cases of a worst_ticks.npz",
                       description="Re-solve every MPC tick of a bag recorded from the gato controller graph "
                       "(gato_ros recorder or ros2 bag record; MCAP or sqlite3), compare with what was recorded, "
                       "compare the model's predictions with the measured states, and write report.md (+ PNGs) "
                       "or report.html, summary.json and worst_ticks.npz. Exit status: 0 replay matches (or "
                       "nothing to compare), 1 replay differs, 2 unreadable input.")
    p.add_argument("path", help="rosbag2 folder, .mcap file, or a worst_ticks.npz case file")
    p.add_argument("--out", default=None, help="output folder (default: <bag>_replay beside the bag)")
    p.add_argument("--tol", type=float, default=1e-9, help="command tolerance [N*m] (default 1e-9)")
    p.add_argument("--worst", type=int, default=5, help="worst ticks saved as replayable cases (default 5)")
    p.add_argument("--html", action="store_true", help="one self-contained report.html instead of report.md")
    p.add_argument("--robot", default=None, help="robot, for bags without a controller configuration")
    p.add_argument("--urdf", default=None, help="URDF to solve with (default: the registered robot's)")
    p.add_argument("--torque-source", default="auto", choices=("auto", "effort", "command"),
                   help="torque for the model-vs-reality check: the joint states' effort field, the controller's "
                   "commands, or auto (efforts when every joint state has them; default)")
    p.add_argument("--start", default=None, metavar="S|Nt",
                   help="replay from here: seconds from the bag's start ('30', '30s'; negative from its end: "
                   "'-60' = the last minute) or a controller tick ('1500t'); found through the MCAP index")
    p.add_argument("--end", default=None, metavar="S|Nt", help="replay up to here (same forms as --start)")
    p.add_argument("--quiet", action="store_true", help="print only the verdict and the report path")
    p.add_argument("--view", action="store_true", help="then show the worst ticks in a browser (URL printed): the "
                   "robot at each tick's state, the recorded and the replayed plan side by side (needs gato_ros)")
    p.add_argument("--view-host", default="127.0.0.1", help="--view: address to serve on (default 127.0.0.1)")
    p.add_argument("--view-port", type=int, default=8080, help="--view: HTTP port (default 8080; 0 = a free one)")
    p.add_argument("--view-seconds", type=float, default=0.0, help="--view: stop after this long (0: at Ctrl-C)")
    p.set_defaults(func=_replay)
    p = sub.add_parser("eval", help="run a scenario sweep (an experiment spec YAML) through the closed-loop "
                       "driver, locally or on Ray; tables, summary with 95 %% CIs, plots, HTML report",
                       description="Run every episode of SPEC (docs/eval.md) through gato.simloop, in a local "
                       "process pool or on a Ray cluster (--ray). Resumable: a rerun skips the episodes already "
                       "in OUT/episodes. Exit status: 0 all episodes ok, 1 some episodes failed (their tracebacks "
                       "are in the report), 2 bad spec, 130 interrupted (partial result written).")
    p.add_argument("spec", help="experiment spec (YAML)")
    p.add_argument("--out", default=None, help="output folder (default eval_out/<spec name>)")
    p.add_argument("--ray", default=None, metavar="auto|ADDRESS|local",
                   help="run on Ray: 'auto' (the cluster `ray start` made), ADDRESS (ray://host:10001 or "
                   "host:6379), 'local' (a private local instance); default: the local process pool")
    p.add_argument("--workers", type=int, default=None, help="local pool size (default: the CPU count)")
    p.add_argument("--retries", type=int, default=2, help="re-runs of an episode whose worker died (default 2)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_eval)
    p = sub.add_parser("tune", help="Ray Tune search (ASHA) over cost weights / solver settings of a spec's "
                       "tune block; writes the best as a controller parameter YAML",
                       description="Search the spec's tune.search space on its scenario set with ASHA early "
                       "stopping, then compare the best configuration with the base one on held-out seeds "
                       "(docs/eval.md). Writes OUT/best_params.yaml (gato_controller parameter file).")
    p.add_argument("spec", help="experiment spec (YAML) with a tune block")
    p.add_argument("--out", default=None, help="output folder (default eval_out/<spec name>_tune)")
    p.add_argument("--ray", default=None, metavar="auto|ADDRESS",
                   help="Ray cluster to tune on (default: a private local instance)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=_tune)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"gato {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
