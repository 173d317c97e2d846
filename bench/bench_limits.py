"""Joint limits in closed loop: the controller's limit mechanisms on a simulated iiwa14.

Two workloads, both on gato.worlds.PinocchioWorld (pinocchio ABA + RK4, the
solver's own rigid-body model; the applied torque is clamped to the URDF effort
limits, as a driver would):

* step-reference pick-and-place (gato.tasks.pickplace_scenarios, ramp 0): the
  reference jumps to each goal, the unconstrained MPC drives the joints well past
  the URDF velocity limit; reported: the peak simulated |qd_j| / qd_limit_j, the
  task time (sum over goals of the time until the EE stays within 2 cm of the goal)
  and the mean EE error;
* a slow figure-8 (gato.tasks.fig8_scenarios, speed ratio 0.5 of the limit), where
  no limit binds: RMS EE tracking error and the task time, the time the EE takes to
  complete the figure-8: the run's duration plus the EE's lag behind the reference
  path (the time shift, at 1 ms resolution, that best aligns the EE trace with the
  reference; a controller slowed by limits lags).

The scenarios are gato eval specs (bench/specs/limits_pickplace_iiwa14.yaml,
limits_fig8_iiwa14.yaml; task kinds limits_pickplace / limits_fig8 of gato.eval.studies) run
by gato eval's runner (local process pool, or Ray with --ray); this script only overrides
their size / seed / mechanisms and prints the tables from the result rows. The closed loop
itself is gato.limit_scenarios.run_limits_pickplace / run_limits_fig8 (re-exported here as
run_pickplace / run_fig8). The runner's episode store (``--eval-out``: under
eval_out/<spec name>_n<N>_s<seed>) makes a rerun resume.

    source scripts/activate.sh && python bench/bench_limits.py [--n 3] [--mechs off,default] \\
        [--workers 1] [--ray auto] [--out result.md]
    gato eval bench/specs/limits_pickplace_iiwa14.yaml      # the same episodes, gato eval's tables

No wall-clock figures: every number here is a simulated-physics outcome and is
deterministic (seeded scenarios, bit-deterministic solves).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import yaml

from run_info import stamp
from benchmarks_doc import write_result

# The closed loop and its constants live in gato.limit_scenarios (gato eval's workers import them);
# the old names stay importable from here (test_rowgroups, earlier notebooks).
from gato.limit_scenarios import GOAL_S, LAG_GRID, REACH_TOL, limits_fig8_set, limits_pickplace_set  # noqa: F401
from gato.limit_scenarios import LIMITS_DT as DT, LIMITS_N as N, LIMITS_SOLVER as SOLVER  # noqa: F401
from gato.limit_scenarios import LIMITS_SUBSTEPS as SUBSTEPS, path_lag  # noqa: F401
from gato.limit_scenarios import run_limits_fig8 as run_fig8, run_limits_pickplace as run_pickplace  # noqa: F401

PLANT = "iiwa14"
SPECS = Path(__file__).resolve().parent / "specs"
MECHS = ("off", "default", "telemetry", "al", "barrier", "admm")


def pickplace_set(n, seed=0):
    return limits_pickplace_set(PLANT, n, seed)


def fig8_set(n, seed=0, ratio=0.5):
    return limits_fig8_set(PLANT, n, seed, ratio)


def study_spec(name, n, seed, mechs=None):
    """The gato eval spec bench/specs/<name>.yaml with n scenarios of ``seed`` and, when
    ``mechs`` is given, one configuration per mechanism (label = the mechanism; the solver
    and integrator of the file's first configuration)."""
    from gato.eval import parse_spec

    raw = yaml.safe_load((SPECS / f"{name}.yaml").read_text())
    raw["task"] = dict(raw["task"], n=int(n), seeds=[int(seed)])
    if mechs is not None:
        base = {k: v for k, v in raw["planners"][0]["config"].items() if k != "limits"}
        raw["planners"] = [dict(label=m, planner="bsqp", config=dict(base, limits=m)) for m in mechs]
    return parse_spec(raw)


def run_spec(spec, out, workers=1, ray=None):
    """Run (or resume) ``spec`` with gato eval's runner; the rows by (scenario_id, label)
    and the scenario order. gato.eval.EpisodesFailed naming the episodes that failed."""
    from gato.eval import run_eval_strict

    r = run_eval_strict(spec, out, workers=workers, ray=ray, log=lambda m: print(m, file=sys.stderr, flush=True))
    order = list(dict.fromkeys(x["scenario_id"] for x in r["rows"]))
    return {(x["scenario_id"], x["label"]): x for x in r["rows"]}, order


def _pv(row):
    v = [row["plan_viol_q"], row["plan_viol_qd"], row["plan_viol_u"]]
    return "—" if any(x is None or math.isnan(x) for x in v) else " / ".join(f"{x:.3g}" for x in v)


def _lines(rows, order, mechs, cells):
    """Table rows, scenario-major (the pre-port order): | id | mechanism | cells(row) |."""
    return [f"| {sid} | {m} | {cells(rows[(sid, m)])} |" for sid in order for m in mechs]


def pickplace_lines(rows, order, mechs):
    return _lines(rows, order, mechs, lambda r: f"{r['peak_qd_ratio']:.3f} (j{r['peak_joint'] + 1}) | "
                                                f"{r['task_time']:.3f} | {r['mean_goal_error']:.4f} | {_pv(r)}")


def fig8_lines(rows, order, mechs):
    return _lines(rows, order, mechs, lambda r: f"{r['rms_tracking_error']:.5f} | {r['task_time']:.3f} "
                                                f"({1e3 * r['path_lag']:.0f}) | {r['peak_qd_ratio']:.3f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=3, help="scenarios per workload (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mechs", default=None,
                   help=f"comma-separated limits= values from {list(MECHS)} (default: the specs' five: "
                        "off,default,telemetry,al,barrier)")
    p.add_argument("--workers", type=int, default=1, help="gato eval local pool size (default 1)")
    p.add_argument("--ray", default=None, help="run on Ray: auto | ADDRESS | local")
    p.add_argument("--eval-out", default="eval_out", help="gato eval output root (<root>/<spec name>_n<N>_s<seed>)")
    p.add_argument("--out", default=None, help="write a Markdown section to this file (not in docs/)")
    args = p.parse_args(argv)
    mechs = None if args.mechs is None else args.mechs.split(",")
    for m in mechs or ():
        if m not in MECHS:
            raise ValueError(f"--mechs: expected entries of {list(MECHS)}, got {m!r}")
    lines = []
    pp = study_spec("limits_pickplace_iiwa14", args.n, args.seed, mechs)
    labels = [x["label"] for x in pp.planners]
    rows, order = run_spec(pp, Path(args.eval_out) / f"{pp.name}_n{args.n}_s{args.seed}", args.workers, args.ray)
    n_goals = len(pp.scenarios(PLANT)[0]["goals"])
    lines.append(f"Step-reference pick-and-place (`pickplace_scenarios(seed={args.seed}, ramps=(0,))`, "
                 f"{n_goals} goals x {pp.task['options']['goal_s']} s):\n")
    lines.append("| scenario | limits | peak qd / limit (joint) | task time [s] | mean EE err [m] | "
                 "plan viol q / qd / u |")
    lines.append("|---|---|---|---|---|---|")
    lines += pickplace_lines(rows, order, labels)
    print("\n".join(lines), flush=True)
    f8 = study_spec("limits_fig8_iiwa14", args.n, args.seed, mechs)
    rows, order = run_spec(f8, Path(args.eval_out) / f"{f8.name}_n{args.n}_s{args.seed}", args.workers, args.ray)
    lines.append("")
    lines.append(f"Slow figure-8 (`fig8_scenarios(seed={args.seed})`, speed ratio {f8.task['options']['ratio']} "
                 "of the limit, one period):\n")
    lines.append("| scenario | limits | RMS EE err [m] | task time [s] (lag [ms]) | peak qd / limit |")
    lines.append("|---|---|---|---|---|")
    f8_lines = fig8_lines(rows, order, labels)
    lines += f8_lines
    print("\n".join(lines[-len(f8_lines) - 4:]), flush=True)
    if args.out:
        head = (f"\n## Joint limits in closed loop ({stamp()})\n\n"
                f"`python bench/bench_limits.py --n {args.n}`: iiwa14, N = {N}, "
                f"dt = control period = {DT} s, PinocchioWorld RK4 x{SUBSTEPS}, torque clamped to the URDF "
                "effort; `limits=` of MPCController (`default` = LIMIT_DEFAULTS[\"admm\"]); run by gato eval "
                "(bench/specs/limits_pickplace_iiwa14.yaml, limits_fig8_iiwa14.yaml). Simulated figures, "
                "deterministic; no timings.\n\n")
        write_result(args.out, head + "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
