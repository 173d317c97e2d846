"""Payload experiment (the reference's Fig. 7 protocol, sized to this machine): iiwa14
pick-and-place with an unmodelled pendulum payload hanging from the EE.

The episodes are gato eval's ``payload_pickplace`` study (gato.eval.wrench_studies; spec
bench/specs/payload_pickplace_iiwa14.yaml) run by gato eval's runner (local process pool, or Ray
with --ray; its store under --eval-out makes a rerun resume); this script only sets the grid from
its arguments and prints / plots the table from the result rows.

Per scenario (gato.tasks.pickplace_scenarios(seed=--seed): 3 goals, start pose jittered around
the ready pose, a step or minimum-jerk reference ramp) and configuration, gato.MPC_GATO (bsqp
planner, N = 32, dt = 31.25 ms, SolverParams() defaults unless --solver is given (the documented
figures of record use --solver vel_lim_cost=0.1, and MPC_GATO's observe_first default: the start
pose held for the first period with sensor-fed hypotheses), lockstep PinocchioWorld with the
pendulum, RK4 at 1 ms, torques clamped to the URDF limits) runs run_mpc_goals (5 s timeout per
goal, 5 cm / 1 rad/s (L1) gates). Success = every goal reached, no joint outside its URDF
position or velocity limit at any recorded tick, no planner fallback and no divergence.

Configurations: B = 1 plain MPC; B in --batches with the Fibonacci-sphere sampler
(estimator="fe", ForceHypothesisBatch) and with the identified-weight sampler (estimator="wid",
IdentifiedWrenchSampler, its identifier fed every 1 ms substep; at B = 1 the weight alone); in
--configs also widi (wid with its inertial rows) and swing (gato.swing's PendulumSwingEstimator
under its SwingWrenchBatch: the payload's wrench predicted knot by knot, its mass read from the rod
tension corrected by the EE acceleration).

Why a run failed is reported per criterion (diagnosis of the 0 % first attempt): goals reached,
median distance to the active reference knot [m], the worst joint-velocity ratio |dq| / limit and
its joint, position-limit excursions [rad], fallbacks, divergence (the world's state became
non-finite: with the undamped pendulum the arm whips the payload through its 2-joint chart's
singularity); "goals only" counts the runs that reached every goal whatever the limits did.
--damping sets the pendulum's joint damping [N*m*s/rad] (0 = the reference's undamped payload as
far as known here; a damped payload is a protocol change, reported apart). --rigid replaces the
pendulum by its weight alone (a constant world force -m g at the EE: no swing), to separate the
weight from the swing. "after grace" judges the limits only from t >= --grace s (default 0.1 s):
the payload hangs on an arm at rest from t = 0 and the controller learns of it from the motion,
so the first ticks carry the attachment transient; reported beside the strict criterion.

    python bench/bench_payload.py --out /tmp/payload --n 20 [--batches 1 8 32] [--mass 15]
        [--length 0.5] [--damping 0] [--rigid] [--grace 0.1] [--configs none:1 fe:8 wid:1 ...]
        [--no-clamp] [--solver vel_lim_cost=0.1 ...] [--workers 2] [--ray auto] [--eval-out DIR]
        [--seeds 0 1 2 ...]   (one grid per seed, a per-seed success table)
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

SPEC = Path(__file__).resolve().parent / "specs" / "payload_pickplace_iiwa14.yaml"


def parse_configs(entries):
    """[(B, sampler or None)] of SAMPLER:B entries (none:1 fe:8 wid:32 widi:8 swing:8 fe-swing:8 ...;
    widi: wid with its inertial rows; swing: the swing-aware payload prediction; fe-swing /
    fe-weight: the fe sampler centred on that identifier, hypotheses centre); ValueError naming --configs."""
    out = []
    for c in entries:
        try:
            est, B = c.split(":")
            out.append((int(B), None if est == "none" else est))
        except ValueError:
            raise ValueError(f"--configs: expected SAMPLER:B entries (none:1 fe:8 wid:32), got {c!r}") from None
    return out


def parse_solver(entries):
    """{field: number} of KEY=VALUE SolverParams entries (vel_lim_cost=0.1 ...); ValueError naming --solver."""
    out = {}
    for e in entries or ():
        key, sep, val = e.partition("=")
        try:
            if not sep or not key:
                raise ValueError
            out[key] = float(val)
        except ValueError:
            raise ValueError(f"--solver: expected KEY=NUMBER entries (vel_lim_cost=0.1), got {e!r}") from None
    return out


def build_spec(n, configs, seed=0, mass=15.0, length=0.5, damping=0.0, rigid=False, grace=0.1, clamp=True,
               solver=None):
    """The gato eval spec of the grid: bench/specs/payload_pickplace_iiwa14.yaml with one
    configuration per (B, sampler) (label "B=<B> <sampler>") and the payload as its one
    disturbance case (the pendulum, or with ``rigid`` its weight as a constant world force);
    ``clamp``: the world clamps the command to the URDF effort limits (task option clamp_torques);
    ``solver``: SolverParams fields {name: value} of every configuration (None: the defaults)."""
    from gato.eval import parse_spec

    raw = yaml.safe_load(SPEC.read_text())
    raw["planners"] = []
    for B, est in configs:
        hyp = dict(estimator="wid" if est == "widi" else est or "none", batch_size=int(B), seed=int(seed))
        if est == "widi":  # the wid sampler with its full identified wrench rows
            hyp["inertial_rows"] = True
        if est and est.startswith("fe-"):  # the fe sampler centred on an identifier
            hyp.update(estimator="fe", centre=est[3:])
        cfg = dict(hypotheses=hyp, **({"solver": dict(solver)} if solver else {}))
        raw["planners"].append(dict(label=f"B={B} {est or 'none'}", planner="bsqp", config=cfg))
    load = (dict(kind="constant_wrench", wrench=[0.0, 0.0, -9.81 * mass, 0.0, 0.0, 0.0]) if rigid else
            dict(kind="pendulum", mass=float(mass), length=float(length), damping=float(damping)))
    raw["disturbances"] = {("rigid" if rigid else "pendulum") + f"_{mass:g}kg": [load] if mass else []}
    opts = dict(raw["task"]["options"], grace=grace, clamp_torques=bool(clamp))
    raw["task"] = dict(raw["task"], seeds=[int(seed)], n=int(n), options=opts)
    return parse_spec(raw)


def run_grid(spec, out, workers=1, ray=None):
    """Run (or resume) ``spec`` with gato eval's runner; the rows with B, estimator (None for
    none), scenario, ramp added. RuntimeError naming the episodes that failed."""
    from bench_disturbance import run_rows

    hyp = {p["label"]: p["config"]["hypotheses"] for p in spec.planners}
    ramps = {s["id"]: s["ramp"] for s in spec.scenarios("iiwa14")}
    rows = []
    for x in run_rows(spec, out, workers, ray):
        h = hyp[x["label"]]
        est = "widi" if h.get("inertial_rows") else f"fe-{h['centre']}" if h.get("centre") else h["estimator"]
        rows.append(dict(x, B=h["batch_size"], estimator=None if est == "none" else est,
                         scenario=x["scenario_id"], ramp=ramps[x["scenario_id"]]))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/bench_payload")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="several scenario seeds, one grid each (the hypotheses seeded per seed as with --seed); "
                         "adds a per-seed success table")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--mass", type=float, default=15.0)
    ap.add_argument("--length", type=float, default=0.5)
    ap.add_argument("--damping", type=float, default=0.0, help="pendulum joint damping [N*m*s/rad]")
    ap.add_argument("--rigid", action="store_true", help="the weight alone (constant force), no pendulum")
    ap.add_argument("--grace", type=float, default=0.1, help="limits judged from t >= grace [s] in 'after grace'")
    ap.add_argument("--no-clamp", action="store_true",
                    help="the world applies the command unclamped (the reference API's PinocchioWorld documents "
                         "no effort clamp)")
    ap.add_argument("--configs", nargs="+", default=None,
                    help="SAMPLER:B entries (none:1 fe:8 wid:32 ...) instead of the --batches grid")
    ap.add_argument("--solver", nargs="+", default=None,
                    help="KEY=VALUE SolverParams fields for every configuration (e.g. vel_lim_cost=0.1)")
    ap.add_argument("--workers", type=int, default=1, help="gato eval local pool size (default 1)")
    ap.add_argument("--ray", default=None, help="run on Ray: auto | ADDRESS | local")
    ap.add_argument("--eval-out", default=None, help="gato eval output folder (default: <out>/eval)")
    ap.add_argument("--replot", action="store_true", help="redraw <out>/payload.png from <out>/payload.json")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.replot:
        saved = json.loads((out / "payload.json").read_text())
        b = argparse.Namespace(**saved["args"])
        plot(saved["rows"], configs_of(b), out / "payload.png", b)
        return
    configs = configs_of(a)
    seeds = a.seeds if a.seeds else [a.seed]
    eval_out = Path(a.eval_out or out / "eval")
    rows = []
    for i, seed in enumerate(seeds):
        spec = build_spec(a.n, configs, seed, a.mass, a.length, a.damping, a.rigid, a.grace, not a.no_clamp,
                          parse_solver(a.solver))
        got = run_grid(spec, eval_out / f"seed{seed}" if a.seeds else eval_out, a.workers, a.ray)
        rows += [dict(r, seed=seed) for r in got]
        if a.seeds:
            print(f"[bench_payload] seed {seed} done ({i + 1}/{len(seeds)}): "
                  + ", ".join(f"B={B} {est or 'none'} {sum(r['success'] for r in _cfg_rows(got, B, est))}/"
                              f"{len(_cfg_rows(got, B, est))}" for B, est in configs), flush=True)
    for r in rows:
        if not r["success"] or not a.seeds:
            print(f"B={r['B']:2d} {str(r['estimator']):4s} {r['scenario']} ramp {r['ramp']:.1f}: "
                  f"{'OK ' if r['success'] else 'FAIL'} {r['reason']}{when(r)}", flush=True)
    (out / "payload.json").write_text(json.dumps(dict(args=vars(a), command=" ".join(sys.argv), rows=rows), indent=1,
                                                 default=str))
    print("\n".join(table(rows, configs)))
    if a.seeds:
        print("\n".join(seed_table(rows, configs, seeds)))
    plot(rows, configs, out / "payload.png", a)


def configs_of(a):
    """[(B, sampler or None)] of the parsed arguments: --configs, else B = 1 plain plus fe and wid
    at each of --batches (fe from B = 2)."""
    if a.configs:
        return parse_configs(a.configs)
    return [(1, None)] + [(B, e) for e in ("fe", "wid") for B in a.batches if not (B == 1 and e == "fe")]


def when(r) -> str:
    """' (over a limit at t = a-b s)' for a run with limit violations, else ''."""
    if r.get("first_violation_t") is None:
        return ""
    return f" (over a limit at t = {r['first_violation_t']:.2f}-{r['last_violation_t']:.2f} s)"


def _cfg_rows(rows, B, est):
    return [r for r in rows if r["B"] == B and r["estimator"] == est]


def table(rows, configs):
    """Markdown lines: per configuration, success counts and why the others failed."""
    lines = ["| B | sampler | success | after grace | goals only | goals reached (mean of 3) | diverged | "
             "velocity > limit | position > limit | median distance [mm] | worst \\|dq\\| / limit (median) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for B, est in configs:
        rs = _cfg_rows(rows, B, est)
        fin = [r for r in rs if not r["diverged"]]
        n = len(rs)
        med = lambda k: f"{np.median([r[k] for r in fin]):.2f}" if fin else "-"  # noqa: E731
        lines.append(
            f"| {B} | {est or 'none'} | {sum(r['success'] for r in rs)}/{n} "
            f"({100 * np.mean([r['success'] for r in rs]):.0f} %) | "
            f"{sum(r['success_after_grace'] for r in rs)}/{n} | {sum(r['goals_reached'] == 3 for r in rs)}/{n} | "
            f"{np.mean([r['goals_reached'] for r in rs]):.2f} | "
            f"{sum(r['diverged'] for r in rs)}/{n} | {sum(r['tick_qd_ratio'] > 1 for r in fin)}/{n} | "
            f"{sum(r['pos_excess'] > 1e-6 for r in fin)}/{n} | "
            f"{1000 * np.median([r['median_ref_distance'] for r in fin]) if fin else float('nan'):.0f} | "
            f"{med('tick_qd_ratio')} |")
    return lines


def seed_table(rows, configs, seeds):
    """Markdown lines: success per seed (rows) and configuration (columns), the worst seed and the
    pooled rate last."""
    head = [f"B = {B} {est or 'none'}" for B, est in configs]
    lines = ["| seed | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for seed in seeds:
        cells = []
        for B, est in configs:
            rs = [r for r in _cfg_rows(rows, B, est) if r["seed"] == seed]
            cells.append(f"{sum(r['success'] for r in rs)}/{len(rs)}")
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    worst, pooled = [], []
    for B, est in configs:
        rs = _cfg_rows(rows, B, est)
        rates = [np.mean([r["success"] for r in rs if r["seed"] == seed]) for seed in seeds]
        worst.append(f"{100 * min(rates):.0f} %")
        pooled.append(f"{sum(r['success'] for r in rs)}/{len(rs)} ({100 * np.mean([r['success'] for r in rs]):.1f} %)")
    lines.append("| worst seed | " + " | ".join(worst) + " |")
    lines.append("| pooled | " + " | ".join(pooled) + " |")
    return lines


def plot(rows, configs, path, a):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"B={B}\n{est or 'none'}" for B, est in configs]
    x = np.arange(len(configs))
    parts = {"success": lambda r: r["success"],
             "goals reached, a limit exceeded": lambda r: not r["success"] and r["goals_reached"] == 3,
             "goal missed": lambda r: not r["diverged"] and r["goals_reached"] < 3,
             "world diverged": lambda r: r["diverged"]}
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw=dict(width_ratios=[1, 1]))
    bottom = np.zeros(len(configs))
    for name, pred in parts.items():
        v = np.array([100.0 * np.mean([bool(pred(r)) for r in _cfg_rows(rows, B, est)]) for B, est in configs])
        ax.bar(x, v, bottom=bottom, label=name)
        bottom += v
    ax.set_xticks(x, labels)
    ax.set_ylabel("share of scenarios [%]")
    load = (f"{a.mass:g} kg rigid weight" if a.rigid
            else f"{a.mass:g} kg pendulum ({a.length:g} m, damping {a.damping:g})")
    seeds = f"{len(a.seeds)} seeds x {a.n}" if a.seeds else f"{a.n}"
    ax.set_title(f"iiwa14 pick-and-place, {load}, {seeds} scenarios", fontsize=9)
    ax.legend(fontsize=8)
    # how close the runs that did not diverge came to a velocity limit (the criterion is < 1)
    ratios = [[r["tick_qd_ratio"] for r in _cfg_rows(rows, B, est) if not r["diverged"]] for B, est in configs]
    ax2.boxplot([v if v else [np.nan] for v in ratios], whis=(0, 100))
    ax2.set_xticks(x + 1, labels)
    ax2.axhline(1.0, color="tab:red", ls="--", lw=1, label="velocity limit")
    ax2.set_ylabel("worst |dq| / limit of a run")
    ax2.set_title("closest approach to a joint-velocity limit (box: quartiles, whiskers: min-max)", fontsize=9)
    ax2.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
