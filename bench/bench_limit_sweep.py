"""Joint limits on seeded step scenarios: the distribution of the peak velocity ratio per joint.

Seeded step pick-and-place scenarios (gato.limit_scenarios.step_scenarios: iiwa14, the
ready pose, two step goals at joint offsets drawn up to 1.2 rad, default SolverParams
weights, N = 32, dt = 0.01 s) run in closed loop through gato.simloop on MuJoCoWorld
(1 ms steps, zero-order-hold torque clamped to the URDF effort). For each limits mechanism
and solver integrator: per joint the median / p90 / max over scenarios of the simulated peak
|qd_j| / URDF limit_j (sampled after every 1 ms world step), the worst position and torque
box excess (fraction of the range), and the task time against the unconstrained controller.

    source scripts/activate.sh
    nice python bench/bench_limit_sweep.py --n 30 --seed 2201 \\
        --configs admm:euler,off:euler,admm:semi_implicit,admm:rk4 [--workers 1] [--ray auto] \\
        [--json out.json] [--hist docs/limits_sweep_hist.png] [--out result.md]
    gato eval bench/specs/limits_step_sweep_iiwa14.yaml     # the same episodes, gato eval's tables

The sweep is the gato eval spec bench/specs/limits_step_sweep_iiwa14.yaml (task kind ``step``
of gato.eval.studies) run by gato eval's runner (local process pool, or Ray with --ray); this
script overrides its size, seed and configurations and builds the table / histogram / JSON
from the result rows. The episode store (``--eval-out``) makes a rerun resume.

A config is MECH:INTEGRATOR, MECH one of default|admm|admm_v0|al|barrier|off (default and
admm = the controller's None, i.e. LIMIT_DEFAULTS["admm"]; admm_v0 = the ADMM defaults before
issue 22, ``ADMM_V0``), INTEGRATOR one of euler|semi_implicit|rk4. No wall-clock figures: every
number is a simulated-physics outcome and deterministic.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

from run_info import stamp
from benchmarks_doc import write_result

PLANT = "iiwa14"
SPEC = Path(__file__).resolve().parent / "specs" / "limits_step_sweep_iiwa14.yaml"
#: The controller's ADMM limit defaults before issue 22 (10 inner iterations, velocity-row rho 0.03).
ADMM_V0 = {"iters": 10, "rho_qd": 0.03}
MECHS = ("default", "admm", "admm_v0", "al", "barrier", "off")
INTEGRATORS = ("euler", "semi_implicit", "rk4")


def config_entry(cfg: str) -> dict:
    """The gato eval planner entry of a MECH:INTEGRATOR config (label = cfg)."""
    mech, _, integ = cfg.partition(":")
    if mech not in MECHS or integ not in INTEGRATORS:
        raise ValueError(f"--configs: expected MECH:INTEGRATOR entries, got {cfg!r}")
    c = dict(limits="default" if mech in ("default", "admm", "admm_v0") else mech, integrator=integ)
    if mech == "admm_v0":
        c["limits_kw"] = dict(ADMM_V0)
    return dict(label=cfg, planner="bsqp", config=c)


def sweep_spec(n, seed, configs=None):
    """bench/specs/limits_step_sweep_iiwa14.yaml with n scenarios of ``seed`` and, when given,
    the ``configs`` (MECH:INTEGRATOR strings) as its configurations."""
    from gato.eval import parse_spec

    raw = yaml.safe_load(SPEC.read_text())
    raw["task"] = dict(raw["task"], n=int(n), seeds=[int(seed)])
    if configs is not None:
        raw["planners"] = [config_entry(c) for c in configs]
    return parse_spec(raw)


def run_sweep(spec, out, workers=1, ray=None) -> dict:
    """Run (or resume) the sweep with gato eval's runner (bench_limits.run_spec); {config
    label: per-scenario result dicts (id, step, qd_ratio (per joint), q_excess, u_excess,
    task_time, mean_err, reached)} in scenario order, the --json format. RuntimeError naming
    the episodes that failed."""
    from bench_limits import run_spec

    rows, _ = run_spec(spec, out, workers, ray)
    steps = {sc["id"]: sc["step"] for sc in spec.scenarios(PLANT)}
    results = {}
    for x in rows.values():
        results.setdefault(x["label"], []).append(dict(
            id=x["scenario_id"], step=steps[x["scenario_id"]], qd_ratio=x["qd_ratio"], q_excess=x["q_excess"],
            u_excess=x["u_excess"], task_time=x["task_time"], mean_err=x["mean_goal_error"],
            reached=x["goals_reached"]))
        print(f"{x['label']} {x['scenario_id']} step {steps[x['scenario_id']]:.2f} peak {x['peak_qd_ratio']:.3f} "
              f"q {x['q_excess']:.4f} u {x['u_excess']:.4f} tt {x['task_time']:.2f}", flush=True)
    return results


def table(results):
    lines = ["| limits:integrator | scenarios | peak qd / limit per joint j1..j7: median / p90 / max | "
             "worst over joints: max | scenarios > 1.02 | max q excess | max u excess | task time median [s] |",
             "|---|---|---|---|---|---|---|---|"]
    for key, rows in results.items():
        R = np.array([r["qd_ratio"] for r in rows])
        per = " · ".join(f"{np.median(R[:, j]):.2f}/{np.percentile(R[:, j], 90):.2f}/{R[:, j].max():.3f}"
                         for j in range(R.shape[1]))
        over = int(np.sum(R.max(axis=1) > 1.02))
        lines.append(f"| {key} | {len(rows)} | {per} | {R.max():.3f} | {over} | "
                     f"{max(r['q_excess'] for r in rows):.4f} | {max(r['u_excess'] for r in rows):.4f} | "
                     f"{np.median([r['task_time'] for r in rows]):.2f} |")
    return lines


def histogram(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    bins = np.linspace(0.85, 1.35, 51)
    for key, rows in results.items():
        if not key.startswith("admm"):   # the ADMM variants; off / al / barrier are in the table
            continue
        R = np.array([r["qd_ratio"] for r in rows]).max(axis=1)
        ax.hist(np.clip(R, bins[0], bins[-1]), bins=bins, histtype="step", linewidth=1.6,
                label=f"{key} (n={len(R)}, max {R.max():.3f})")
    ax.axvline(1.0, color="k", linewidth=0.8)
    ax.axvline(1.02, color="r", linestyle="--", linewidth=0.8, label="acceptance 1.02")
    ax.set_xlabel("simulated peak |qd| / URDF limit (worst joint per scenario; clipped to the axis)")
    ax.set_ylabel("scenarios")
    ax.set_title("iiwa14 step scenarios, MuJoCoWorld, default weights, N=32, dt=0.01")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=30)
    p.add_argument("--seed", type=int, default=2201)
    p.add_argument("--configs", default="admm:euler,off:euler")
    p.add_argument("--workers", type=int, default=1, help="gato eval local pool size (default 1)")
    p.add_argument("--ray", default=None, help="run on Ray: auto | ADDRESS | local")
    p.add_argument("--eval-out", default="eval_out", help="gato eval output root (<root>/<spec name>_n<N>_s<seed>)")
    p.add_argument("--json", default=None, help="write the per-scenario results here")
    p.add_argument("--hist", default=None, help="write the histogram PNG here")
    p.add_argument("--out", default=None, help="write a Markdown section to this file (not in docs/)")
    p.add_argument("--load", default=None,
                   help="comma-separated --json files of earlier runs: table / histogram from them, nothing is run")
    args = p.parse_args(argv)
    results = {}
    if args.load:
        for f in args.load.split(","):
            results.update(json.loads(Path(f).read_text()))
        args.configs = ",".join(results)
    if not args.load:
        spec = sweep_spec(args.n, args.seed, args.configs.split(","))
        results = run_sweep(spec, Path(args.eval_out) / f"{spec.name}_n{args.n}_s{args.seed}", args.workers, args.ray)
    lines = table(results)
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.hist:
        histogram(results, args.hist)
    if args.out:
        head = (f"\n### Step-scenario sweep ({stamp()})\n\n"
                f"`python bench/bench_limit_sweep.py --n {args.n} --seed {args.seed} --configs {args.configs}`: "
                "iiwa14, `step_scenarios` (two step goals, joint offsets up to 1.2 rad), default weights, "
                "N = 32, dt = 0.01 s, MuJoCoWorld 1 ms, torque clamped to the URDF effort; peaks sampled "
                "after every world step; run by gato eval (bench/specs/limits_step_sweep_iiwa14.yaml). "
                "Simulated figures, deterministic; no timings.\n\n")
        write_result(args.out, head + "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
